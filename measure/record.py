"""The measurement record format: one JSON line per measurement, and its durable writer.

A line is self-contained: the workload key, the task's own JSON description (a registered
workload as name + arguments, any other computation as its serialised DAG), a summary of the
toolchain that compiled it, the transform steps in their compact tagged form and the result::

    {"v":1,"input":{"workload_key":"4f0c...","task":{"workload":"matmul","args":[17,7,9]},
     "flop":2142.0,"target":{"key":"8bc0250792c103e1","cpu":"znver5",...},
     "steps":[["SP",2,0,17,[4],true],["AN",2,0,"parallel"]]},
     "result":{"costs":[1.2e-06],"error_no":0,"error_msg":"","all_cost":0.41,"timestamp":1.7e9,
     "host":"node-7"}}

``result.host`` names the machine that timed the candidate (``measure.host``: its rule, checked on
reading); records written before it existed have none and load as before, and readers that do
not know it ignore it. ``input.target`` is the toolchain that compiled and timed it: on a cluster
every worker's identity is checked against it before the worker builds or measures.

``result.cache`` (optional, ``"cold"``, ``"network"`` or ``"handoff"``): timed on arguments no cache held, or
with the constants rotated and the activations warm, or also handed off (``measure.runner``); absent, warm (as every
record from before the modes). Readers that pick a best compare a mode's
costs only with its own (``ansor.task_records.find_bests``, ``ansor.resume``).

``input.task.layout_rewrite`` (optional, a list of argument positions): the candidate was measured
with the packs of those constant inputs done outside the timed kernel (``ansor.SearchTask``'s
``layout_rewrite_inputs``); records without it were measured with every pack inside.

This module knows only the line format and returns plain data (``RecordLine``): rebuilding a task
object needs ``ansor.SearchTask``, which lives above ``measure``; ``ansor.records`` does that.

Reading uses ``json.loads`` and explicit validation only - never pickle or eval - so a record
file from anywhere can at worst be rejected. Writing appends whole lines with one ``write`` per
batch and fsyncs, so a writer killed at any moment leaves at most one partial last line, which the
reader skips with a warning; a write that fails (a full disk) is cut back to whole lines and
raises ``RecordFileError``. ``check_log_file`` finds an unusable path before any work is done.
Both are ``measure.log_file``'s (the durable append).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from compute.names import check_dag_json_names, check_desc, check_name
from sketch.transform_steps import Step, step_from_json, steps_to_json

from .cost_floor import implausible_cost
from .host import check_host
from .line_warner import MAX_LINE_WARNINGS, LineWarner, RecordWarning  # noqa: F401 (re-exported)
from .log_file import append_durably
from .measure import MAX_FLOAT, WARM, MeasureErrorNo, MeasureInput, MeasureResult, check_cache_mode
from compute.errors import InputError

RECORD_VERSION = 1
# Error messages can be whole tracebacks; the head says what failed, the tail where.
MAX_ERROR_MSG = 300
# A task's pre-packed inputs (``input.task.layout_rewrite``): positions among its arguments.
MAX_REWRITE_INPUTS = 1024


class RecordFormatError(InputError):
    """A line is not a valid record; the message says which part."""


@dataclass(frozen=True)
class RecordLine:
    """One parsed record, as plain data. ``task`` is the task's ``to_json()`` description."""

    workload_key: str
    task: dict
    target: dict
    steps: tuple[Step, ...]
    result: MeasureResult
    flop: float | None = None
    lineno: int = field(default=0, compare=False)
    raw: bytes = field(default=b"", compare=False, repr=False)

    @property
    def target_key(self) -> str:
        return str(self.target.get("key", ""))

    @property
    def is_valid(self) -> bool:
        """A successful measurement with at least one finite cost."""
        return self.result.ok and bool(self.result.costs) and self.result.mean_cost < MAX_FLOAT


# ---- writing ------------------------------------------------------------------------------------

def target_summary(target: Any = None) -> dict:
    """The toolchain identity in a record: every field but the 1 KB feature string, which is
    replaced by its hash (``key`` already covers it; the hash lets a reader tell which part
    differs between two machines). ``target``: the CPU built for (a name or
    ``measure.targets.Target``; default the current one); a record of a target other than
    ``native`` names it under ``"target"`` (``record_target``)."""
    from .target import toolchain_identity

    ident = toolchain_identity(target)
    out = {k: v for k, v in ident.items() if k != "features"}
    out["features_sha"] = hashlib.sha256(ident["features"].encode()).hexdigest()[:12]
    return out


def record_target(line: "RecordLine") -> str:
    """The name of the target a record was built for: ``native`` for a record without one (all
    records from before targets were the host's)."""
    name = line.target.get("target", "native")
    return name if isinstance(name, str) else "?"


def _task_target(task: Any) -> Any:
    return getattr(task, "target_name", None)


def truncate_msg(msg: str, limit: int = MAX_ERROR_MSG) -> str:
    msg = str(msg)
    if len(msg) <= limit:
        return msg
    head = limit * 2 // 3
    return f"{msg[:head]} [...] {msg[-(limit - head):]}"


def task_to_json(task: Any) -> dict:
    """The task's description: its own ``to_json()``, else (a bare duck-typed task) its DAG."""
    to_json = getattr(task, "to_json", None)
    if callable(to_json):
        return to_json()
    return {"dag": task.compute_dag.to_json()}


def _finite(x: float) -> float:
    x = float(x)
    return x if math.isfinite(x) else MAX_FLOAT


def result_to_json(res: MeasureResult) -> dict:
    out = {"costs": [_finite(c) for c in res.costs], "error_no": int(res.error_no),
           "error_msg": truncate_msg(res.error_msg), "all_cost": _finite(res.all_cost),
           "timestamp": _finite(res.timestamp)}
    if res.host:
        # Runners clean the names they report (``measure.host.clean_host``); checked again so
        # that no writer can put a line in the log that its readers would reject.
        out["host"] = check_host(res.host, "result.host")
    if res.cache != WARM:  # warm lines stay as they were written before the modes existed
        out["cache"] = check_cache_mode("result.cache", res.cache)
    return out


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def encode_line(workload_key: str, task_json: str, steps: Sequence[Step], result: MeasureResult,
                target_json: str, flop: float | None) -> str:
    """One record line (no newline). ``task_json`` and ``target_json`` are already JSON text:
    writers encode them once per task, not once per record."""
    flop_part = "" if flop is None else f',"flop":{_dumps(_finite(flop))}'
    return (f'{{"v":{RECORD_VERSION},"input":{{"workload_key":{_dumps(workload_key)},'
            f'"task":{task_json}{flop_part},"target":{target_json},'
            f'"steps":{_dumps(steps_to_json(steps))}}},"result":{_dumps(result_to_json(result))}}}')


def encode_record(inp: MeasureInput, res: MeasureResult) -> str:
    """The record line of one measurement (no newline)."""
    return encode_line(inp.task.workload_key, _dumps(task_to_json(inp.task)), inp.state.steps, res,
                       _dumps(target_summary(_task_target(inp.task))), _task_flop(inp.task))


def _task_flop(task: Any) -> float | None:
    try:
        return float(task.compute_dag.flop_count)
    except Exception:  # noqa: BLE001 - the flop count only feeds GFLOPS displays
        return None


class RecordToFile:
    """Measurement callback that appends each batch to a record file, durably.

    ``callback(inputs, results)`` writes the batch's lines with a single ``write`` on an
    ``O_APPEND`` descriptor, then fsyncs: once it returns, the batch survives a SIGKILL of the
    process (and a power cut); concurrent writers to one file never interleave inside a line.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.n_written = 0
        self._lock = threading.Lock()
        self._task_json: dict[int, tuple[Any, str, float | None]] = {}
        self._target_json: dict[Any, str] = {}  # task's target name -> its summary's JSON

    def _encoded_task(self, task: Any) -> tuple[str, float | None]:
        hit = self._task_json.get(id(task))
        if hit is None or hit[0] is not task:
            if len(self._task_json) > 256:  # tasks are few; bound it anyway
                self._task_json.clear()
            hit = (task, _dumps(task_to_json(task)), _task_flop(task))
            self._task_json[id(task)] = hit
        return hit[1], hit[2]

    def encode(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> bytes:
        if len(inputs) != len(results):
            raise ValueError(f"RecordToFile: {len(inputs)} inputs but {len(results)} results")
        lines = []
        for inp, res in zip(inputs, results):
            task_json, flop = self._encoded_task(inp.task)
            which = _task_target(inp.task)
            target_json = self._target_json.get(which)
            if target_json is None:
                target_json = self._target_json[which] = _dumps(target_summary(which))
            lines.append(encode_line(inp.task.workload_key, task_json, inp.state.steps, res,
                                     target_json, flop))
        return "".join(line + "\n" for line in lines).encode()

    def __call__(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        data = self.encode(inputs, results)
        if not data:
            return
        with self._lock:
            append_durably(self.path, data)
            self.n_written += len(inputs)


# ---- reading ------------------------------------------------------------------------------------

def _reject_constant(name: str) -> Any:
    raise RecordFormatError(f"non-JSON number {name}")


def _num(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RecordFormatError(f"{what} must be a number, got {v!r:.60}")
    f = float(v)
    if not math.isfinite(f):
        raise RecordFormatError(f"{what} is not finite")
    return f


def _dict(v: Any, what: str) -> dict:
    if not isinstance(v, dict):
        raise RecordFormatError(f"{what} must be an object, got {type(v).__name__}")
    return v


# Steps are frozen dataclasses of ints, bools, strings and int tuples; ``step_from_json`` checks
# the tag and the field count, this checks every field against its declared type so a record
# with e.g. a dict where an int belongs is rejected here rather than failing oddly in replay.
_FIELD_CHECKS = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "tuple[int, ...]": lambda v: isinstance(v, tuple) and all(
        isinstance(x, int) and not isinstance(x, bool) for x in v),
}


def parse_step(rec: Any) -> Step:
    try:
        step = step_from_json(rec)
    except (ValueError, TypeError) as err:
        raise RecordFormatError(f"bad step: {err}"[:300]) from None
    for f in dataclasses.fields(type(step)):
        name = f.name
        check = _FIELD_CHECKS.get(str(f.type))
        value = getattr(step, name)
        if check is not None and not check(value):
            raise RecordFormatError(f"step {rec!r:.80}: field {name} must be {f.type}")
        if isinstance(value, str):
            # A scope becomes part of a stage name; other strings (annotation, pragma) are
            # checked against their known values on replay and only need to be printable.
            try:
                if name == "scope_name":
                    check_name(value, f"field {name}")
                else:
                    check_desc(value, f"field {name}")
            except (TypeError, ValueError) as err:
                raise RecordFormatError(f"step {rec[0]!r:.10}: {err}") from None
    return step


def check_task_names(task: dict) -> None:
    """Every name, tag and display text of a record's task description follows the rules of
    ``compute.names``; RecordFormatError names the field. Run on every line read, so even the
    readers that never rebuild the task (show, distill) drop a hostile line."""
    try:
        if "dag" in task:
            check_dag_json_names(task["dag"])
        if "workload" in task:
            check_name(task["workload"], "workload")
        if task.get("desc") is not None:
            check_desc(task["desc"], "desc")
    except (TypeError, ValueError) as err:
        raise RecordFormatError(f"input.task: {err}") from None
    if "layout_rewrite" in task:
        # Argument positions of inputs measured pre-packed (``sketch.layout_rewrite``); checked
        # against the DAG's arguments when the task is rebuilt.
        lr = task["layout_rewrite"]
        if not isinstance(lr, list) or len(lr) > MAX_REWRITE_INPUTS or not all(
                isinstance(p, int) and not isinstance(p, bool) and 0 <= p < MAX_REWRITE_INPUTS for p in lr) \
                or len(set(lr)) != len(lr):
            raise RecordFormatError(f"input.task.layout_rewrite must be a list of distinct argument "
                                    f"positions (ints 0..{MAX_REWRITE_INPUTS - 1}), got {lr!r:.60}")


def parse_result(r: Any) -> MeasureResult:
    r = _dict(r, "result")
    costs = r.get("costs")
    if not isinstance(costs, list):
        raise RecordFormatError("result.costs must be a list")
    error_no = r.get("error_no")
    if isinstance(error_no, bool) or not isinstance(error_no, int) or error_no not in set(
            MeasureErrorNo):
        raise RecordFormatError(f"result.error_no {error_no!r:.40} is not a known error code")
    msg = r.get("error_msg", "")
    if not isinstance(msg, str):
        raise RecordFormatError("result.error_msg must be a string")
    parsed = tuple(_num(c, "result.costs[]") for c in costs)
    if error_no == MeasureErrorNo.NO_ERROR:
        # A successful measurement's cost is a time: a zero or negative one would win every
        # comparison (best record, resume, verify) without ever having been measured. Failed
        # measurements carry placeholder costs (MAX_FLOAT or none), which nothing ranks.
        for i, c in enumerate(parsed):
            if not c > 0:
                raise RecordFormatError(f"result.costs[{i}] is {costs[i]!r}: a successful "
                                        "measurement's cost must be positive (seconds)")
    host = r.get("host", "")  # absent in records written before hosts were recorded
    try:
        if host != "":
            check_host(host, "result.host")
        cache = check_cache_mode("result.cache", r.get("cache", WARM))  # absent: warm (older)
    except (TypeError, ValueError) as err:
        raise RecordFormatError(str(err)) from None
    return MeasureResult(
        costs=parsed, error_no=error_no, error_msg=msg,
        all_cost=_num(r.get("all_cost", 0.0), "result.all_cost"),
        timestamp=_num(r.get("timestamp", 0.0), "result.timestamp"), host=host, cache=cache)


def decode_line(line: str | bytes, lineno: int = 0) -> RecordLine:
    """Parse and validate one record line; RecordFormatError says what is wrong."""
    raw = line if isinstance(line, bytes) else line.encode()
    try:
        obj = json.loads(raw, parse_constant=_reject_constant)
    except RecordFormatError:
        raise
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise RecordFormatError(f"not JSON ({type(err).__name__}: {str(err)[:80]})") from None
    obj = _dict(obj, "record")
    if obj.get("v") != RECORD_VERSION:
        raise RecordFormatError(f"unsupported record version {obj.get('v')!r:.20} (this reader "
                                f"knows version {RECORD_VERSION})")
    inp = _dict(obj.get("input"), "input")
    key = inp.get("workload_key")
    if not isinstance(key, str) or not key:
        raise RecordFormatError("input.workload_key must be a non-empty string")
    task = _dict(inp.get("task"), "input.task")
    check_task_names(task)
    target = _dict(inp.get("target", {}), "input.target")
    steps = inp.get("steps")
    if not isinstance(steps, list):
        raise RecordFormatError("input.steps must be a list")
    steps = tuple(parse_step(s) for s in steps)
    flop = None if inp.get("flop") is None else _num(inp["flop"], "input.flop")
    result = parse_result(obj.get("result"))
    why = implausible_cost(result.costs, flop) if result.ok else None  # faster than any CPU
    if why is not None:
        raise RecordFormatError(why)
    return RecordLine(workload_key=key, task=task, target=target, steps=steps, result=result,
                      flop=flop, lineno=lineno, raw=raw.rstrip(b"\r\n"))


def iter_lines(path: str | os.PathLike, warner: LineWarner | None = None) -> Iterator[RecordLine]:
    """Stream the valid record lines of a file (any result, failed measurements included).

    Blank lines are ignored; a line that does not parse or validate is skipped with a
    ``RecordWarning`` naming the file and line number - a partial last line (a writer killed
    mid-write) included.
    """
    path = os.fspath(path)
    own = warner is None
    warner = warner or LineWarner(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield decode_line(raw, lineno)
            except RecordFormatError as err:
                # Only the last line can lack its newline: a partial write.
                if not raw.endswith(b"\n"):
                    warner(lineno, f"truncated last line, its writer was probably killed "
                                   f"mid-write ({err})")
                else:
                    warner(lineno, str(err))
    if own:
        warner.finish()
