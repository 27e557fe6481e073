"""Tuning records, the public API: write, load, pick the best, distill, summarise, re-measure.

``measure.record`` defines the line format and parses lines into plain data; this module turns
them into ``(MeasureInput, MeasureResult)`` pairs whose task is a ``SearchTask`` rebuilt from the
record and whose state is replayed from the recorded steps. It sits in ``ansor`` because the task
class does (``measure`` must not import upward).

Everything streams: a log of millions of lines is read line by line, tasks are rebuilt once per
workload (cached by workload key) and ``best_record`` keeps one line and the costs per schedule
and replays only the winner. A schedule logged several times (a best measured again) is one
schedule at its pooled cost, the median of its records (``task_records.pool_schedules``). Lines that are corrupt, truncated, name an unregistered workload or do not replay are skipped
with a ``RecordWarning`` naming the file and line.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Iterator, Sequence

from compute.access_bounds import OutOfBoundsError
from measure.builder import LocalBuilder
from measure.checks import MAX_TIMEOUT_S, check_count, check_nonnegative, check_seconds
from measure.measure import MeasureErrorNo, MeasureInput, MeasureResult
from measure.log_file import RecordFileError
from measure.record import LineWarner, RecordLine, RecordToFile, RecordWarning, iter_lines, target_summary
from measure.runner import LocalRunner

from .search_task import SearchTask
from .task_records import (NoRecordError, describe_missing, find_best, find_bests, implausible_for,
                           pool_schedules, ranked, record_to_input, task_desc)

__all__ = ["DistillReport", "NoRecordError", "RecordFileError", "RecordToFile", "RecordWarning",
           "VerifyRow", "WorkloadSummary", "best_record", "best_records", "describe_missing", "distill",
           "load_records", "record_to_input", "summarize", "verify_best"]


class _Tasks:
    """Tasks rebuilt from records, one per workload: thousands of records share a task."""

    def __init__(self, warner: LineWarner):
        self.warner = warner
        self._cache: dict[tuple, SearchTask | str] = {}
        self._warned: set[tuple] = set()

    @staticmethod
    def _key(line: RecordLine) -> tuple:
        if "dag" in line.task:  # dumping a DAG per line to compare costs more than it saves
            return (line.workload_key, "dag", str(line.task.get("desc")),
                    json.dumps(line.task.get("layout_rewrite")))
        return (line.workload_key, json.dumps(line.task, sort_keys=True))

    def get(self, line: RecordLine) -> SearchTask | None:
        key = self._key(line)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = _rebuild_task(line)
        if isinstance(hit, str):
            if key not in self._warned:  # once per workload, then counted with the other skips
                self._warned.add(key)
                self.warner(line.lineno, hit + " (this and every other record of it skipped)")
            else:
                self.warner.silent()
            return None
        return hit


def _rebuild_task(line: RecordLine) -> SearchTask | str:
    """The record's task, or why it cannot be rebuilt."""
    try:
        task = SearchTask.from_json(line.task)
    except KeyError:
        return (f"workload {line.task.get('workload')!r} is not registered in this process: import "
                "the module that registers it first")
    except OutOfBoundsError as err:  # never compiled or run: its kernel would read anywhere
        return f"its computation is refused: {err}"[:400]
    except Exception as err:  # noqa: BLE001 - any malformed description is a skipped record
        return f"cannot rebuild the task: {type(err).__name__}: {err}"[:400]
    if task.workload_key != line.workload_key:
        return (f"workload {task.desc} now has key {task.workload_key}, the record says "
                f"{line.workload_key}: its definition changed since the record was written")
    return task


def load_records(path: str | os.PathLike) -> Iterator[tuple[MeasureInput, MeasureResult]]:
    """Stream every loadable record of ``path`` (failed measurements included) as
    ``(MeasureInput(task, state), MeasureResult)``; bad lines are skipped with a warning."""
    path = os.fspath(path)
    warner = LineWarner(path)
    tasks = _Tasks(warner)
    for line in iter_lines(path, warner):
        task = tasks.get(line)
        if task is None:
            continue
        inp = record_to_input(line, task, warner)
        if inp is not None:
            yield inp, line.result
    warner.finish()


def best_record(path: str | os.PathLike, task_or_workload_key: SearchTask | str,
                target_key: str | None = None) -> tuple[MeasureInput, MeasureResult] | None:
    """The valid schedule with the lowest pooled cost for a workload (the median over its records;
    the earliest on ties), or None.

    Given a task, the state is replayed on that task's DAG and the input carries that task; given a
    workload key, the task is rebuilt from the record. ``target_key`` restricts the search to
    records of one toolchain (``measure.target.toolchain_key()``). By default this machine's
    records come first, as for resuming: another CPU's fastest schedule need not be the fastest
    here. Only when the log holds none of this machine's is another's best returned, with a
    warning naming the CPU it was measured on. Only records built for the task's target
    (``SearchTask(..., target=...)``; for a workload key, the current target: ``native`` unless
    in a ``measure.targets.use_target`` block) compete; others are ignored with a warning.
    Costs timed cold (``ansor network tune``'s default) and warm never compete: the cold records
    decide, the warm ones when no cold one replays (``task_records.find_bests``).
    Streams, and replays only the winner.
    """
    path = os.fspath(path)
    warner = LineWarner(path)
    if isinstance(task_or_workload_key, str):
        return find_best(path, task_or_workload_key, _Tasks(warner).get, warner, target_key)
    given = task_or_workload_key
    return find_best(path, given.workload_key, lambda line: given, warner, target_key,
                     target=given.target_name)



def best_records(path: str | os.PathLike, tasks: Sequence[SearchTask], target_key: str | None = None,
                 cache: str | None = None) -> list[tuple[MeasureInput, MeasureResult] | None]:
    """``best_record(path, task)`` of each of ``tasks`` (in order), reading the log once: what a
    network compile asks for its tasks. ``cache``: the timing mode whose records decide first
    (default network mode, then cold, then warm: ``task_records.find_bests``)."""
    path = os.fspath(path)
    by_key = {t.workload_key: t for t in tasks}
    names = {t.target_name for t in tasks}
    if len(names) > 1:
        raise ValueError(f"best_records: the tasks are for several targets ({', '.join(sorted(names))}); "
                         "ask for each target's tasks apart")
    return find_bests(path, [t.workload_key for t in tasks], lambda line: by_key[line.workload_key],
                      LineWarner(path), target_key, target=names.pop() if names else None,
                      cache=cache)

@dataclass(frozen=True)
class DistillReport:
    """What ``distill`` wrote and what it left out, by reason (record lines)."""

    written: int
    not_best: int       # valid records outside the best ``top_k`` of their workload
    failed: int         # failed measurements (never kept)
    unreplayable: int   # valid records whose steps do not replay on their task
    unrebuildable: int  # valid records whose task cannot be rebuilt (e.g. not registered here)
    #                     or is refused (its computation reads out of bounds)
    unreadable: int     # lines that do not parse (corrupt, truncated, bad values)
    top_k: int
    out_path: str
    backup: str | None = None  # the original input, kept by ``in_place=True``
    # valid records whose cost is below the physical floor of their task (``cost_floor``); those
    # below the floor of the flops they claim are unreadable lines
    implausible: int = 0

    def summary(self) -> str:
        """``kept 3 record(s); dropped: 2 failed measurement(s), 1 do not replay, ...``."""
        parts = [f"{n} {what}" for n, what in (
            (self.failed, "failed measurement(s)"), (self.unreplayable, "do not replay"),
            (self.unrebuildable,
             "of workloads that cannot be rebuilt here or are refused (see the warnings)"),
            (self.implausible, "faster than any CPU could run them (see the warnings)"),
            (self.unreadable, "unreadable line(s)"),
            (self.not_best, f"not among the best {self.top_k} of their workload")) if n]
        return f"kept {self.written} record(s)" + (f"; dropped: {', '.join(parts)}" if parts
                                                   else "")


def distill(in_path: str | os.PathLike, out_path: str | os.PathLike | None = None,
            top_k: int = 1, *, in_place: bool = False) -> DistillReport:
    """Write the ``top_k`` best valid schedules of every workload (per toolchain and timing
    mode) that replay to ``out_path``; the report says how many were written and what was dropped, and why.

    A record is kept only if its task can be rebuilt and its steps replay on it, so a record
    that cannot be applied never displaces good ones; the records of a workload this process
    cannot rebuild (a registered workload whose module is not imported) are therefore dropped,
    with a warning. Only the records that would be kept are replayed. Lines are copied verbatim.
    Output order is stable: workloads in order of first appearance, each one's records by
    ascending pooled cost (``pooled_cost``: a schedule measured several times keeps all its
    lines, and ranks by their median; earlier line first on ties).

    ``out_path`` may not be the input (the same file under any name) unless ``in_place=True``,
    which writes over the input (``out_path`` then None or the input) after keeping the original
    as ``IN_PATH.bak``. The output is written to a temporary file beside it and renamed over it,
    and keeps the mode of the file it replaces (a new file: the input's).
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"distill: top_k must be a positive integer, got {top_k!r}")
    in_path = os.fspath(in_path)
    if out_path is None:
        if not in_place:
            raise ValueError("distill: give an output path, or in_place=True to replace the input")
        out_path = in_path
    out_path = os.fspath(out_path)
    same = os.path.exists(out_path) and os.path.samefile(in_path, out_path)
    if in_place and not same:
        raise ValueError(f"distill: in_place=True writes over the input {in_path!r}; the output "
                         f"{out_path!r} is another file")
    if same and not in_place:
        raise ValueError(f"distill: the output {out_path!r} is the input; pass in_place=True to "
                         f"replace it (the original is kept as {in_path + '.bak'!r})")
    if os.path.isdir(out_path):
        raise IsADirectoryError(f"distill: the output {out_path!r} is a directory")
    mode = os.stat(out_path if os.path.exists(out_path) else in_path).st_mode & 0o7777

    warner = LineWarner(in_path)
    tasks = _Tasks(warner)
    n_valid = failed = unreplayable = unrebuildable = implausible = 0
    def counted(lines: Iterator[RecordLine]) -> Iterator[RecordLine]:
        nonlocal n_valid, failed
        for line in lines:
            if line.is_valid:
                n_valid += 1
            else:
                failed += 1
            yield line

    # Per timing mode too: a warm cost does not rank against a cold one; each keeps its top_k.
    groups = pool_schedules(counted(iter_lines(in_path, warner)),
                            lambda ln: (ln.workload_key, ln.target_key, ln.result.cache), keep_raw=True)
    # Best first by pooled cost; a schedule is replayed when it would take a place, and one that
    # does not replay (or whose task cannot be rebuilt) never takes one.
    chunks: list[bytes] = []
    written = 0
    for schedules in groups.values():
        kept = 0
        for sched in ranked(schedules):
            if kept == top_k:
                break
            task = tasks.get(sched.first)
            if task is None:
                unrebuildable += len(sched.raws)
                continue
            why = implausible_for(sched.first, task)
            if why is not None:  # never the best: it did not happen
                warner(sched.first.lineno, why)
                implausible += len(sched.raws)
                continue
            if record_to_input(sched.first, task, warner) is None:
                unreplayable += len(sched.raws)
                continue
            kept += 1
            written += len(sched.raws)
            chunks += [raw + b"\n" for raw in sched.raws]
    warner.finish()
    data = b"".join(chunks)
    backup = None
    if in_place:
        backup = in_path + ".bak"
        _keep_backup(in_path, backup)
    _write_replacing(out_path, data, mode)
    return DistillReport(
        written=written, not_best=n_valid - written - unreplayable - unrebuildable - implausible,
        failed=failed, unreplayable=unreplayable, unrebuildable=unrebuildable,
        unreadable=warner.count - unreplayable - unrebuildable - implausible, top_k=top_k,
        out_path=out_path, backup=backup, implausible=implausible)


def _keep_backup(path: str, backup: str) -> None:
    """Make ``backup`` the current content of ``path``. A hard link (the same inode): a record
    appended to the log until it is replaced is then in the backup too. Where links are not
    supported, a durable copy."""
    tmp = f"{backup}.{os.getpid()}.tmp"
    try:
        try:
            os.link(path, tmp)
        except OSError:
            shutil.copy2(path, tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, backup)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(os.path.dirname(os.path.abspath(backup)))


def _write_replacing(path: str, data: bytes, mode: int) -> None:
    """Replace ``path`` by ``data`` atomically (temporary file beside it, fsync, rename)."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".distill-", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)  # mkstemp creates 0600
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(parent)


def _fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@dataclass(frozen=True)
class WorkloadSummary:
    """One workload of a log: how many records, how many valid, the best pooled cost (a schedule
    measured several times: the median of its records)."""

    workload_key: str
    desc: str
    n_records: int
    n_valid: int
    best_cost: float | None  # seconds
    flop: float | None
    n_targets: int

    @property
    def gflops(self) -> float | None:
        if not self.best_cost or not self.flop:
            return None
        return self.flop / self.best_cost / 1e9


def summarize(path: str | os.PathLike) -> list[WorkloadSummary]:
    """Per workload, in order of first appearance (works without the workload functions)."""
    acc: dict[str, dict] = {}

    def counted(lines: Iterator[RecordLine]) -> Iterator[RecordLine]:
        for line in lines:
            a = acc.get(line.workload_key)
            if a is None:
                a = acc[line.workload_key] = {"desc": task_desc(line.task), "n": 0, "valid": 0,
                                              "flop": line.flop, "targets": set()}
            a["n"] += 1
            a["valid"] += line.is_valid
            a["targets"].add(line.target_key)
            yield line

    pools = pool_schedules(counted(iter_lines(path)), lambda ln: ln.workload_key)
    return [WorkloadSummary(k, a["desc"], a["n"], a["valid"],
                            ranked(pools[k])[0].cost if k in pools else None,
                            a["flop"], len(a["targets"])) for k, a in acc.items()]


def error_summary(text: str, limit: int = 300) -> str:
    """An error text on one line of at most ``limit`` characters that keeps its last line - the
    exception, at the end of a traceback - and as much of the start as fits before it."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return ""
    last = lines[-1]
    if len(last) >= limit:
        return last[:limit - 3] + "..."
    context = " | ".join(ln for ln in lines[:-1] if ln != "Traceback (most recent call last):")
    if not context:
        return last
    room = limit - len(last) - len(" | ")
    if len(context) > room:
        if room < 20:  # too little to say anything: the exception alone
            return last
        context = context[:room - len(" ...")].rstrip() + " ..."
    return f"{context} | {last}"


# Schedules of a workload ``verify_best`` tries, best first, for one that replays.
VERIFY_TRIES = 8


@dataclass(frozen=True)
class VerifyRow:
    """A workload's best record re-measured: ``measured`` is None when it could not be."""

    desc: str
    recorded: float  # seconds
    measured: float | None
    error: str = ""
    same_toolchain: bool = True

    @property
    def ratio(self) -> float | None:
        return None if self.measured is None else self.measured / self.recorded


def verify_best(path: str | os.PathLike, number: int = 3, repeat: int = 3,
                min_repeat_ms: int = 100, build_timeout: float = 60,
                run_timeout: float = 60) -> list[VerifyRow]:
    """Rebuild and re-time each workload's best record in a fresh worker process (LocalBuilder
    and LocalRunner), so a recorded time can be checked against what the schedule runs at now;
    a log with records timed warm and cold has a best of each, re-timed in its own mode."""
    # Checked before the log is read: a bad number is the caller's error, not a failed record.
    number = check_count("verify_best number", number)
    repeat = check_count("verify_best repeat", repeat)
    min_repeat_ms = check_nonnegative("verify_best min_repeat_ms", min_repeat_ms,
                                      MAX_TIMEOUT_S * 1e3)
    build_timeout = check_seconds("verify_best build_timeout", build_timeout)
    run_timeout = check_seconds("verify_best run_timeout", run_timeout)
    path = os.fspath(path)
    warner = LineWarner(path)
    pools = pool_schedules(iter_lines(path, warner), lambda ln: (ln.workload_key, ln.result.cache))
    here = target_summary()["key"]
    tasks = _Tasks(warner)
    best: dict[tuple, RecordLine] = {}  # by (workload key, timing mode)
    recorded_cost: dict[tuple, float] = {}
    rows: list[VerifyRow | None] = []
    inputs: list[MeasureInput] = []
    slots: list[int] = []
    for wk, schedules in pools.items():
        order = ranked(schedules)
        inp = None
        # The best that replays: one refused (a cost below the physical floor, steps that do
        # not replay) hands on to the next, up to a few (a workload none of whose steps
        # replay must not replay thousands).
        for sched in order[:VERIFY_TRIES]:
            best[wk], recorded_cost[wk] = sched.first, sched.cost
            task = tasks.get(sched.first)
            if task is None:
                break
            inp = record_to_input(sched.first, task, warner)
            if inp is not None:
                break
        if inp is None:
            best[wk], recorded_cost[wk] = order[0].first, order[0].cost
            line = best[wk]
            rows.append(VerifyRow(task_desc(line.task), recorded_cost[wk], None,
                                  "cannot rebuild the record (see warnings)",
                                  line.target_key == here))
            continue
        rows.append(None)
        slots.append((len(rows) - 1, wk))
        inputs.append(inp)
    warner.finish()
    if inputs:
        with LocalBuilder(timeout=build_timeout) as builder:
            built = builder.build(inputs)
        results: list = [None] * len(inputs)
        for mode in sorted({key[1] for _, key in slots}):  # each best timed as it was recorded
            mine = [j for j, (_, key) in enumerate(slots) if key[1] == mode]
            with LocalRunner(timeout=run_timeout, number=number, repeat=repeat,
                             min_repeat_ms=min_repeat_ms, cache=mode) as runner:
                for j, res in zip(mine, runner.run([inputs[j] for j in mine], [built[j] for j in mine])):
                    results[j] = res
        for (slot, key), res in zip(slots, results):
            line = best[key]
            rows[slot] = VerifyRow(
                task_desc(line.task), recorded_cost[key], res.mean_cost if res.ok else None,
                "" if res.ok else f"{MeasureErrorNo(res.error_no).name}: "
                                  f"{error_summary(res.error_msg)}",
                line.target_key == here)
    return [r for r in rows if r is not None]
