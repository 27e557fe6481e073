"""TaskScheduler: one trial budget spread over the tasks of a network (Ansor, section 6).

A network has tens of tasks but one budget. Each round the scheduler picks one task and tunes it
for one round (``per_round`` candidates, as ``tune_task`` does for one task); the pick is

* ``"round-robin"``: the next live task in turn;
* ``"gradient"`` (Ansor's): after a warm-up round over every task not restored from a log, the
  task whose next round is predicted to reduce the objective most: the most negative gradient
  (``scheduler_policy`` has the arithmetic: the objective's slope, the task's recent progress and
  an optimistic guess that it can reach the throughput of its similar tasks), ties broken at
  random. A task leaves its group of similar tasks when it had 5 rounds more than any sibling
  and still runs below the group's best throughput / beta: it is not similar after all.

A task retires ("dead") when its round proposes nothing new, when its own early stopping triggers
(``TuningOptions.early_stopping`` trials without improvement), after too many errors in a row or
when ``NO_VALID_ROUNDS`` rounds gave no valid schedule at all (it would otherwise, costing
``NO_COST``, win every pick);
the run ends at the budget, when every task is dead, when the objective has not improved for
``early_stopping`` trials once every tuned task has a cost, on a log write failure, when the
builder's or runner's machinery goes away (``MeasureUnavailableError``) or on Ctrl-C
(the shared ``ProgramMeasurer`` defers it while a batch is logged, so the log keeps every finished
round).

All tasks share ONE cost model (it is retrained on every task's records, so what it learns on one
conv helps the next) and ONE ``ProgramMeasurer`` (per-task bookkeeping by workload key, one log);
each task has its own ``SketchPolicy``, created when it is first tuned. Similar tasks (the same
anchor ops, other shapes: ``scheduler_policy.schedule_donors``) also share schedules: until a
task has ``SHARE_BELOW`` valid schedules of its own, its policy's initial population is seeded
with its siblings' best ones too, replayed onto its shapes where they fit (``borrowed``), so
with a few trials per task the search refines what the network's other convs already found.

Resuming (``load_log_file``, and ``options.log_file`` when it exists, as ``tune_task`` does;
``resume``) restores each task's best cost, its trial count and per-round history, the
measured set (nothing is measured twice) and retrains the shared cost model on the restored
records - TVM's scheduler restored the costs but not the model, so resumed runs started the
search from scratch.

Tasks excluded by a ``TaskFilter`` (name pattern and/or minimum share of the estimated latency)
are neither measured nor counted in the budget, but stay in the table and in the objective.
The round itself is every search-policy tuner's (``tuning_loop.run_round``, with the untuned
schedule, ``ansor.untuned``, put first in a task's first round by ``tuning_loop.UntunedFirst``
unless ``TuningOptions.measure_untuned_first`` is off), as is the session ending on Ctrl-C or a
lost cluster (``tuning_loop.Session``). What the scheduler knows and picks is ``scheduler_numbers``,
the confirmation of bests ``scheduler_confirm`` (its bases), the argument checks
``scheduler_args``; the progress callbacks (the table, the latency history) are in
``scheduler_progress`` and importable from here too.
"""
from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from cost_model.cost_model import CostModel
from measure.checks import check_seed
from measure.measure import NETWORK
from measure.measurers import Measurers
from measure.log_file import check_log_file
from measure.record import RecordToFile
from measure.runtime import check_num_threads

from . import scheduler_policy as policy
from .measurer import STOP_INTERRUPTED, STOP_LOG_FAILED, STOP_UNAVAILABLE, ProgramMeasurer, is_valid
from .resume import restore, restore_history, resume_paths
from .scheduler_args import check_pick_args, check_task_filter, check_task_weights, task_index
from .scheduler_confirm import BestConfirmation
from .scheduler_policy import NO_COST, TaskFilter, TaskState, similarity_tag
from .scheduler_progress import (LogEstimatedLatency, PrintTableInfo, TaskSchedulerCallback,
                                 plot_latency_history, read_latency_history)
from .tuning import TuningOptions, check_runs_here, default_cost_model, format_duration
from .tuning_loop import Batch, Session, UntunedFirst, run_round

if TYPE_CHECKING:
    from .search_task import SearchTask

__all__ = ["NO_COST", "LogEstimatedLatency", "PrintTableInfo", "SchedulerResult", "TaskFilter",
           "TaskScheduler", "TaskSchedulerCallback", "plot_latency_history", "read_latency_history"]

logger = logging.getLogger("ansor.task_scheduler")

# A task with no valid measurement after this many rounds retires (see ``_round``).
NO_VALID_ROUNDS = 3

STOP_ALL_DEAD = "every task is done (nothing new to propose, early stopping or errors)"
# Schedule sharing (``TaskScheduler.borrowed``): a task with fewer valid schedules than
# SHARE_BELOW is offered up to SHARE_PER_DONOR best schedules of each similar task, SHARE_MAX in all.
SHARE_BELOW = 64
SHARE_PER_DONOR = 4
SHARE_MAX = 32
STOP_EARLY = "early stopping: the objective has not improved"
STOP_NOTHING = "no task to tune (all filtered out)"
STOP_BUDGET_ALL = "trial budget reached"


@dataclass(frozen=True)
class SchedulerResult:
    """What ``TaskScheduler.tune`` did. Costs are seconds per call of one task (None: no valid
    schedule); ``trials`` counts this call's new measurements, ``restored`` the log's records."""

    stop_reason: str
    trials: int
    restored: int
    best_costs: list[float | None]
    task_trials: list[int]
    estimated_latency: float | None
    wall_seconds: float
    rounds: int
    remeasured: int = 0  # re-measurements of task bests (``remeasure_best``), not trials

    @property
    def interrupted(self) -> bool:
        return self.stop_reason == STOP_INTERRUPTED

    @property
    def measurement_stopped(self) -> bool:
        """The builder or runner could not go on (a Dask scheduler went away); ``stop_reason``
        says how to resume."""
        return self.stop_reason.startswith(STOP_UNAVAILABLE)


class TaskScheduler(BestConfirmation):
    """Tune several tasks with one budget. ``task_weights`` (default: each task's ``weight``
    attribute, else 1) weigh the default objective sum(weight x latency); ``objective_func``
    replaces it by any function of the list of task latencies (seconds; ``NO_COST`` for a task
    without a valid schedule), e.g. the sum of several networks' latencies. ``seed`` makes the
    random tie-breaking reproducible (default: ``options.seed``). ``cost_model``: shared by every
    task (default: the learned ``LGBModel``). ``task_filter``: a ``TaskFilter``, a pattern string
    or a predicate ``f(index, task) -> bool``. ``remeasure_best``: how many measurements a
    task's best needs before it is trusted - an unconfirmed best is measured again at the start
    of each following round and in a last pass, and its cost is the median of its measurements
    (``pooled_cost``); 1 trusts every single measurement. ``share_schedules``: a task's search
    starts from the best schedules of similar tasks too (``borrowed``). With ``options.runner="local"`` the
    candidates are timed in network mode (``LocalRunner(cache="network")``: the task's weights
    rotated over what the rest of the network touches, its activations warm, as the network runs
    it); a runner given is used as it is.

    What it knows and picks (costs, estimated latency, gradients) is ``SchedulerNumbers``'s; the
    confirmation of bests is ``BestConfirmation``'s; this class runs the rounds."""

    def __init__(self, tasks: Sequence["SearchTask"], task_weights: Sequence[float] | None = None,
                 objective_func: Callable[[Sequence[float]], float] | None = None,
                 strategy: str = "gradient", load_log_file: str | os.PathLike | None = None,
                 callbacks: Sequence[TaskSchedulerCallback] | None = None, alpha: float = 0.2,
                 beta: float = 2, backward_window_size: int = 3, seed: int | None = None,
                 task_filter: "TaskFilter | str | Callable[[int, SearchTask], bool] | None" = None,
                 cost_model: CostModel | None = None, remeasure_best: int = 3,
                 share_schedules: bool = True):
        self.tasks = list(tasks)
        self._index = task_index(self.tasks)
        self.weights = check_task_weights(self.tasks, task_weights)
        if objective_func is not None and not callable(objective_func):
            raise TypeError("TaskScheduler objective_func must be callable (list of latencies -> float)")
        self.objective = (objective_func if objective_func is not None
                          else policy.default_objective(self.weights))
        self.base_objective = self.objective  # ``set_calibration`` scales its costs
        self.calibration: list[float] | None = None
        self.calibrations = 0  # how many times it was set: the early-stopping score restarts
        check_pick_args(strategy, alpha, beta, backward_window_size)
        self.strategy = strategy
        self.alpha, self.beta, self.window = float(alpha), float(beta), backward_window_size
        self.seed = check_seed("TaskScheduler seed", seed)
        self.load_log_file = None if load_log_file is None else os.fspath(load_log_file)
        self.callbacks = list(callbacks) if callbacks is not None else [PrintTableInfo()]
        for cb in self.callbacks:
            if not isinstance(cb, TaskSchedulerCallback):
                raise TypeError(f"TaskScheduler callbacks must be TaskSchedulerCallback objects, "
                                f"got {type(cb).__name__}")
        self.task_filter = check_task_filter(task_filter)
        self.cost_model = cost_model
        if isinstance(remeasure_best, bool) or not isinstance(remeasure_best, int) or remeasure_best < 1:
            raise ValueError(f"TaskScheduler remeasure_best must be an integer >= 1, got {remeasure_best!r}")
        self.remeasure_best = remeasure_best
        self.remeasured = 0
        if not isinstance(share_schedules, bool):
            raise TypeError(f"TaskScheduler share_schedules must be True or False, got {share_schedules!r}")
        self.share_schedules = share_schedules

        self.flops = [float(t.flop_count or 0.0) for t in self.tasks]
        self.tags = [similarity_tag(t) for t in self.tasks]
        self.groups: dict[str, list[int]] = policy.similarity_groups(self.tags)
        self.donors = policy.schedule_donors(self.tasks)
        self.state = [TaskState() for _ in self.tasks]
        # Set by ``tune``; readable by callbacks.
        self.measurer: ProgramMeasurer | None = None
        self.model: CostModel | None = None
        self.options: TuningOptions | None = None
        self.per_round = 0
        self.trials = 0  # new measurements of this call
        self.restored = 0
        self.rounds_done = 0
        self.t_start = time.monotonic()
        self.stop_reason = ""
        self.last_task: int | None = None
        self.next_task: int | None = None
        self._policies: dict[int, Any] = {}
        self._rng = random.Random(self.seed)

    # ---- set-up --------------------------------------------------------------------------------
    def _apply_filter(self) -> None:
        if self.task_filter is None:
            return
        keep = policy.select_tasks(self.task_filter, self.tasks, self.estimated_shares)
        for st, tuned in zip(self.state, keep):
            st.tuned = tuned

    def _resume(self, paths: list[str]) -> None:
        """Restore every task's records of this toolchain from the logs ``paths``, then retrain
        the cost model on them (``resume.restore``)."""
        assert self.measurer is not None
        restored = restore(paths, self.tasks, self.measurer, self.model, self._index)
        restore_history(restored, paths, self.state, self.per_round, self._say)
        self.restored = len(restored.inputs)
        if self.restored and self.model is not None:
            self._say(f"cost model retrained on the {self.restored} restored record(s) of "
                      f"{len(restored.tasks)} task(s) in {format_duration(restored.model_seconds)}")

    def _say(self, text: str) -> None:
        if self.options is not None and self.options.verbose >= 1:
            print(text, flush=True)

    def _policy(self, i: int) -> Any:
        p = self._policies.get(i)
        if p is None:
            from sketch.search_policy import SearchParams, SketchPolicy  # noqa: PLC0415 - looked up per call, as tuning's make_policy

            opts = self.options
            assert opts is not None
            params = opts.search_params if opts.search_params is not None else SearchParams()
            seed = None if opts.seed is None else (opts.seed + i) % 2 ** 32
            p = self._policies[i] = SketchPolicy(self.tasks[i], self.model, params=params, seed=seed,
                                                 verbose=max(0, opts.verbose - 1))
        return p

    # ---- one round -----------------------------------------------------------------------------
    def _round(self, i: int, n: int) -> str | None:
        """Tune task i for one round of up to n candidates; returns why the whole run must stop
        (the log cannot be written), else None. A task that cannot go on is marked dead."""
        assert self.measurer is not None and self.options is not None
        task, st = self.tasks[i], self.state[i]
        key = task.workload_key
        stats = self.measurer.stats(key)

        def book(batch: Batch) -> None:  # with the batch, still with Ctrl-C held back
            st.rounds += 1
            c = self.best_cost(i)
            st.history.append(NO_COST if c is None else c)
            self.trials += len(batch.inputs)
            self.rounds_done += 1

        # The untuned schedule the network would run goes first in a task's first round: tuning
        # never leaves a task slower than the untuned network.
        first = UntunedFirst(task, self.measurer) if self.options.measure_untuned_first else None
        batch = run_round(task, self._policy(i), self.measurer, self.model, n, first=first,
                          then=book, borrowed=self.borrowed(i))
        if not batch.inputs:
            st.dead = "search space exhausted"
            return None
        if batch.stop is not None:
            return batch.stop
        why = self.measurer.stop_reason(key, 2 ** 62, self.options.early_stopping)
        if why is None and stats.best.best is None and st.rounds >= NO_VALID_ROUNDS:
            # Without a valid cost the task stands for NO_COST and would win every pick until
            # MAX_CONSECUTIVE_ERRORS: a task whose candidates all fail (e.g. a kernel the runner
            # cannot call) would eat the budget.
            why = f"no valid schedule in {st.rounds} rounds (last error: {stats.last_error[:120]})"
            logger.warning("%s retired: %s", task.desc, why)
        if why is not None:
            st.dead = why
        logger.info("%s: round of %d, %d valid", task.desc, len(batch.inputs),
                    sum(map(is_valid, batch.results)))
        return None

    def borrowed(self, i: int) -> list[Any]:
        """The best schedules of task i's donors (``scheduler_policy.schedule_donors``: the same
        anchor ops, nearest size first; ``SHARE_PER_DONOR`` each, ``SHARE_MAX`` in all) while it
        has fewer than ``SHARE_BELOW`` valid schedules of its own: its search starts from what
        its siblings found (replayed onto its shapes where they fit) instead of from nothing,
        which is what a budget of a few trials per task needs. Empty with ``share_schedules``
        off."""
        assert self.measurer is not None
        if not self.share_schedules or len(self.measurer.stats(self.tasks[i].workload_key).best.states()) \
                >= SHARE_BELOW:
            return []
        out: list[Any] = []
        for j in self.donors[i]:
            out += self.measurer.stats(self.tasks[j].workload_key).best.states()[:SHARE_PER_DONOR]
            if len(out) >= SHARE_MAX:
                break
        return out[:SHARE_MAX]

    # ---- the run -------------------------------------------------------------------------------
    def tune(self, options: TuningOptions | None = None) -> SchedulerResult:
        """Tune until ``options.num_measure_trials`` new measurements are made (or every task is
        done, early stopping, Ctrl-C); returns a ``SchedulerResult``."""
        if options is None:
            options = TuningOptions()
        elif not isinstance(options, TuningOptions):
            raise TypeError(f"options must be a TuningOptions, got {type(options).__name__}")
        check_num_threads()
        check_runs_here({task.target for task in self.tasks}, options.runner)
        if options.log_file is not None:
            check_log_file(options.log_file)
        if self.load_log_file is not None and not os.path.isfile(self.load_log_file):
            raise FileNotFoundError(f"load_log_file {self.load_log_file}: no such file")
        self.options = options
        if self.seed is None and options.seed is not None:
            self._rng = random.Random(options.seed)
        self.model = self.cost_model if self.cost_model is not None else default_cost_model(options.seed)
        # closes only what it created; a runner made here times as the network runs kernels
        measurers = Measurers(options.builder, options.runner, cache=NETWORK)
        log_path = None if options.log_file is None else os.fspath(options.log_file)
        self.measurer = ProgramMeasurer(measurers.builder, measurers.runner,
                                        None if log_path is None else RecordToFile(log_path),
                                        verbose=max(0, options.verbose - 1), logger=logger)
        self.t_start = time.monotonic()
        with Session(self.measurer, log_path, measurers=measurers, logger=logger) as session:
            session.stop = self._run(log_path)
        stop = session.stop
        if stop.startswith(STOP_UNAVAILABLE):
            self._say(f"stopped: {stop}")
        self.next_task = None
        result = SchedulerResult(
            stop_reason=stop, trials=self.trials, restored=self.restored,
            best_costs=[self.best_cost(i) for i in range(len(self.tasks))],
            task_trials=[self.task_trials(i) for i in range(len(self.tasks))],
            estimated_latency=self.estimated_latency(), rounds=self.rounds_done,
            wall_seconds=time.monotonic() - self.t_start, remeasured=self.remeasured)
        self.stop_reason = stop
        for cb in self.callbacks:
            cb.finish(self)
        return result

    def _per_round(self, n_tasks: int) -> int:
        """min(num_measures_per_round, budget // (2 x tasks)), at least 1: the warm-up round of
        every task takes at most half the budget, and the rest goes where the strategy sends it
        (at 10 trials per task, rounds of 10 spent all of it on the warm-up, as many on a task
        that is 0.1% of the network as on one that is 20%); with no budget (a run that only
        restores) the options' round size, which counts the restored rounds."""
        opts = self.options
        assert opts is not None
        if opts.num_measure_trials == 0:
            return opts.num_measures_per_round
        return max(1, min(opts.num_measures_per_round, opts.num_measure_trials // (2 * n_tasks)))

    def _run(self, log_path: str | None) -> str:
        stop = self._tune_rounds(log_path)
        if stop.startswith(STOP_LOG_FAILED):  # (Ctrl-C raises past this: no last pass either)
            return stop
        n0 = self.remeasured
        why = self._confirm_all()
        if self.remeasured > n0:
            self._say(f"confirmed the tasks' best schedules: {self.remeasured - n0} "
                      f"re-measurement(s); {self.remeasured} in this run")
        return why or stop

    def _tune_rounds(self, log_path: str | None) -> str:
        opts = self.options
        assert opts is not None
        paths = resume_paths(self.load_log_file, log_path)
        # Rounds of restored records are counted with the per-round size of this run.
        n_all = len(self.tasks)
        self.per_round = self._per_round(n_all)
        self._resume(paths)
        self._apply_filter()
        tuned = self.tuned_tasks()
        # Per-round trials as in Ansor, over the tasks that are tuned.
        self.per_round = self._per_round(len(tuned))
        for i in tuned:
            self.tasks[i].compute_dag.check_bounds()
        skipped = n_all - len(tuned)
        self._say(f"tuning {len(tuned)} of {n_all} task(s)"
                  f"{f' ({skipped} filtered out)' if skipped else ''}: {opts.num_measure_trials} "
                  f"trials, {self.per_round} per round, strategy {self.strategy}"
                  f"{'' if opts.seed is None else f', seed {opts.seed}'}, "
                  f"log {log_path if log_path else '(none)'}")
        budget = opts.num_measure_trials
        best_score: float | None = None
        best_at = 0
        scored_with = self.calibrations  # a new calibration moves the score: compare anew

        def one(i: int) -> str | None:
            self.next_task = i
            for cb in self.callbacks:
                cb.pre_tune(self, i)
            stop = self._round(i, min(self.per_round, budget - self.trials))
            self.last_task = i
            self._adjust_group(i)
            for cb in self.callbacks:
                cb.post_tune(self, i)
            return stop

        # Warm-up: one round of every task that has none (restored tasks have theirs).
        for i in tuned:
            if self.trials >= budget:
                return STOP_BUDGET_ALL
            if self.state[i].rounds == 0:
                stop = self._confirm() or one(i)
                if stop:
                    return stop
        while True:
            if self.trials >= budget:
                return STOP_BUDGET_ALL
            # Bests of earlier rounds measured again before the pick, which reads them.
            stop = self._confirm()
            if stop:
                return stop
            score = self.estimated_latency()
            if scored_with != self.calibrations:
                best_score, best_at, scored_with = None, self.trials, self.calibrations
            if score is not None:
                if best_score is None or score < best_score:
                    best_score, best_at = score, self.trials
                elif opts.early_stopping is not None and self.trials - best_at >= opts.early_stopping:
                    return f"{STOP_EARLY} in the last {self.trials - best_at} trials"
            i = self.pick()
            if i is None:
                return STOP_ALL_DEAD if tuned else STOP_NOTHING
            stop = one(i)
            if stop:
                return stop

