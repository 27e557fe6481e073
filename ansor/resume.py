"""Resuming a tuning run from its logs: which records count and what they restore.

The one resume of every tuner: ``SearchTask.tune``, the ``TaskScheduler`` and the template tuners
(``autotvm.tuner``). Tuning takes hours and is interrupted; the next run must neither measure a schedule twice nor
forget what it learned. From each log (the run's own ``log_file``, and a scheduler's
``load_log_file``) the records of this toolchain and of the run's tasks are booked in the
``ProgramMeasurer`` (so nothing is measured again, and the best schedules and costs start from the
log's) and the cost model is retrained on them once (``restore``). The scheduler also rebuilds
each task's per-round best-cost history for its backward gradient (``restore_history``). Other
workloads' records are not even rebuilt; records timed on another CPU or toolchain, or in the
other timing mode (warm or cold, ``measure.runner``: a run resumes with its runner's mode), are
counted and ignored (their costs do not compare with ours; a schedule so ignored may be measured
again, in this run's mode).

A record is a schedule to every tuner (but a placeholder, ``task_records.is_placeholder``, is
none); what else it means to one - a template tuner's record names a configuration - is that
tuner's ``RecordMeaning``, which ``restore`` hands each record it reads.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from measure.measure import WARM, MeasureInput, MeasureResult
from measure.record import LineWarner, RecordLine, iter_lines, target_summary

from .measurer import ProgramMeasurer
from .scheduler_policy import NO_COST
from .task_records import is_placeholder, record_to_input

if TYPE_CHECKING:
    from cost_model.cost_model import CostModel

    from .scheduler_policy import TaskState
    from .search_task import SearchTask


def resume_paths(*paths: str | None) -> list[str]:
    """The logs to resume from: the given paths that exist and are not empty, each file once."""
    out: list[str] = []
    for p in paths:
        if p is not None and os.path.isfile(p) and os.path.getsize(p) > 0 and \
                not any(os.path.samefile(p, q) for q in out):
            out.append(p)
    return out


class RecordMeaning(Protocol):
    """What a record means to a tuner beyond the schedule it holds (the template tuners: the
    configuration it names). ``restore`` hands it each record of the tuner's task and
    toolchain, in log order."""

    def take(self, line: RecordLine, state: Any | None, new: bool) -> bool:
        """Book the record: ``state`` is its replayed schedule, or None for a placeholder
        (``task_records.is_placeholder``: a candidate that never became a schedule); ``new``
        whether that schedule was not measured before. Returns whether a placeholder is new to
        the tuner (it is then counted as restored, as a failed trial)."""
        ...

    def learn(self) -> None:
        """Learn from everything ``take`` booked (once, after every log: the tuner's model)."""
        ...


@dataclass
class RestoredLog:
    """What one log restored: the records (for the cost model), each task's costs in log order
    (``NO_COST`` for an invalid record) and the records ignored."""

    inputs: list[MeasureInput] = field(default_factory=list)
    results: list[MeasureResult] = field(default_factory=list)
    per_task: dict[int, list[float]] = field(default_factory=dict)
    other_target: int = 0  # timed on another CPU/toolchain
    other_cache: int = 0  # timed in another mode (warm/cold/network) than this run's runner
    other_workload: int = 0  # of a task this scheduler does not have
    mode: str = WARM  # the run's timing mode (its runner's ``cache``)

    @property
    def records(self) -> int:
        """The records restored (with the stateless ones a ``RecordMeaning`` took)."""
        return sum(len(costs) for costs in self.per_task.values())

    def note(self) -> str:
        """`` (3 of another CPU/toolchain ignored; ...)``, or "" when nothing was ignored."""
        notes = []
        if self.other_target:
            notes.append(f"{self.other_target} of another CPU/toolchain ignored")
        if self.other_cache:
            notes.append(f"{self.other_cache} timed in another mode, "
                         f"this run times {self.mode}: ignored")
        if self.other_workload:
            notes.append(f"{self.other_workload} of other workloads ignored")
        return f" ({'; '.join(notes)})" if notes else ""


def restore_log(path: str, tasks: Sequence["SearchTask"], index: Mapping[str, int],
                measurer: ProgramMeasurer, meaning: RecordMeaning | None = None) -> RestoredLog:
    """Book every record of ``path`` of this toolchain and of one of ``tasks`` (``index``: task
    number by workload key) in ``measurer``, and in ``meaning`` if given; a schedule it already
    has is pooled, not restored again. The log is untrusted: a line that does not parse or
    replay is warned about (``LineWarner``) and skipped."""
    here: dict[str, str] = {}  # a task's target name -> its toolchain key
    warner = LineWarner(path)
    out = RestoredLog(mode=getattr(measurer.runner, "cache", WARM))
    for line in iter_lines(path, warner):
        i = index.get(line.workload_key)
        if i is None:
            out.other_workload += 1
            continue
        name = getattr(tasks[i], "target_name", "native")
        if name not in here:
            here[name] = target_summary(name)["key"]
        if line.target_key != here[name]:
            out.other_target += 1  # timed elsewhere: not measured *here*, costs not comparable
            continue
        if is_placeholder(line):  # marks no schedule measured and teaches the model nothing
            if meaning is not None and meaning.take(line, None, True):
                out.per_task.setdefault(i, []).append(NO_COST)
            continue  # no cost: whatever mode it was logged in, it was never timed
        if line.result.cache != out.mode:
            out.other_cache += 1  # timed in the other mode: costs not comparable either
            continue
        inp = record_to_input(line, tasks[i], warner)
        if inp is None:
            continue
        key = inp.state.canonical_key()
        stats = measurer.stats(line.workload_key)
        new = key not in stats.measured_keys
        if meaning is not None:
            meaning.take(line, inp.state, new)
        if not new:
            # Measured again (a best confirmed, ``TaskScheduler(remeasure_best=...)``), or in both
            # logs: one trial, every valid cost pooled into the state's.
            if line.is_valid:
                stats.remeasure(inp.state, line.result)
            continue
        stats.add_resumed(inp.state, line.result, valid=line.is_valid)
        out.inputs.append(inp)
        out.results.append(line.result)
        out.per_task.setdefault(i, []).append(line.result.mean_cost if line.is_valid else NO_COST)
    warner.finish()
    return out


def round_bests(best: float, costs: Sequence[float], per_round: int) -> list[float]:
    """The per-round history as it was, for the backward gradient: the best cost (from ``best``
    on) after each chunk of ``per_round`` costs, in log order."""
    out = []
    for k in range(0, len(costs), per_round):
        best = min([best, *costs[k:k + per_round]])
        out.append(best)
    return out


@dataclass
class Restored:
    """What ``restore`` restored: one ``RestoredLog`` per log, in order, and the seconds the cost
    model took to learn from them."""

    logs: list[RestoredLog] = field(default_factory=list)
    model_seconds: float = 0.0

    @property
    def inputs(self) -> list[MeasureInput]:
        return [inp for log in self.logs for inp in log.inputs]

    @property
    def tasks(self) -> set[int]:
        """The numbers of the tasks with a restored record."""
        return {i for log in self.logs for i in log.per_task}

    @property
    def records(self) -> int:
        return sum(log.records for log in self.logs)

    @property
    def other_target(self) -> int:
        return sum(log.other_target for log in self.logs)


def restore(paths: Sequence[str], tasks: Sequence["SearchTask"], measurer: ProgramMeasurer,
            model: "CostModel | None" = None, index: Mapping[str, int] | None = None,
            meaning: RecordMeaning | None = None) -> Restored:
    """``restore_log`` of each of ``paths`` (``resume_paths``) in turn, then one retraining of
    ``model`` on every restored record and ``meaning.learn()``. ``index``: task number by
    workload key (default: built from ``tasks``)."""
    if index is None:
        index = {t.workload_key: i for i, t in enumerate(tasks)}
    out = Restored([restore_log(p, tasks, index, measurer, meaning) for p in paths])
    inputs = out.inputs
    t0 = time.monotonic()
    if inputs and model is not None:
        model.update(inputs, [r for log in out.logs for r in log.results])
    if meaning is not None:
        meaning.learn()
    out.model_seconds = time.monotonic() - t0
    return out


def restore_history(restored: Restored, paths: Sequence[str], states: Sequence["TaskState"],
                    per_round: int, say: Callable[[str], None]) -> None:
    """Add each task's restored count, rounds and best-cost history to ``states`` (rounds of
    ``per_round`` records, log by log) and say a line per log (``paths``: the logs restored)."""
    for path, log in zip(paths, restored.logs):
        for i, costs in log.per_task.items():
            st = states[i]
            st.restored += len(costs)
            bests = round_bests(st.history[-1] if st.history else NO_COST, costs, per_round)
            st.history += bests
            st.rounds += len(bests)
        say(f"resuming from {path}: {len(log.inputs)} record(s) of {len(log.per_task)} task(s) "
            f"restored{log.note()}")
