"""Tuning one task: the measure-and-learn loop behind ``SearchTask.tune``.

Each round (``tuning_loop.run_round``, the round every search-policy tuner runs) the search
policy proposes candidates it has not measured before, the ``ProgramMeasurer`` measures them, the
results are appended to the log at once (a run killed at any moment keeps every finished batch)
and fed to the cost model. The loop stops at the trial budget, when the best
has not improved for ``early_stopping`` trials, when the policy has nothing new to propose, after
``MAX_CONSECUTIVE_ERRORS`` failed measurements in a row, when a batch cannot be appended to the
log (a full disk: the log keeps whole lines only), when the builder's or runner's machinery goes
away (``MeasureUnavailableError``: a Dask scheduler shut down; the stop reason says how to
resume), or on Ctrl-C (``tuning_loop.Session``).

Resuming is implicit (``resume.restore``, shared with the task scheduler): when ``log_file``
already holds records of the task, every schedule in it counts as measured (nothing is measured
twice), its best schedules seed the search, the cost model learns from them and the best cost
starts from the log's. ``num_measure_trials`` counts the new measurements of this call only.

Three schedules are compared. The default schedule (``init_state()``, the naive loop nest) is
timed first, apart from the search (its random stream and candidates are the same with or
without it), for the speed-up figure; when it ran faster than every trial it is the one to keep
(``TuneResult.kept_state``). The rule-based untuned schedule (``ansor.untuned``, what a network
runs for a task nobody tuned) is the first candidate of the first round, as in the task
scheduler (``tuning_loop.UntunedFirst``; ``TuningOptions.measure_untuned_first``): a trial like
any other, logged and learned, so the log's best is never slower than it. The progress and
summary say which one is kept: a run never reports a best slower than either, nor a speed-up
(over the default schedule) below 1x.

Progress (``verbose=1``) is one line per round plus a summary; details - per-candidate errors and
search statistics - go to the ``logging`` logger ``"ansor.tune"``.
"""
from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from cost_model.cost_model import CostModel
from cost_model.lgbm_model import LGBModel
from cost_model.pretrained import load_pretrained
from measure.checks import MAX_PER_ROUND, MAX_TRIALS, check_count, check_seed
from measure.measure import MeasureErrorNo, MeasureInput
from measure.measurers import Measurers, check_measurers
from measure.protocols import Builder, Runner
from measure.log_file import check_log_file
from measure.record import RecordToFile
from measure.runtime import check_num_threads
from measure.target import host_cpu_name

from .measurer import MAX_CONSECUTIVE_ERRORS, STOP_BUDGET, STOP_LOG_FAILED, ProgramMeasurer, is_valid
from .measurer import error_name as _error_name
from .resume import restore, resume_paths
from .tuning_format import format_duration, format_gflops, format_seconds, format_speedup
from .tuning_format import gflops_part as _gflops_part
from .tuning_loop import Session, UntunedFirst, run_round
from .tuning_result import TuneResult

if TYPE_CHECKING:
    from sketch.loop_state import State
    from sketch.search_policy import SearchParams

    from .search_task import SearchTask

__all__ = ["MAX_CONSECUTIVE_ERRORS", "STOP_LOG_FAILED", "TuneResult", "TuningOptions",
           "default_cost_model", "format_duration", "format_gflops", "format_seconds",
           "format_speedup", "tune_task"]

logger = logging.getLogger("ansor.tune")

# The default schedule is measured once per call for the speed-up figure (and is kept when it
# is faster than every tuned schedule, ``TuneResult.kept_state``). A naive large kernel can take many seconds per call, so it gets its own,
# generous timeout ...
DEFAULT_SCHEDULE_TIMEOUT = 120.0
# ... and a first single cold call; only a call shorter than this is timed again, as candidates
# are (warm-up, min_repeat_ms), which for a long call would multiply its cost. On a call this long
# the slow start of an idle core (~250 ms) distorts the figure little.
DEFAULT_PROBE_LONG = 0.25


def default_cost_model(seed: int | None = None, pretrained: bool = True) -> CostModel:
    """The cost model ``tune`` uses when none is given: the learned LightGBM model, starting from
    the pre-trained trees shipped in the package (``cost_model.pretrained``; trees fitted to the
    task's own measurements are added after each round). ``pretrained=False``, or
    ``ANSOR_PRETRAINED_MODEL=none``, or a package without the file: an untrained model, which
    scores randomly until its first training, after the first round."""
    if pretrained:
        model = load_pretrained(seed, host_cpu=host_cpu_name())
        if model is not None:
            return model
    return LGBModel(seed=seed)


@dataclass(frozen=True)
class TuningOptions:
    """How long and how to tune; the names follow TVM's ``auto_scheduler.TuningOptions``.

    * ``num_measure_trials``: new measurements this call may make (resumed records not counted;
      at most ``measure.checks.MAX_TRIALS``).
    * ``num_measures_per_round``: candidates measured per round (the cost model learns between
      rounds; at most ``measure.checks.MAX_PER_ROUND``).
    * ``early_stopping``: stop when the best has not improved for this many trials (None: never).
    * ``log_file``: JSON-lines record file, appended after every round and resumed from if it
      exists (None: nothing is written and nothing resumed). Checked when tuning starts
      (``measure.log_file.RecordFileError`` if it cannot be appended to); a write that fails
      later (a full disk) ends the run with what the log holds.
    * ``verbose``: 0 prints nothing, 1 one line per round and a summary, 2 also the builder's and
      runner's per-candidate marks and the policy's own output.
    * ``builder`` / ``runner``: ``"local"`` (created and closed by the call) or a
      ``measure.protocols.Builder`` / ``Runner`` (used as given, left open; ``measure.measurers``):
      ``LocalBuilder`` / ``LocalRunner``, or ``measure.dask_builder.DaskBuilder`` /
      ``measure.dask_runner.DaskRunner`` to build and measure on a Dask cluster.
    * ``seed``: seeds the search policy and the default cost model; a fixed seed makes a run
      reproducible up to measurement noise.
    * ``search_params``: ``sketch.search_policy.SearchParams`` for the default policy (None:
      its defaults).
    * ``measure_untuned_first``: a task's first round of the run starts with its rule-based
      untuned schedule (``ansor.untuned``; ``tuning_loop.UntunedFirst``), measured and logged as
      a trial, so the best is never slower than it. False: only the policy's candidates (e.g. to
      compare search policies alone, or to keep a fixed-seed run's candidates as before).
    """

    num_measure_trials: int = 200
    num_measures_per_round: int = 64
    early_stopping: int | None = None
    log_file: str | os.PathLike | None = None
    verbose: int = 1
    builder: str | Builder = "local"
    runner: str | Runner = "local"
    seed: int | None = None
    search_params: "SearchParams | None" = None
    measure_untuned_first: bool = True

    def __post_init__(self) -> None:
        # Upper bounds too (measure.checks): a huge count used to be accepted and fill memory.
        for name, low, high in (("num_measure_trials", 0, MAX_TRIALS), ("verbose", 0, None),
                                ("num_measures_per_round", 1, MAX_PER_ROUND),
                                ("early_stopping", 1, MAX_TRIALS)):
            if getattr(self, name) is not None or name != "early_stopping":
                check_count(f"TuningOptions.{name}", getattr(self, name), low, high)
        if self.log_file is not None and not isinstance(self.log_file, (str, os.PathLike)):
            raise TypeError(f"TuningOptions.log_file must be a path or None, got "
                            f"{type(self.log_file).__name__}")
        check_measurers("TuningOptions.", self.builder, self.runner)
        if not isinstance(self.measure_untuned_first, bool):
            raise TypeError(f"TuningOptions.measure_untuned_first must be True or False, got "
                            f"{self.measure_untuned_first!r}")
        # numpy's seeding takes 0 <= seed < 2**32 (-1 used to fail deep inside numpy).
        object.__setattr__(self, "seed", check_seed("TuningOptions.seed", self.seed))


# ---- helpers ------------------------------------------------------------------------------------

@contextlib.contextmanager
def _runner_settings(runner: Runner, **attrs: Any) -> Iterator[None]:
    """Temporarily change a runner's measurement settings. They are read per ``run`` call, so
    this reuses the runner's worker instead of starting a second one (~1 s and its memory)."""
    saved = {k: getattr(runner, k) for k in attrs}
    for k, v in attrs.items():
        setattr(runner, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(runner, k, v)


# ---- the tuning run -----------------------------------------------------------------------------

class _Run:
    """One call of ``tune_task``: its state, so that the loop body stays readable."""

    def __init__(self, task: "SearchTask", options: TuningOptions, cost_model: CostModel | None,
                 search_policy: Any | None):
        self.task = task
        self.opts = options
        self.tag = f"[{task.desc}]"
        self.flop = float(task.flop_count or 0.0)
        self.policy = search_policy
        # A given policy carries its own model; updating that one keeps it learning.
        self.model = cost_model if cost_model is not None else (
            getattr(search_policy, "cost_model", None) if search_policy is not None
            else default_cost_model(options.seed))
        self.log_path = None if options.log_file is None else os.fspath(options.log_file)
        # "local" ones are created here and closed by ``run``; given ones are left open.
        self.measurers = Measurers(options.builder, options.runner)
        self.measurer = ProgramMeasurer(
            self.measurers.builder, self.measurers.runner, None if self.log_path is None else RecordToFile(self.log_path),
            verbose=max(0, options.verbose - 1), logger=logger)
        self.stats = self.measurer.stats(task.workload_key)
        self.resumed = 0
        self.search_seconds = 0.0
        self.model_seconds = 0.0
        self.measure_seconds = 0.0
        self.default_cost: float | None = None
        self.default_state: "State | None" = None
        self.default_note = ""
        self.untuned = UntunedFirst(task, self.measurer) if options.measure_untuned_first else None
        self.untuned_cost: float | None = None
        self.t_start = time.monotonic()
        self.t_loop = self.t_start

    # ---- output ----
    def say(self, text: str) -> None:
        if self.opts.verbose >= 1:
            print(text, flush=True)

    def _gflops(self, cost: float | None) -> float | None:
        if cost is None or not self.flop or cost <= 0:
            return None
        return self.flop / cost / 1e9

    def progress_line(self, round_best: float | None) -> str:
        """``[matmul(1024, 1024, 1024)] trials 128/200 | best 0.52 ms 4130 GFLOPS | round best
        0.61 ms | errors 3 | 41 s elapsed, ~23 s left``."""
        budget = self.opts.num_measure_trials
        b = self.kept()
        best = "-" if b is None else f"{format_seconds(b[0])}{_gflops_part(self._gflops(b[0]))}"
        rb = "-" if round_best is None else format_seconds(round_best)
        now = time.monotonic()
        trials = self.stats.trials
        left = budget - trials
        eta = ""
        if trials and left > 0:
            # The average time per trial so far (search + measurement): rounds cost about the same.
            eta = f", ~{format_duration((now - self.t_loop) / trials * left)} left"
        return (f"{self.tag} trials {trials}/{budget} | best {best} | round best {rb} | "
                f"errors {self.stats.errors} | {format_duration(now - self.t_start)} elapsed{eta}")

    # ---- set-up ----
    def make_policy(self) -> Any:
        try:
            from sketch.search_policy import SearchParams, SketchPolicy  # noqa: PLC0415 - optional: its ImportError gets the hint below
        except ImportError as err:
            raise RuntimeError("the default search policy (sketch.search_policy.SketchPolicy) "
                               f"is not available: {err}; pass search_policy=...") from err

        params = self.opts.search_params if self.opts.search_params is not None else SearchParams()
        return SketchPolicy(self.task, self.model, params=params, seed=self.opts.seed,
                            verbose=max(0, self.opts.verbose - 1))

    def resume(self) -> None:
        """Load this task's records of this toolchain from the log (``resume.restore``): measured
        keys, best states, cost model, best cost."""
        paths = resume_paths(self.log_path)
        if not paths:
            return
        restored = restore(paths, [self.task], self.measurer, self.model)
        self.resumed = len(restored.inputs)
        self.model_seconds += restored.model_seconds
        other_target = restored.other_target
        other_mode = sum(log.other_cache for log in restored.logs)  # timed warm vs cold
        if self.resumed or other_target or other_mode:
            b = self.stats.best.best
            best = ("no valid record" if b is None
                    else f"best {format_seconds(b[0])}{_gflops_part(self._gflops(b[0]))}")
            other = (f"; {other_target} record(s) from another CPU/toolchain ignored"
                     if other_target else "") + (
                f"; {other_mode} record(s) timed in the other cache mode than this run's "
                f"({restored.logs[0].mode}) ignored" if other_mode else "")
            self.say(f"{self.tag} resuming from {paths[0]}: {self.resumed} record(s), {best}{other}")
            logger.info("resumed %d records of %s from %s (%d of another toolchain ignored)",
                        self.resumed, self.task.desc, paths[0], other_target)

    def measure_default(self, builder: Builder, runner: Runner) -> None:
        """Time the default schedule (``init_state()``) once, for the speed-up figure."""
        inp = MeasureInput(self.task, self.task.compute_dag.init_state())
        t0 = time.monotonic()
        built = builder.build([inp])
        res = built[0]
        if res.error_no != MeasureErrorNo.NO_ERROR:
            self.default_note = f"not measured: it did not build ({_error_name(res.error_no)})"
        else:
            with _runner_settings(runner, number=1, repeat=1, min_repeat_ms=0.0, warmup_ms=0.0,
                                  timeout=max(runner.timeout, DEFAULT_SCHEDULE_TIMEOUT),
                                  check_correctness=False):
                r = runner.run([inp], built)[0]
            if r.ok and r.mean_cost < DEFAULT_PROBE_LONG:
                # Short enough to time as the candidates are timed, with at least a warm-up and a
                # 50 ms repeat: a single cold call of a short kernel can be off by 10x or more.
                with _runner_settings(runner, timeout=max(runner.timeout, DEFAULT_SCHEDULE_TIMEOUT),
                                      warmup_ms=max(runner.warmup_ms, 100.0),
                                      min_repeat_ms=max(runner.min_repeat_ms, 50.0),
                                      check_correctness=False):
                    r = runner.run([inp], built)[0]
            if r.ok:
                self.default_cost, self.default_state = r.mean_cost, inp.state
            elif r.error_no == MeasureErrorNo.RUN_TIMEOUT:
                self.default_note = (f"not measured: one call takes longer than "
                                     f"{max(runner.timeout, DEFAULT_SCHEDULE_TIMEOUT):g} s")
            else:
                self.default_note = f"not measured: {_error_name(r.error_no)}"
                logger.info("default schedule of %s: %s: %s", self.task.desc,
                            _error_name(r.error_no), r.error_msg[:300])
        self.measure_seconds += time.monotonic() - t0
        if self.default_cost is not None:
            self.say(f"{self.tag} default schedule: {format_seconds(self.default_cost)}"
                     f"{_gflops_part(self._gflops(self.default_cost))}")
        else:
            self.say(f"{self.tag} default schedule {self.default_note}")

    def book_untuned(self) -> None:
        """The untuned schedule's cost once its round is booked (or, in a resumed run, the log's)."""
        assert self.untuned is not None and self.untuned.state is not None
        self.untuned_cost = self.stats.best.cost(self.untuned.state)
        if self.untuned_cost is not None:
            self.say(f"{self.tag} untuned schedule (rule-based): {format_seconds(self.untuned_cost)}"
                     f"{_gflops_part(self._gflops(self.untuned_cost))}")

    def untuned_note(self) -> str:
        """Why the untuned schedule has no cost in the summary ("": it was not asked for)."""
        if self.untuned is None or self.untuned_cost is not None:
            return ""
        if self.untuned.state is None:
            return "not measured (no round was run)"
        key = self.untuned.state.canonical_key()
        return ("not measured successfully (see the log)" if key in self.stats.measured_keys
                else "not measured (the round was abandoned)")

    # ---- the loop ----
    def round(self) -> str | None:
        """One round (``tuning_loop.run_round``); returns why tuning stops, or None to go on."""
        opts, key = self.opts, self.task.workload_key
        n = min(opts.num_measures_per_round, opts.num_measure_trials - self.stats.trials)
        batch = run_round(self.task, self.policy, self.measurer, self.model, n, first=self.untuned,
                          logger=logger)
        if self.untuned is not None and self.untuned.state is not None and self.untuned_cost is None:
            self.book_untuned()
        self.search_seconds += batch.search_seconds
        self.measure_seconds += batch.measure_seconds
        self.model_seconds += batch.model_seconds
        if not batch.inputs:
            return "the search found no new candidates (search space exhausted)"
        if batch.stop is not None:
            return batch.stop
        costs = [r.mean_cost for r in batch.results if is_valid(r)]
        self.say(self.progress_line(min(costs) if costs else None))
        return self.measurer.stop_reason(key, opts.num_measure_trials, opts.early_stopping)

    def run(self) -> TuneResult:
        opts = self.opts
        with Session(self.measurer, self.log_path, measurers=self.measurers, logger=logger,
                     what=self.task.desc) as session:
            log = f", log {self.log_path}" if self.log_path else ", no log file"
            seed = "" if opts.seed is None else f", seed {opts.seed}"
            self.say(f"{self.tag} tuning: {opts.num_measure_trials} trials, "
                     f"{opts.num_measures_per_round} per round{seed}{log}")
            self.resume()
            if self.policy is None:
                self.policy = self.make_policy()
            self.measure_default(self.measurer.builder, self.measurer.runner)
            self.t_loop = time.monotonic()
            stop = STOP_BUDGET if opts.num_measure_trials == 0 else ""
            while not stop:
                stop = self.round() or ""
            session.stop = stop
        result = self.result(session.stop)
        if opts.verbose >= 1:
            print(result.summary(), flush=True)
        return result

    def kept(self) -> "tuple[float, State] | None":
        """The best cost and schedule so far as the progress line says it: the best tuned one
        (this run's and the log's), or the default schedule when it ran faster. None while
        nothing was tuned successfully."""
        b = self.stats.best.best
        if b is not None and self.default_cost is not None and self.default_cost < b[0]:
            return self.default_cost, self.default_state
        return b

    def result(self, stop: str) -> TuneResult:
        b = self.stats.best.best
        cost = None if b is None else b[0]
        speedup = (self.default_cost / cost
                   if cost is not None and self.default_cost is not None and cost > 0 else None)
        return TuneResult(
            task_desc=self.task.desc, best_state=None if b is None else b[1], best_cost=cost,
            best_gflops=self._gflops(cost), trials=self.stats.trials, errors=self.stats.errors,
            wall_seconds=time.monotonic() - self.t_start, default_cost=self.default_cost,
            speedup_over_default=speedup, log_file=self.log_path, stop_reason=stop,
            resumed_records=self.resumed, search_seconds=self.search_seconds,
            measure_seconds=self.measure_seconds, default_note=self.default_note,
            model_seconds=self.model_seconds, default_state=self.default_state,
            untuned_cost=self.untuned_cost, untuned_note=self.untuned_note(),
            untuned_state=None if self.untuned is None else self.untuned.state)


def check_runs_here(targets: Any, runner: Any) -> None:
    """Candidates built for a CPU whose features this one lacks cannot be timed here: one line
    (``measure.targets.TargetError``) before any work, rather than every measurement failing.
    A runner elsewhere (a cluster) is the cluster's to judge."""
    from measure.runner import LocalRunner  # noqa: PLC0415 - the runner's machinery, only here

    if runner == "local" or isinstance(runner, LocalRunner):
        for t in targets:
            t.check_runnable("candidates")


def tune_task(task: "SearchTask", options: TuningOptions | None = None,
              cost_model: CostModel | None = None, search_policy: Any | None = None) -> TuneResult:
    """Tune ``task`` (see ``SearchTask.tune``)."""
    if options is None:
        options = TuningOptions()
    elif not isinstance(options, TuningOptions):
        raise TypeError(f"options must be a TuningOptions, got {type(options).__name__}")
    if search_policy is not None and not callable(
            getattr(search_policy, "generate_measure_candidates", None)):
        raise TypeError("search_policy must have a generate_measure_candidates(num, measured_keys, "
                        "best_states) method")
    # Kernels read it in the runner's worker, where a bad value only showed up as failed
    # measurements: checked (and warned about when oversubscribing) before any work.
    check_num_threads()
    # Before anything is measured or logged: candidates of a computation that reads out of range
    # would run (and be recorded as valid) while producing garbage.
    task.compute_dag.check_bounds()
    check_runs_here([task.target], options.runner)
    if options.log_file is not None:
        check_log_file(options.log_file)  # before a round is measured only to be lost
    return _Run(task, options, cost_model, search_policy).run()
