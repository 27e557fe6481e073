"""Resuming a ``TaskScheduler`` run from its logs: which records count and what they restore.

A network's tuning takes hours and is interrupted; the next run must neither measure a schedule
twice nor forget what it learned. From each log (``load_log_file`` and the run's own
``log_file``) the records of this toolchain and of the scheduler's tasks are booked in the shared
``ProgramMeasurer`` (so nothing is measured again) and each task's per-round best-cost history is
rebuilt for the backward gradient. The scheduler then retrains its cost model on them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from measure.measure import MeasureInput, MeasureResult
from measure.record import LineWarner, iter_lines, target_summary

from .measurer import ProgramMeasurer
from .records import record_to_input
from .scheduler_policy import NO_COST, TaskState

if TYPE_CHECKING:
    from .search_task import SearchTask


def resume_paths(*paths: str | None) -> list[str]:
    """The logs to resume from: the given paths that exist and are not empty, each file once."""
    out: list[str] = []
    for p in paths:
        if p is not None and os.path.isfile(p) and os.path.getsize(p) > 0 and \
                not any(os.path.samefile(p, q) for q in out):
            out.append(p)
    return out


@dataclass
class RestoredLog:
    """What one log restored: the records (for the cost model), each task's costs in log order
    (``NO_COST`` for an invalid record) and the records ignored."""

    inputs: list[MeasureInput] = field(default_factory=list)
    results: list[MeasureResult] = field(default_factory=list)
    per_task: dict[int, list[float]] = field(default_factory=dict)
    other_target: int = 0  # timed on another CPU/toolchain
    other_workload: int = 0  # of a task this scheduler does not have

    def note(self) -> str:
        """`` (3 of another CPU/toolchain ignored; ...)``, or "" when nothing was ignored."""
        notes = []
        if self.other_target:
            notes.append(f"{self.other_target} of another CPU/toolchain ignored")
        if self.other_workload:
            notes.append(f"{self.other_workload} of other workloads ignored")
        return f" ({'; '.join(notes)})" if notes else ""


def restore_log(path: str, tasks: Sequence["SearchTask"], index: Mapping[str, int],
                measurer: ProgramMeasurer) -> RestoredLog:
    """Book every record of ``path`` of this toolchain and of one of ``tasks`` (``index``: task
    number by workload key) in ``measurer``; a schedule it already has is skipped."""
    here = target_summary()["key"]
    warner = LineWarner(path)
    out = RestoredLog()
    for line in iter_lines(path, warner):
        i = index.get(line.workload_key)
        if i is None:
            out.other_workload += 1
            continue
        if line.target_key != here:
            out.other_target += 1  # timed elsewhere: not measured *here*, costs not comparable
            continue
        inp = record_to_input(line, tasks[i], warner)
        if inp is None:
            continue
        key = inp.state.canonical_key()
        stats = measurer.stats(line.workload_key)
        if key in stats.measured_keys:
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


def restore_logs(paths: Sequence[str], tasks: Sequence["SearchTask"], index: Mapping[str, int],
                 measurer: ProgramMeasurer, states: Sequence[TaskState], per_round: int,
                 say: Callable[[str], None]) -> tuple[list[MeasureInput], list[MeasureResult], set[str]]:
    """``restore_log`` of each of ``paths`` in turn, each task's restored count, rounds and
    history added to ``states`` (rounds of ``per_round`` records) and a line per log to ``say``;
    returns the restored records and the workload keys of the tasks they belong to."""
    inputs: list[MeasureInput] = []
    results: list[MeasureResult] = []
    seen: set[str] = set()
    for path in paths:
        log = restore_log(path, tasks, index, measurer)
        for i, costs in log.per_task.items():
            st = states[i]
            st.restored += len(costs)
            bests = round_bests(st.history[-1] if st.history else NO_COST, costs, per_round)
            st.history += bests
            st.rounds += len(bests)
        seen.update(tasks[i].workload_key for i in log.per_task)
        say(f"resuming from {path}: {len(log.inputs)} record(s) of {len(log.per_task)} task(s) "
            f"restored{log.note()}")
        inputs += log.inputs
        results += log.results
    return inputs, results, seen
