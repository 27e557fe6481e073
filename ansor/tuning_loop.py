"""The one tuning loop: a session that ends cleanly and a round that proposes, measures, learns.

Every tuner - ``SearchTask.tune`` (``tuning``), the ``TaskScheduler`` and the template tuners
(``autotvm.tuner``) - runs the same two pieces and differs only in what it proposes and which task
goes next:

* ``Session``: the run's lifetime around one ``ProgramMeasurer``. Ctrl-C and
  ``MeasureUnavailableError`` (the builder's or runner's machinery went away) end the run with a
  stop reason instead of an exception - the batch under way is abandoned, the log keeps every
  finished one - and the measurer is closed on the way out, whatever happened.
* ``measure_batch``: measure a batch through the measurer, append it to the log and book it
  (``ProgramMeasurer.commit``: Ctrl-C held back meanwhile), then let the learner (a cost model, a
  template tuner) learn from it. ``run_round`` is one round of a search-policy task around it:
  catch up with the shared log, ask the task's policy for candidates, keep the new ones, measure.
* ``UntunedFirst``: what ``run_round`` puts first in a task's first round (both search-policy
  tuners, unless ``TuningOptions.measure_untuned_first`` is off): the rule-based schedule the task
  gets untuned (``ansor.untuned``), measured, logged and learned like any candidate, so the best a
  run reports is never slower than it and the search evolves from a good measured state.

Keeping this in one place is what makes the tuners agree on the rules: a batch is either wholly
logged and counted or wholly abandoned, nothing is measured twice, and the model learns from
exactly what was booked.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Sequence

from measure.measure import MeasureInput, MeasureResult, MeasureUnavailableError
from measure.measurers import Measurers

from .measurer import STOP_INTERRUPTED, ProgramMeasurer, Recorder, unavailable_stop
from .untuned import untuned_schedule

if TYPE_CHECKING:
    from cost_model.cost_model import CostModel

    from .search_task import SearchTask

__all__ = ["Batch", "Session", "UntunedFirst", "measure_batch", "run_round"]

# Learns from a booked batch: ``CostModel.update``, or a template tuner's own bookkeeping.
Learner = Callable[[Sequence[MeasureInput], Sequence[MeasureResult]], None]


class Session:
    """One tuning run's lifetime: ``with Session(measurer, log_path) as s: s.stop = loop()``.

    On Ctrl-C or ``MeasureUnavailableError`` the block ends, ``stop`` says why (the unavailable
    reason says how to resume from ``log_path``) and the exception goes no further; any other
    exception propagates. Either way the measurer is closed (its log claim given up) and so is
    ``measurers``, which closes the builder and runner only if it created them.
    """

    def __init__(self, measurer: ProgramMeasurer, log_path: str | None,
                 measurers: Measurers | None = None,
                 logger: logging.Logger | None = None, what: str = ""):
        self.measurer = measurer
        self.log_path = log_path
        self.measurers = measurers
        self.logger = logger if logger is not None else logging.getLogger("ansor.tune")
        self.what = what  # names the run in the log messages
        self.stop = ""

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> bool:
        try:
            if kind is not None and issubclass(kind, KeyboardInterrupt):
                # The batch under way (if any) is abandoned: not logged, not counted.
                self.stop = STOP_INTERRUPTED
                self.logger.info("%s: interrupted", self.what or "tuning")
                return True
            if isinstance(err, MeasureUnavailableError):
                # As on Ctrl-C: the batch under way is abandoned, the log keeps the finished ones.
                self.stop = unavailable_stop(err, self.log_path)
                self.logger.info("%s%s", f"{self.what}: " if self.what else "", self.stop)
                return True
            return False
        finally:
            try:
                self.measurer.close()
            finally:
                if self.measurers is not None:
                    self.measurers.close()


@dataclass
class Batch:
    """One measured batch: what was measured and what it cost, with the time spent in each part.
    ``stop``: why the run must stop (the log could not take the batch, which was then not
    booked), else None. An empty batch (``not inputs``) means nothing new was proposed."""

    inputs: list[MeasureInput] = field(default_factory=list)
    results: list[MeasureResult] = field(default_factory=list)
    stop: str | None = None
    search_seconds: float = 0.0
    measure_seconds: float = 0.0
    model_seconds: float = 0.0


def measure_batch(measurer: ProgramMeasurer, workload_key: str, inputs: Sequence[MeasureInput],
                  learn: Learner | None = None, states: Sequence[Any | None] | None = None,
                  write: Recorder | None = None, then: Callable[[Batch], None] | None = None,
                  batch: Batch | None = None,
                  known: Sequence[MeasureResult | None] | None = None) -> Batch:
    """Measure ``inputs``, log and book them (``ProgramMeasurer.commit``; ``states`` and
    ``write`` are passed on, ``then(batch)`` runs with the booking, Ctrl-C still held back: the
    caller's own bookkeeping of the batch), then ``learn`` from them unless the log refused the
    batch. ``batch``: the ``Batch`` to fill (default: a new one). ``known``: per input, a result
    already known (a candidate that failed before it could be measured, e.g. a configuration
    that did not instantiate), logged and booked as given, or None to measure it."""
    out = batch if batch is not None else Batch()
    out.inputs = list(inputs)
    given = list(known) if known is not None else [None] * len(out.inputs)
    todo = [inp for inp, r in zip(out.inputs, given) if r is None]
    t0 = time.monotonic()
    measured = iter(measurer.measure(todo))
    out.measure_seconds += time.monotonic() - t0
    out.results = [next(measured) if r is None else r for r in given]
    out.stop = measurer.commit(workload_key, out.inputs, out.results, states=states, write=write,
                               then=None if then is None else lambda: then(out))
    if out.stop is None and learn is not None:
        t1 = time.monotonic()
        learn(out.inputs, out.results)
        out.model_seconds += time.monotonic() - t1
    return out


class UntunedFirst:
    """``run_round``'s ``first`` that puts the task's rule-based untuned schedule
    (``untuned.untuned_schedule``) first in its first round of a run (no trial booked yet): it is
    then a trial like any other - logged, counted, learned by the cost model - so the best a run
    reports (the log's, ``apply_best``'s) is never slower than the schedule the task runs untuned.
    Already in the log (a resumed run): ``ProgramMeasurer.new_states`` drops it, as any repeat.
    ``state``: that schedule, once asked for (None before the first round)."""

    def __init__(self, task: "SearchTask", measurer: ProgramMeasurer):
        self.task = task
        self._stats = measurer.stats(task.workload_key)
        self.state: Any | None = None

    def __call__(self) -> list[Any]:
        if self._stats.trials:
            return []
        if self.state is None:
            self.state = untuned_schedule(self.task.compute_dag,
                                          hardware_params=self.task.hardware_params)[0]
        return [self.state]


def run_round(task: "SearchTask", policy: Any, measurer: ProgramMeasurer,
              model: "CostModel | None", n: int,
              first: Callable[[], Sequence[Any]] | None = None,
              then: Callable[[Batch], None] | None = None,
              logger: logging.Logger | None = None, borrowed: Sequence[Any] = ()) -> Batch:
    """One round of a search-policy task: up to ``n`` new candidates from ``policy`` (its
    ``generate_measure_candidates`` sees what is measured and the best states), measured, logged,
    booked and learned by ``model``. ``first()``: states to put before the policy's (called after
    the policy proposed, so the search's random stream is the same with or without them).
    ``then(batch)`` runs with the booking (``measure_batch``). ``borrowed``: best states of
    similar tasks, offered to the policy after the task's own (it replays what fits this task)."""
    key = task.workload_key
    stats = measurer.stats(key)
    out = Batch()
    t0 = time.monotonic()
    measurer.catch_up(key, task.compute_dag)  # what another tuner logged meanwhile
    proposed = list(policy.generate_measure_candidates(n, stats.measured_keys,
                                                       stats.best.states() + list(borrowed)) or ())
    out.search_seconds = time.monotonic() - t0
    search_stats = getattr(policy, "last_round_stats", None)
    if search_stats and logger is not None:
        logger.info("%s search: %s", task.desc, ", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in search_stats.items()))
    if first is not None:
        proposed = [*first(), *proposed]
    # The contract says no repeats; a policy that slips must not cost measurements.
    states = measurer.new_states(key, proposed, n)
    if not states:
        return out
    learn = None if model is None else model.update
    return measure_batch(measurer, key, [MeasureInput(task, s) for s in states], learn=learn,
                         then=then, batch=out)
