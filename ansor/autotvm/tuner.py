"""The template tuning loop, shared by every tuner: propose, instantiate, measure, record, learn.

A tuner subclass only decides *which* configurations to try (``next_batch``) and learns from what
was measured (``update``, scores in GFLOPS, 0 for a failure). ``Tuner.tune`` does the rest, the same
way for all of them, so that they differ in their search alone:

* each proposed index is instantiated in this process; a configuration whose steps do not apply
  becomes an INSTANTIATION_ERROR result (recorded and counted like any failed measurement, never
  raised);
* the valid states are measured together by the auto-scheduler's ``ProgramMeasurer``
  (``ansor.measurer``: builder and runner, error wrapping, stop rules, Ctrl-C held back while a
  batch is booked) within the tuning session every tuner runs in (``ansor.tuning_loop.Session``:
  Ctrl-C and a lost cluster end the run with the log intact) and every result is appended to the log at once, with its configuration
  (``records.ConfigRecordToFile``); the log path is checked before anything is measured, and a
  batch that cannot be written (a full disk) ends the run, the log keeping whole lines only;
* with an existing log, the run resumes through ``ansor.resume``, as every tuner does (only
  what a record means besides its schedule, its configuration, is ``_Configs``'): configurations
  already in it (same template and space, or the same state) are never measured again, the tuner
  is told their scores, and the best starts from the log's; a schedule another tuner appends to
  the log meanwhile is not measured either (``ProgramMeasurer.new_states``). ``n_trial`` counts
  new measurements, as ``SearchTask.tune``'s ``num_measure_trials`` does;
* progress lines in AutoTVM's form, one per batch and a last one ending in "Done."::

      [Task matmul] Current/Best:  215.34/ 2271.11 GFLOPS | Progress: (400/400) | 2128.74 s Done.

  "Current" is the best of the latest batch.
"""
from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from measure.measure import MAX_FLOAT, MeasureErrorNo, MeasureInput, MeasureResult
from measure.log_file import check_log_file
from measure.record import RecordLine, truncate_msg
from measure.runtime import check_num_threads

from ..measurer import (MAX_CONSECUTIVE_ERRORS, STOP_BUDGET, STOP_INTERRUPTED, STOP_LOG_FAILED,
                        ProgramMeasurer, TaskStats)
from ..resume import restore, resume_paths
from ..tuning_loop import Batch, Session, measure_batch
from .measure import MeasureOption
from .records import ConfigRecordToFile, config_of, config_record
from .space import ConfigEntity
from .task import InstantiationError, TemplateTask

__all__ = ["DEFAULT_BATCH_SIZE", "MAX_CONSECUTIVE_ERRORS", "STOP_BUDGET", "STOP_INTERRUPTED",
           "STOP_LOG_FAILED", "TuneSummary", "Tuner"]

logger = logging.getLogger("ansor.autotvm")

DEFAULT_BATCH_SIZE = 64
# Rounds in a row in which the tuner proposed nothing new before the loop gives up on it.
MAX_EMPTY_ROUNDS = 3
# Random draws tried before enumerating the unvisited configurations of a small space.
RANDOM_DRAWS = 64
# Enumerating unvisited configurations is fine up to this many (a list of ints).
MAX_ENUMERATE = 1 << 21

STOP_EXHAUSTED = "the space is exhausted (every configuration measured)"

Callback = Callable[["Tuner", Sequence[MeasureInput], Sequence[MeasureResult]], None]


@dataclass(frozen=True)
class TuneSummary:
    """What one ``tune`` call found. ``best_*`` cover the resumed records too; ``trials``,
    ``errors`` and ``curve`` (best GFLOPS after each new trial) only this call's measurements."""

    task_name: str
    best_config: ConfigEntity | None
    best_state: Any
    best_cost: float | None
    best_gflops: float
    trials: int
    errors: int
    wall_seconds: float
    stop_reason: str
    resumed_records: int = 0
    curve: tuple[float, ...] = field(default=(), repr=False)
    log_file: str | None = None


def gflops_of(flop: float, res: MeasureResult) -> float:
    """A measurement's score: GFLOPS, 0 for a failure (the tuners' fitness)."""
    if not res.ok or not res.costs or res.mean_cost >= MAX_FLOAT:
        return 0.0
    return gflops_at(flop, res.mean_cost)


def gflops_at(flop: float, cost: float) -> float:
    """GFLOPS at ``cost`` seconds per call (0 for a cost that is not positive)."""
    # Without a flop count, rank by speed alone (1 "flop" per call).
    return (flop or 1.0) / cost / 1e9 if cost > 0 else 0.0


class Tuner:
    """Base class of the template tuners. Subclasses implement ``next_batch`` and usually
    ``update``; ``visited`` holds every configuration index measured (or resumed) so far."""

    def __init__(self, task: TemplateTask, seed: int | None = None):
        if not isinstance(task, TemplateTask):
            raise TypeError(f"a tuner needs a TemplateTask (autotvm.create_task), got "
                            f"{type(task).__name__}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an integer or None, got {seed!r}")
        self.task = task
        self.space = task.space
        self.seed = seed
        self.rng = random.Random(seed)
        self.visited: set[int] = set()
        self.best_config: ConfigEntity | None = None
        self.best_state: Any = None
        self.best_cost: float | None = None
        self.best_gflops = 0.0
        # Canonical state key -> score of each schedule measured or resumed: what the tuner is
        # told about a configuration whose schedule was measured already (under another index).
        self._known_states: dict[str, float] = {}

    # ---- the strategy: what subclasses implement ----------------------------------------------
    def next_batch(self, batch_size: int) -> list[int]:
        """Up to ``batch_size`` configuration indices to measure next, none in ``visited``."""
        raise NotImplementedError

    def update(self, indices: Sequence[int], scores: Sequence[float]) -> None:
        """Learn from measured configurations: ``scores`` in GFLOPS, 0 for failures."""

    def has_next(self) -> bool:
        return len(self.visited) < len(self.space)

    def load_history(self, records: Any, min_records: int = 0) -> int:
        """Learn from earlier logs (transfer). Only model-based tuners use history; this one
        ignores it and returns 0."""
        return 0

    # ---- helpers for subclasses ---------------------------------------------------------------
    def sample_unvisited(self, n: int, exclude: Iterable[int] = ()) -> list[int]:
        """Up to ``n`` distinct random indices, none visited or in ``exclude``."""
        taken = set(exclude)
        out: list[int] = []
        size = len(self.space)
        free = size - len(self.visited) - len(taken - self.visited)
        misses = 0
        while len(out) < n and free > 0:
            i = self.rng.randrange(size)
            if i in self.visited or i in taken:
                misses += 1
                if misses >= RANDOM_DRAWS:
                    break
                continue
            misses = 0
            taken.add(i)
            out.append(i)
            free -= 1
        if len(out) < n and free > 0 and size <= MAX_ENUMERATE:
            # A nearly exhausted small space: draw from what is left.
            rest = [i for i in range(size) if i not in self.visited and i not in taken]
            self.rng.shuffle(rest)
            out.extend(rest[: n - len(out)])
        return out

    # ---- the loop ------------------------------------------------------------------------------
    def tune(self, n_trial: int, measure_option: MeasureOption | None = None,
             log_file: str | os.PathLike | None = None, early_stopping: int | None = None,
             batch_size: int = DEFAULT_BATCH_SIZE, verbose: int = 1,
             callbacks: Sequence[Callback] = ()) -> TuneSummary:
        """Measure up to ``n_trial`` new configurations; see the module docstring.

        ``measure_option``: ``autotvm.measure_option(builder=..., runner=...)`` (default: local
        builder and runner, created and closed by this call). ``log_file``: records appended
        after every batch and resumed from if the file exists. ``early_stopping``: stop when the
        best has not improved for this many trials. ``verbose``: 0 silent, 1 progress lines, 2
        also the builder's and runner's per-candidate marks. ``callbacks``: called as
        ``cb(tuner, inputs, results)`` after every batch.
        """
        for name, v, lo in (("n_trial", n_trial, 0), ("batch_size", batch_size, 1),
                            ("verbose", verbose, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"tune: {name} must be an integer >= {lo}, got {v!r}")
        if early_stopping is not None and (isinstance(early_stopping, bool)
                                           or not isinstance(early_stopping, int)
                                           or early_stopping < 1):
            raise ValueError(f"tune: early_stopping must be a positive integer or None, got "
                             f"{early_stopping!r}")
        if measure_option is None:
            measure_option = MeasureOption()
        elif not isinstance(measure_option, MeasureOption):
            raise TypeError("tune: measure_option must come from autotvm.measure_option(...), got "
                            f"{type(measure_option).__name__}")
        if log_file is not None and not isinstance(log_file, (str, os.PathLike)):
            raise TypeError(f"tune: log_file must be a path or None, got {type(log_file).__name__}")
        check_num_threads()  # a bad ANSOR_NUM_THREADS fails here, not as failed measurements
        if log_file is not None:
            check_log_file(log_file)  # before a batch is measured only to be lost
        return _Session(self, n_trial, measure_option, log_file, early_stopping, batch_size,
                        verbose, list(callbacks)).run()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.task.name}, {len(self.visited)} visited)"


class _Configs:
    """What a template-tuning record means besides its schedule (``resume.RecordMeaning``): the
    configuration it names is visited, and the tuner learns its score (0 for a configuration
    that did not instantiate, logged as a placeholder)."""

    def __init__(self, tuner: Tuner):
        self.tuner, self.task = tuner, tuner.task
        self.indices: list[int] = []  # configurations new to the tuner, in log order
        self.scores: list[float] = []
        self.by_state: dict[str, ConfigEntity] = {}  # canonical key -> its first configuration

    def take(self, line: RecordLine, state: Any | None, new: bool) -> bool:
        t, cfg = self.tuner, config_of(config_record(line), self.task)
        score = gflops_of(self.task.flop, line.result) if line.is_valid else 0.0
        if state is not None:
            key = state.canonical_key()
            t._known_states[key] = max(score, t._known_states.get(key, 0.0))
            if cfg is not None:
                self.by_state.setdefault(key, cfg)
        if cfg is None or cfg.index in t.visited:
            return False
        t.visited.add(cfg.index)
        self.indices.append(cfg.index)
        self.scores.append(score)
        return True

    def learn(self) -> None:
        if self.indices:
            self.tuner.update(self.indices, self.scores)


class _Session:
    """One ``tune`` call: its counters and output, so the loop stays readable."""

    def __init__(self, tuner: Tuner, n_trial: int, mo: MeasureOption,
                 log_file: str | os.PathLike | None, early_stopping: int | None, batch_size: int,
                 verbose: int, callbacks: list[Callback]):
        self.tuner, self.task = tuner, tuner.task
        self.n_trial, self.mo, self.early_stopping = n_trial, mo, early_stopping
        self.batch_size, self.verbose, self.callbacks = batch_size, verbose, callbacks
        self.log_path = None if log_file is None else os.fspath(log_file)
        self.recorder = None if self.log_path is None else ConfigRecordToFile(
            self.log_path, self.task.template.name, self.task.space.signature)
        self.flop = self.task.flop
        self.resumed = 0
        # Trials, errors and the best cost, kept by the measurer (``run`` creates it) in here.
        self.stats = TaskStats()
        self.measurer: ProgramMeasurer | None = None
        self.curve: list[float] = []
        self.last_current = 0.0  # the best score of the latest batch ("Current" in progress)
        self.t_start = time.monotonic()
        self.tag = f"[Task {self.task.name}]"

    def say(self, text: str) -> None:
        if self.verbose >= 1:
            print(text, flush=True)

    def progress(self, current: float, done: bool = False) -> str:
        return (f"{self.tag} Current/Best: {current:8.2f}/{self.tuner.best_gflops:8.2f} GFLOPS | "
                f"Progress: ({self.stats.trials}/{self.n_trial}) | "
                f"{time.monotonic() - self.t_start:.2f} s" + (" Done." if done else ""))

    # ---- bookkeeping ----
    def book(self, cfg: ConfigEntity | None, state: Any, res: MeasureResult) -> float:
        """Update the tuner's best with one result; returns its score."""
        score = gflops_of(self.flop, res)
        self.improve(cfg, state, score, res.mean_cost)
        return score

    def improve(self, cfg: ConfigEntity | None, state: Any, score: float, cost: float) -> None:
        t = self.tuner
        if score > t.best_gflops:
            t.best_gflops, t.best_cost = score, cost
            t.best_config, t.best_state = cfg, state

    def resume(self) -> None:
        """Restore the log (``resume.restore``, as every tuner does): its schedules count as
        measured and compete for the best, its configurations as visited, and the tuner learns
        their scores."""
        paths = resume_paths(self.log_path)
        if not paths:
            return
        t = self.tuner
        configs = _Configs(t)
        restored = restore(paths, [self.task.search_task], self.measurer, meaning=configs)
        self.resumed = restored.records
        best = self.stats.best.best
        if best is not None:
            cost, state = best  # the pooled cost of the log's best schedule
            self.improve(configs.by_state.get(state.canonical_key()), state,
                         gflops_at(self.flop, cost), cost)
        if self.resumed or restored.other_target:
            self.say(f"{self.tag} resuming from {paths[0]}: {self.resumed} record(s), "
                     f"{len(configs.indices)} configuration(s) of this space, best "
                     f"{t.best_gflops:.2f} GFLOPS{restored.logs[0].note()}")

    # ---- one batch ----
    def round(self) -> str | None:
        t, task, measurer = self.tuner, self.task, self.measurer
        assert measurer is not None
        n = min(self.batch_size, self.n_trial - self.stats.trials)
        batch: list[int] = []
        seen: set[int] = set()
        for i in t.next_batch(n) or ():
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(t.space):
                logger.warning("%s proposed an invalid index %r; ignored", type(t).__name__, i)
                continue
            if i in t.visited or i in seen:
                continue
            seen.add(i)
            batch.append(i)
            if len(batch) == n:
                break
        if not batch:
            return None  # the caller counts empty rounds

        init = task.dag.init_state()
        made: list[tuple[int, ConfigEntity, Any]] = []  # (index, configuration, state or result)
        for i in batch:
            t.visited.add(i)
            cfg = t.space.get(i)
            try:
                made.append((i, cfg, task.instantiate(cfg)))
            except InstantiationError as err:  # logged as a placeholder (``is_placeholder``)
                made.append((i, cfg, MeasureResult(
                    (MAX_FLOAT,), int(MeasureErrorNo.INSTANTIATION_ERROR),
                    truncate_msg(f"configuration {i} does not instantiate: {err}"))))
        # Only new schedules are measured, as in every tuner's round (``new_states``: none
        # measured by this run or logged by another tuner meanwhile, none twice in the batch).
        fresh = {s.canonical_key() for s in measurer.new_states(
            task.workload_key, [s for _, _, s in made if not isinstance(s, MeasureResult)],
            len(made))}
        # In proposal order: the log, the curve and the tuner see the batch the same way. A row
        # is (index, configuration, state, result): a state to measure and no result yet, or no
        # state and the result of a configuration that did not instantiate.
        rows: list[tuple[int, ConfigEntity, Any, MeasureResult | None]] = []
        reused: list[tuple[int, str]] = []  # a schedule measured before, or earlier in the batch
        for i, cfg, s in made:
            if isinstance(s, MeasureResult):
                rows.append((i, cfg, None, s))
            elif s.canonical_key() in fresh:
                fresh.discard(s.canonical_key())
                rows.append((i, cfg, s, None))
            else:
                reused.append((i, s.canonical_key()))

        # Log first (durably, with each configuration), then book: a run killed now keeps this
        # batch; one the log cannot take is abandoned and ends the run.
        configs = [c for _, c, _, _ in rows]
        write = None if self.recorder is None else (
            lambda inputs, results: self.recorder.write(inputs, results, configs))
        indices: list[int] = []
        scores: list[float] = []
        current = 0.0

        def book_rows(done: Batch) -> None:  # the tuner's view of the batch, with the measurer's
            nonlocal current
            for (i, cfg, state, _), res in zip(rows, done.results):
                score = self.book(cfg, state, res) if state is not None else 0.0
                if state is not None:
                    t._known_states[state.canonical_key()] = score
                current = max(current, score)
                self.curve.append(t.best_gflops)
                indices.append(i)
                scores.append(score)

        done = measure_batch(measurer, task.workload_key,
                             [MeasureInput(task.search_task, init if s is None else s)
                              for _, _, s, _ in rows],
                             states=[s for _, _, s, _ in rows], write=write, then=book_rows,
                             known=[r for _, _, _, r in rows])
        if done.stop is not None:
            return done.stop
        for i, key in reused:  # scored as their schedule (unknown: logged by another tuner)
            if key in t._known_states:
                indices.append(i)
                scores.append(t._known_states[key])
        t.update(indices, scores)
        for cb in self.callbacks:
            cb(t, done.inputs, done.results)
        if rows:
            self.last_current = current
            self.say(self.progress(current))
        return measurer.stop_reason(task.workload_key, self.n_trial, self.early_stopping) or ""

    def run(self) -> TuneSummary:
        t = self.tuner
        stop = ""
        empty = 0
        # The builder's and runner's workers start on their first use only.
        # The recorder claims the log (a second tuner on it is warned about); each batch is
        # written with its configurations by ``round``. The session ends the claim with the run.
        with self.mo.open() as (builder, runner):
            self.measurer = ProgramMeasurer(builder, runner, self.recorder,
                                            verbose=max(0, self.verbose - 1), logger=logger)
            with Session(self.measurer, self.log_path, logger=logger, what=self.task.name) as session:
                self.stats = self.measurer.stats(self.task.workload_key)
                self.resume()
                if self.n_trial == 0:
                    stop = STOP_BUDGET
                if not t.has_next():
                    stop = STOP_EXHAUSTED
                while not stop:
                    if not t.has_next():
                        stop = STOP_EXHAUSTED
                        break
                    out = self.round()
                    if out is None:
                        empty += 1
                        if empty >= MAX_EMPTY_ROUNDS:
                            stop = "the tuner proposes no new configuration"
                        continue
                    empty = 0
                    stop = out
                session.stop = stop
        stop = session.stop
        self.say(self.progress(self.last_current, done=True))
        if stop not in (STOP_BUDGET, "") and self.verbose >= 1:
            print(f"{self.tag} stopped: {stop}", flush=True)
        return TuneSummary(
            task_name=self.task.name, best_config=t.best_config, best_state=t.best_state,
            best_cost=t.best_cost, best_gflops=t.best_gflops, trials=self.stats.trials,
            errors=self.stats.errors, wall_seconds=time.monotonic() - self.t_start, stop_reason=stop,
            resumed_records=self.resumed, curve=tuple(self.curve), log_file=self.log_path)

