"""One held task's records in a log: a line as a measure input, the best record, why there is none.

Everything here works on a task the caller already holds (``SearchTask.apply_best``, resuming a
tuning run, the template tuners) and never rebuilds a task from a record; ``ansor.records``, the
public records API, rebuilds tasks (``SearchTask.from_json``) and passes them in. That keeps this
module below ``search_task``: the task's own methods can use it without an import cycle.
"""
from __future__ import annotations

import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Hashable, Iterable, Sequence

from compute.workload_registry import canonical_args, workload_desc
from measure.cost_floor import implausible_for_dag
from measure.measure import CACHE_PREFERENCE, MeasureErrorNo, MeasureInput, MeasureResult, check_cache_mode, pooled_cost
from measure.record import LineWarner, RecordLine, RecordWarning, iter_lines, record_target, target_summary

if TYPE_CHECKING:
    from .search_task import SearchTask

__all__ = ["NoRecordError", "Schedule", "best_of_task", "describe_missing", "find_best", "find_bests",
           "is_placeholder", "pool_schedules", "ranked", "record_to_input", "task_desc"]

# The task of a record line (None: skipped, the callee has said why).
TaskOfLine = Callable[[RecordLine], "SearchTask | None"]


class NoRecordError(LookupError):
    """The log holds no valid record of the task (the message says what it holds instead)."""


def record_to_input(line: RecordLine, task: "SearchTask",
                    on_error: Callable[[int, str], None]) -> MeasureInput | None:
    """The measure input of one record line: its steps replayed on ``task`` (the task rebuilt
    from the record, or one the caller holds). The one place every reader of records - the
    loaders of ``ansor.records``, resuming a tuning run, the template tuners - turns a line into
    an input. Steps that do not replay call ``on_error(lineno, why)`` (a ``LineWarner``) and give
    None, as does a cost below the physical floor of the task's own computation (``cost_floor``:
    the line's own ``flop``, checked on reading, is the record's claim)."""
    why = implausible_for(line, task)
    if why is not None:
        on_error(line.lineno, why)
        return None
    try:
        state = task.compute_dag.replay(line.steps)
    except Exception as err:  # noqa: BLE001 - steps from a file may fail in any way
        on_error(line.lineno, f"its steps do not replay on {task.desc}: {type(err).__name__}: "
                              f"{str(err)[:200]}")
        return None
    return MeasureInput(task, state)


def is_placeholder(line: RecordLine) -> bool:
    """Whether ``line`` records a candidate that failed before it became a schedule (a template
    configuration that did not instantiate, ``autotvm.tuner``): an INSTANTIATION_ERROR logged
    with the initial schedule standing in. It counts as a failed trial of its tuner but says
    nothing about the initial schedule: resuming and catching up with a log mark no schedule
    measured for it. (The initial schedule itself always instantiates: no real record has this
    shape.)"""
    return not line.steps and line.result.error_no == MeasureErrorNo.INSTANTIATION_ERROR


def implausible_for(line: RecordLine, task: "SearchTask") -> str | None:
    """Why ``line``'s successful cost cannot have been measured for ``task`` (it is below the
    floor of the task's operations and output bytes on any CPU), or None."""
    return implausible_for_dag(line.result.costs, task.compute_dag) if line.result.ok else None


@dataclass
class Schedule:
    """One schedule's records in a log (lines of the same steps): its first line, the mean cost
    of each valid record, and (when asked for) every line as written."""

    first: RecordLine
    costs: list[float] = field(default_factory=list)
    raws: list[bytes] = field(default_factory=list)

    @property
    def cost(self) -> float:
        """The pooled cost (``pooled_cost``: the median over its records)."""
        return pooled_cost(self.costs)

    def result(self) -> MeasureResult:
        """The first line's result, or (measured more than once) one whose one cost is pooled."""
        r = self.first.result
        if len(self.costs) == 1:
            return r
        return MeasureResult((self.cost,), int(MeasureErrorNo.NO_ERROR), "", r.all_cost, r.timestamp,
                             cache=r.cache)


def pool_schedules(lines: Iterable[RecordLine], group: Callable[[RecordLine], Hashable],
                   keep_raw: bool = False) -> dict[Hashable, dict[tuple, Schedule]]:
    """The valid ``lines`` by ``group(line)`` (e.g. workload key), then by schedule (steps): the
    one grouping every reader that picks a best uses, so that a schedule measured again counts
    as one schedule at its pooled cost everywhere."""
    out: dict[Hashable, dict[tuple, Schedule]] = {}
    for line in lines:
        if not line.is_valid:
            continue
        sched = out.setdefault(group(line), {}).setdefault(line.steps, Schedule(line))
        sched.costs.append(line.result.mean_cost)
        if keep_raw:
            sched.raws.append(line.raw)
    return out


def ranked(schedules: dict[tuple, Schedule]) -> list[Schedule]:
    """Best first: by pooled cost, then by the first line (the earlier measurement on ties)."""
    return sorted(schedules.values(), key=lambda sc: (sc.cost, sc.first.lineno))


def find_best(path: str, workload_key: str, task_of: TaskOfLine, warner: LineWarner,
              target_key: str | None = None, target: str | None = None
              ) -> tuple[MeasureInput, MeasureResult] | None:
    """The valid schedule of ``workload_key`` with the lowest pooled cost (``pooled_cost``: the
    median over every record of the same steps; the earliest on ties), replayed on
    ``task_of(line)``; None when there is none. A schedule measured more than once comes with a
    ``MeasureResult`` whose one cost is the pooled one. ``warner`` is ``path``'s and is
    finished here. This machine's records (or ``target_key``'s) come first; see
    ``ansor.records.best_record``, which documents the rule for users.
    Streams, keeping one line and the costs per schedule; replays only the winner (and, when a
    record does not replay, the next one).
    """
    return find_bests(path, [workload_key], task_of, warner, target_key, stacklevel=4,
                      target=target)[0]


def find_bests(path: str, workload_keys: Sequence[str], task_of: TaskOfLine, warner: LineWarner,
               target_key: str | None = None, stacklevel: int = 3, target: str | None = None,
               cache: str | None = None) -> list[tuple[MeasureInput, MeasureResult] | None]:
    """``find_best`` of each of ``workload_keys``, in one pass over the log (a network's tasks
    read a log once, not once per task). The one home of "the best record for a task": only
    records built for ``target`` (a target name, ``measure.targets``; default the current one,
    ``native`` unless a ``use_target`` block says otherwise) compete; records of the workloads
    built for another target are ignored, with one warning saying how many and for which.

    Costs of one timing mode never compete with another's (``MeasureResult.cache``): per
    workload, the records of ``cache`` decide, the others' only when none of those replays, in
    ``CACHE_PREFERENCE`` order. ``None`` (default): that order alone, the most network-faithful
    first: network mode (constants rotated, activations warm: the condition a network runs its
    kernels in), then cold (the pessimistic end), then warm (the kernel alone, in a loop)."""
    here_ident = target_summary(target)
    wanted_target = str(here_ident.get("target", "native"))
    here = target_key if target_key is not None else here_ident["key"]
    wanted = set(workload_keys)
    elsewhere: Counter = Counter()  # target name -> records of the workloads ignored

    def ours(ln: RecordLine) -> bool:
        if ln.workload_key not in wanted:
            return False
        built_for = record_target(ln)
        if built_for != wanted_target:
            elsewhere[built_for] += 1
            return False
        return target_key is None or ln.target_key == here

    modes = CACHE_PREFERENCE if cache is None else (
        check_cache_mode("cache", cache), *(m for m in CACHE_PREFERENCE if m != cache))
    lines = (ln for ln in iter_lines(path, warner) if ours(ln))
    # By workload, then True: this machine's (or target_key's) schedules; False: every other's;
    # then by how they were timed.
    pools = pool_schedules(lines, lambda ln: (ln.workload_key, ln.target_key == here, ln.result.cache))
    picks: list[tuple[MeasureInput, MeasureResult, RecordLine, bool] | None] = []
    for key in workload_keys:
        found: tuple[MeasureInput, MeasureResult, RecordLine, bool] | None = None
        # another toolchain's only when none of ours replays; within each, one mode at a time
        for mine, mode in ((m, c) for m in (True, False) for c in modes):
            for sched in ranked(pools.get((key, mine, mode), {})):
                task = task_of(sched.first)
                inp = None if task is None else record_to_input(sched.first, task, warner)
                if inp is not None:
                    found = (inp, sched.result(), sched.first, mine)
                    break
            if found is not None:
                break
        picks.append(found)
    warner.finish()
    if elsewhere:
        which = ", ".join(f"{n} for {t}" for t, n in sorted(elsewhere.items()))
        warnings.warn(f"{path}: ignored {sum(elsewhere.values())} record(s) built for another target "
                      f"({which}): choosing the best for {wanted_target} among its own records only",
                      UserWarning, stacklevel=stacklevel)
    for found in picks:
        if found is None or found[3]:
            continue
        inp, _, line, _ = found
        ours = here_ident
        warnings.warn(
            f"{path}: no valid record of {inp.task.desc} was measured on this machine "
            f"({ours.get('cpu', '?')}, toolchain {here}); using the best of another's, line "
            f"{line.lineno}, measured on {line.target.get('cpu', '?')} (toolchain "
            f"{line.target_key or '?'}): it may not be the fastest schedule here", UserWarning,
            stacklevel=stacklevel)
    return [None if f is None else (f[0], f[1]) for f in picks]


def best_of_task(path: str | os.PathLike, task: "SearchTask", target_key: str | None = None
                 ) -> tuple[MeasureInput, MeasureResult] | None:
    """``find_best`` for a held task: every record of its workload is replayed on ``task``."""
    path = os.fspath(path)
    return find_best(path, task.workload_key, lambda line: task, LineWarner(path), target_key,
                     target=getattr(task, "target_name", None))


def task_desc(task_json: dict) -> str:
    """A record's task description without rebuilding the task (works for unregistered ones)."""
    desc = task_json.get("desc")
    if isinstance(desc, str):
        return desc
    name, args = task_json.get("workload"), task_json.get("args", [])
    if isinstance(name, str):
        try:
            return workload_desc(name, canonical_args(args))
        except (TypeError, ValueError):
            return name + "(?)"
    return "?"


def describe_missing(path: str | os.PathLike, task: "SearchTask") -> str:
    """Why ``path`` has no usable record for ``task``, and what it holds instead."""
    path = os.fspath(path)
    head = f"no valid record of {task.desc} (workload key {task.workload_key}) in {path}"
    mine: Counter = Counter()
    others: dict[str, int] = {}
    elsewhere: Counter = Counter()  # records of this workload built for another target
    wanted = getattr(task, "target_name", "native")
    with warnings.catch_warnings():  # the search that failed has already warned about bad lines
        warnings.simplefilter("ignore", RecordWarning)
        for line in iter_lines(path):
            if line.workload_key == task.workload_key and record_target(line) != wanted:
                elsewhere[record_target(line)] += 1
            elif line.workload_key == task.workload_key:
                mine["valid" if line.is_valid else MeasureErrorNo(line.result.error_no).name] += 1
            else:
                d = task_desc(line.task)
                others[d] = others.get(d, 0) + 1
    if not mine and elsewhere:
        which = ", ".join(f"{n} for {t}" for t, n in sorted(elsewhere.items()))
        return f"{head}: its records were built for another target ({which}), not {wanted}"
    if mine["valid"]:
        return (f"{head}: its {mine['valid']} valid record(s) do not replay on this task's DAG "
                "(see the warnings)")
    if mine:
        errs = ", ".join(f"{k} x{n}" for k, n in mine.most_common())
        return f"{head}: all {sum(mine.values())} record(s) of it failed ({errs})"
    if not others:
        return f"{head}: the file holds no records"
    same_name = [d for d in others if task.workload_name and d.startswith(task.workload_name + "(")]
    listed = same_name or list(others)
    more = "" if len(listed) <= 8 else f" and {len(listed) - 8} more"
    what = ("records of the same workload with other arguments: " if same_name
            else f"{sum(others.values())} record(s) of other workloads: ")
    return f"{head}; it holds {what}{', '.join(listed[:8])}{more}"
