"""ProgramMeasurer: the measuring half of every tuning loop, shared by all tuners (TVM's name).

A tuner (``SearchTask.tune``, the ``TaskScheduler`` spreading one budget over many tasks, the
template tuners; the round and session they share are ``tuning_loop``'s) decides *what* to
measure; the measurer does the rest the same way for all of them:

* deduplicates candidates against what was measured, per task (``new_states``);
* builds and runs a batch with its builder and runner, a failure of the whole batch becoming one
  error result per candidate instead of an exception (``measure``);
* appends the batch to the log first, then books it - trials, errors, the best schedules per task
  - with Ctrl-C held back meanwhile, so a batch is either wholly logged and counted or wholly
  abandoned (``commit``); a batch the log cannot take (a full disk) is abandoned too and ends the
  run (``STOP_LOG_FAILED``);
* applies the stop rules: consecutive errors, early stopping, trial budget (``stop_reason``);
* lets ``MeasureUnavailableError`` through (the builder's or runner's machinery is gone, e.g. a
  Dask scheduler shut down): every tuner stops on it with the log as it is and says how to resume
  (``unavailable_stop``).

Bookkeeping is per task (by workload key), so one measurer can serve many tasks.
"""
from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import Any, Callable, Iterable, Iterator, Sequence

from measure.local import measure_batch
from measure.measure import (MAX_FLOAT, MeasureErrorNo, MeasureInput, MeasureResult,
                             MeasureUnavailableError, pooled_cost)
from measure.protocols import Builder, Runner
from measure.log_file import RecordFileError

from .shared_log import SharedLog

__all__ = ["BEST_STATES_KEPT", "MAX_CONSECUTIVE_ERRORS", "STOP_BUDGET", "STOP_INTERRUPTED",
           "STOP_LOG_FAILED", "STOP_UNAVAILABLE", "BestStates", "ProgramMeasurer", "TaskStats",
           "error_name", "sigint_deferred", "unavailable_stop"]

# TVM's auto_scheduler gives up after this many failed measurements in a row: by then the
# search space, the workload or the machine is broken, and more trials only burn time.
MAX_CONSECUTIVE_ERRORS = 150
# Measured schedules kept per task, best first, to seed the search. Ansor seeds 20% of a 2048
# population with measured states; a few hundred covers that without keeping every state of a
# long run.
BEST_STATES_KEPT = 512

STOP_BUDGET = "trial budget reached"
STOP_INTERRUPTED = "interrupted (Ctrl-C)"
# A batch could not be appended to the log (a full disk): the run ends with what the log holds.
STOP_LOG_FAILED = "the log file could not be written"
# The builder's or runner's machinery went away (MeasureUnavailableError): nothing more can be
# measured with them; the run ends with what the log holds.
STOP_UNAVAILABLE = "measurements stopped"

# Appends one batch to the log; raises measure.log_file.RecordFileError when it cannot.
Recorder = Callable[[Sequence[MeasureInput], Sequence[MeasureResult]], None]


def error_name(error_no: int) -> str:
    """``MeasureErrorNo`` name of an error number (a number from a file may be unknown)."""
    try:
        return MeasureErrorNo(error_no).name
    except ValueError:
        return f"error {error_no}"


def is_valid(res: MeasureResult) -> bool:
    """A successful measurement with a usable cost."""
    return res.ok and bool(res.costs) and res.mean_cost < MAX_FLOAT


def unavailable_stop(err: MeasureUnavailableError, log_path: str | None) -> str:
    """The stop reason of a run whose measurements became impossible, saying how to resume."""
    if log_path is None:
        return f"{STOP_UNAVAILABLE}: {err}; nothing was logged (no log file)"
    return (f"{STOP_UNAVAILABLE}: {err}; the log {log_path} keeps every finished round (the one "
            "under way is not in it): tune again with the same log to resume, against a live "
            "scheduler or on this machine")


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C back while a finished batch is written and booked, then deliver it: the batch
    is then either wholly in the log and counted, or (interrupted earlier) wholly abandoned."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield  # only the main thread may set handlers; a caller's own handler is left alone
        return
    caught: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if caught:
            raise KeyboardInterrupt


class BestStates:
    """The measured valid schedules, best first by pooled cost (``pooled_cost``: the median over
    a schedule's measurements; ties: the earlier measurement first, as ``best_record`` picks
    it), capped at ``BEST_STATES_KEPT``. ``samples(state)`` is how often a state was measured."""

    def __init__(self) -> None:
        self._items: list[tuple[float, int, Any]] = []
        self._samples: dict[str, list[float]] = {}  # canonical key -> mean cost of each record
        self._seq = 0

    def _insert(self, item: tuple[float, int, Any]) -> None:
        lo, hi = 0, len(self._items)
        while lo < hi:  # bisect on (cost, seq): states themselves do not compare
            mid = (lo + hi) // 2
            if self._items[mid][:2] < item[:2]:
                lo = mid + 1
            else:
                hi = mid
        self._items.insert(lo, item)
        for _, _, dropped in self._items[BEST_STATES_KEPT:]:
            self._samples.pop(dropped.canonical_key(), None)
        del self._items[BEST_STATES_KEPT:]

    def add(self, cost: float, state: Any) -> bool:
        """Add one measurement of ``state``; True if it is (still, or now) the best. A state
        already held gets the cost as one more sample and moves to its pooled cost."""
        key = state.canonical_key()
        held = self._samples.get(key)
        if held is None:
            is_best = not self._items or cost < self._items[0][0]
            self._seq += 1
            self._samples[key] = [cost]
            self._insert((cost, self._seq, state))
            return is_best
        held.append(cost)
        pos = next(j for j, it in enumerate(self._items) if it[2].canonical_key() == key)
        _, seq, st = self._items.pop(pos)
        self._insert((pooled_cost(held), seq, st))
        return bool(self._items) and self._items[0][2] is st

    def cost(self, state: Any) -> float | None:
        """The pooled cost of ``state`` if it is held (None: never measured validly, or dropped
        from the ``BEST_STATES_KEPT`` best)."""
        held = self._samples.get(state.canonical_key())
        return None if held is None else pooled_cost(held)

    def samples(self, state: Any) -> int:
        """How many measurements of ``state`` its pooled cost is over (0: not held)."""
        return len(self._samples.get(state.canonical_key(), ()))

    @property
    def best(self) -> tuple[float, Any] | None:
        return (self._items[0][0], self._items[0][2]) if self._items else None

    def states(self) -> list[Any]:
        return [s for _, _, s in self._items]


class TaskStats:
    """One task's bookkeeping: what was measured, the best schedules, this run's counters."""

    def __init__(self) -> None:
        self.measured_keys: set[str] = set()  # canonical keys of measured (or resumed) states
        self.best = BestStates()
        self.trials = 0  # new measurements booked (resumed records not counted)
        self.errors = 0
        self.consecutive_errors = 0
        self.last_improvement = 0  # trial count at the last improvement of the best
        self.last_error = ""

    def add_resumed(self, state: Any, res: MeasureResult, valid: bool | None = None) -> None:
        """A record from the log: its state counts as measured and may be the best; not a trial.
        ``valid`` overrides ``is_valid(res)`` (a record knows its own validity)."""
        self.measured_keys.add(state.canonical_key())
        if is_valid(res) if valid is None else valid:
            self.best.add(res.mean_cost, state)  # a state logged twice: its costs are pooled

    def remeasure(self, state: Any, res: MeasureResult) -> None:
        """One more measurement of a state measured before (confirming a best): pooled into its
        cost, not a trial, and no improvement for early stopping."""
        if is_valid(res):
            self.best.add(res.mean_cost, state)

    def book(self, state: Any | None, res: MeasureResult) -> bool:
        """One new measurement (``state`` None: the candidate never became a state, e.g. a
        configuration that did not instantiate). Returns True if it is a valid one."""
        self.trials += 1
        if state is not None:
            self.measured_keys.add(state.canonical_key())
        if state is not None and is_valid(res):
            self.consecutive_errors = 0
            if self.best.add(res.mean_cost, state):
                self.last_improvement = self.trials
            return True
        self.errors += 1
        self.consecutive_errors += 1
        self.last_error = f"{error_name(res.error_no)}: {res.error_msg[:200]}"
        return False


class ProgramMeasurer:
    """Measures batches for any number of tasks with one builder and runner and one log.

    ``recorder``: appends a batch to the log (``measure.record.RecordToFile``), or None for no
    log. ``logger``: where per-candidate errors go (named in the too-many-errors message).
    """

    def __init__(self, builder: Builder, runner: Runner,
                 recorder: Recorder | None = None, verbose: int = 0,
                 logger: logging.Logger | None = None):
        self.builder = builder
        self.runner = runner
        self.recorder = recorder
        self.verbose = verbose
        self.logger = logger if logger is not None else logging.getLogger("ansor.measure")
        self._tasks: dict[str, TaskStats] = {}
        # The log's claim (another tuner on it is warned about now) and what others append.
        path = getattr(recorder, "path", None)
        self.shared = SharedLog(path) if isinstance(path, str) else None

    def stats(self, workload_key: str) -> TaskStats:
        """The bookkeeping of one task (created empty on first use)."""
        st = self._tasks.get(workload_key)
        if st is None:
            st = self._tasks[workload_key] = TaskStats()
        return st

    def new_states(self, workload_key: str, states: Iterable[Any], limit: int) -> list[Any]:
        """Up to ``limit`` of ``states``, in order, without repeats and without any measured
        before for this task - by this run, or by another that logged it meanwhile: a policy
        that slips, or a second tuner on the log, must not cost measurements."""
        states = list(states)
        if states and getattr(states[0], "dag", None) is not None:
            self.catch_up(workload_key, states[0].dag)
        measured = self.stats(workload_key).measured_keys
        out: list[Any] = []
        seen: set[str] = set()
        for s in states:
            k = s.canonical_key()
            if k in measured or k in seen:
                continue
            seen.add(k)
            out.append(s)
            if len(out) == limit:
                break
        return out

    def catch_up(self, workload_key: str, dag: Any) -> None:
        """Count the schedules of a task (``dag``: its DAG) that another tuner appended to the
        log since the last look as measured (``shared_log``). A tuner calls this before its
        search proposes, so that the search avoids them; ``new_states`` calls it again."""
        if self.shared is not None:
            n = self.shared.catch_up(workload_key, dag, self.stats(workload_key), self._tasks)
            if n:
                self.logger.info("%d schedule(s) logged by another tuner count as measured", n)

    def measure(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        """Build then run ``inputs``; one result per input. A failure of the whole batch becomes
        an UNKNOWN error result for each input, never an exception - except
        ``MeasureUnavailableError``, which ends the run."""
        if not inputs:
            return []
        try:
            return measure_batch(inputs, self.builder, self.runner, verbose=self.verbose)
        except MeasureUnavailableError:
            raise  # not the candidates' failure: logging them as failed would lose them
        except Exception as err:  # noqa: BLE001 - a measurement failure is the batch's, not ours
            self.logger.exception("measuring a batch of %d candidates failed", len(inputs))
            msg = f"measurement failed: {type(err).__name__}: {err}"
            return [MeasureResult((MAX_FLOAT,), int(MeasureErrorNo.UNKNOWN), msg) for _ in inputs]

    def commit(self, workload_key: str, inputs: Sequence[MeasureInput],
               results: Sequence[MeasureResult], states: Sequence[Any | None] | None = None,
               write: Recorder | None = None,
               then: Callable[[], None] | None = None, remeasure: bool = False) -> str | None:
        """Log the batch, then book it (Ctrl-C deferred meanwhile). ``states``: the state each
        result belongs to (default: each input's; None for a candidate that never became a
        state, logged with a placeholder input). ``write`` replaces the measurer's recorder for
        this batch (a log with more per line). ``then`` runs after booking, still with Ctrl-C
        held back: a caller's own bookkeeping of the batch. ``remeasure``: the batch measured
        states again (``TaskStats.remeasure``: pooled, not trials). Returns why the run must stop
        when the log could not take the batch, which is then abandoned (not booked), else None."""
        write = write if write is not None else self.recorder
        st = self.stats(workload_key)
        with sigint_deferred():
            if write is not None and inputs:
                try:
                    write(inputs, results)
                except RecordFileError as err:
                    # The log is cut back to whole lines; the batch is abandoned, as on Ctrl-C,
                    # so that the counts agree with the log. Logged at INFO: the stop reason
                    # returned carries it to the caller, which reports it once (at ERROR it also
                    # reached stderr through logging, a second line for the same failure).
                    self.logger.info("%s", err)
                    return (f"{STOP_LOG_FAILED}: {err}; the last {len(inputs)} measurement(s) "
                            "are not counted")
                if self.shared is not None:  # ``write`` too appends to the run's log
                    self.shared.wrote(workload_key, inputs)
            if states is None:
                states = [inp.state for inp in inputs]
            for state, res in zip(states, results):
                if remeasure:
                    st.remeasure(state, res)
                elif not st.book(state, res):
                    self.logger.debug("candidate failed: %s", st.last_error)
            if then is not None:
                then()
        return None

    def close(self) -> None:
        """End the run: give up the log's claim. The builder and runner are their owner's to
        close (``measure.measurers.Measurers``)."""
        if self.shared is not None:
            self.shared.close()

    def stop_reason(self, workload_key: str, budget: int,
                    early_stopping: int | None) -> str | None:
        """Why tuning this task must stop now (too many errors in a row, no improvement for
        ``early_stopping`` trials, ``budget`` trials done), or None."""
        st = self.stats(workload_key)
        if st.consecutive_errors >= MAX_CONSECUTIVE_ERRORS:
            last = st.last_error.splitlines()[0] if st.last_error else "?"
            why = (f"{st.consecutive_errors} measurements in a row failed (last: {last}); set "
                   f"the logger '{self.logger.name}' to DEBUG to see every error")
            self.logger.warning("stopping: %s", why)
            return "too many errors: " + why
        if early_stopping is not None and st.trials - st.last_improvement >= early_stopping:
            return (f"early stopping: no improvement in the last "
                    f"{st.trials - st.last_improvement} trials")
        if st.trials >= budget:
            return STOP_BUDGET
        return None
