"""What a measurement is: its input, its result and the error codes, shared by builder, runner,
records and the search.

A measurement never raises into the tuner: every failure of a candidate - an invalid schedule, a
compiler error, a crash, a hang, a wrong answer - is a ``MeasureResult`` with an error code, so a
tuning run of hours survives anything one candidate does. The codes and their numbers follow TVM's
auto_scheduler, which users' tools already understand.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from sketch.contracts import TaskLike
from sketch.loop_state import State

# A failed measurement's cost, so that sorting by cost puts failures last.
MAX_FLOAT = 1e10

# How a runner times (``measure.runner``): every call on the same buffers (warm: what a kernel
# costs alone, in a loop), every call on arguments not in any cache (cold: the kernels before it
# evicted its weights and activations), or its constants rotated and its activations kept (network:
# the input just written by the kernel before, the weights last read one inference ago), or as
# network with the activations handed off: rewritten, outside the timed call, by the caller's
# core before every call, as the kernel before it wrote them (handoff). Costs of one mode do not
# compare with another's.
WARM, COLD, NETWORK, HANDOFF = "warm", "cold", "network", "handoff"
CACHE_MODES = (WARM, COLD, NETWORK, HANDOFF)
# The order in which a log's records of a workload are preferred when none of the wanted mode
# replays (``ansor.task_records.find_bests``): the most network-faithful first.
CACHE_PREFERENCE = (HANDOFF, NETWORK, COLD, WARM)


def check_cache_mode(name: str, value: object) -> str:
    """``value`` if it is a cache mode, else ValueError naming ``name``."""
    if not isinstance(value, str) or value not in CACHE_MODES:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, CACHE_MODES))}, got {value!r}")
    return value


# Cap of a network footprint (bytes): far beyond any cache, and what a rotation can copy anyway.
MAX_FOOTPRINT_BYTES = 1 << 50


def network_conditions(task: object) -> dict:
    """What the runner's network mode needs to know of ``task``, as plain data that travels to a
    timing worker: ``constants``, the argument positions that are constants of the network (a
    graph task's ``constant_inputs``, else its ``layout_rewrite_inputs``), and ``footprint``, the
    bytes the rest of the network touches between two of its calls (None: not known)."""
    constants = getattr(task, "constant_inputs", None)
    if constants is None:
        constants = getattr(task, "layout_rewrite_inputs", ())
    footprint = getattr(task, "network_footprint_bytes", None)
    return {"constants": [int(p) for p in constants],
            "footprint": None if footprint is None else int(footprint)}


def check_conditions(conditions: object, n_args: int) -> tuple[tuple[int, ...], int | None]:
    """``(constant positions, footprint)`` of ``network_conditions``' output (untrusted: it may
    come over the network), else ValueError naming what is wrong."""
    if not isinstance(conditions, dict):
        raise ValueError(f"network conditions must be a dict, got {type(conditions).__name__}")
    constants, footprint = conditions.get("constants", ()), conditions.get("footprint")
    if not isinstance(constants, (list, tuple)) or not all(
            type(p) is int and 0 <= p < n_args for p in constants):
        raise ValueError(f"network conditions: constants must be argument positions below {n_args}")
    if footprint is not None and not (type(footprint) is int and 0 <= footprint <= MAX_FOOTPRINT_BYTES):
        raise ValueError(f"network conditions: footprint must be bytes from 0 to {MAX_FOOTPRINT_BYTES}, "
                         f"got {footprint!r}")
    return tuple(sorted(set(constants))), footprint


class MeasureErrorNo(IntEnum):
    NO_ERROR = 0
    INSTANTIATION_ERROR = 1  # the steps do not apply / the state does not lower (invalid schedule)
    COMPILE_HOST = 2         # code generation or LLVM failed
    COMPILE_DEVICE = 3       # (kept for TVM compatibility; unused on CPU)
    RUNTIME_DEVICE = 4       # the kernel crashed (e.g. segfault) in the runner
    WRONG_ANSWER = 5         # check_correctness found a mismatch with the numpy reference
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN = 8              # anything else (the worker reports the exception text)


@dataclass(frozen=True)
class MeasureInput:
    """One candidate: a task (``compute_dag`` and ``workload_key``: a SearchTask) and a state."""

    task: TaskLike
    state: State


@dataclass(frozen=True)
class BuildResult:
    """What the builder hands the runner: object code, or the error that prevented it."""

    compiled: Any | None  # measure.kernel.CompiledObject
    error_no: int
    error_msg: str
    time_cost: float  # seconds spent building
    host: str = ""  # the machine that built it (``measure.host`` rule; "" if not known)


@dataclass(frozen=True)
class MeasureResult:
    """``costs``: seconds per run, one entry per repeat; ``all_cost``: wall-clock seconds the
    measurement took (build + run); ``timestamp``: when it finished (Unix seconds); ``host``: the
    machine that timed it (for a candidate that never ran, the one that built it; "" when not
    known, as in records written before hosts were recorded); ``cache``: the runner's mode
    (``WARM``, ``COLD`` or ``NETWORK``; records written before the modes existed were warm)."""

    costs: tuple[float, ...]
    error_no: int
    error_msg: str = ""
    all_cost: float = 0.0
    timestamp: float = field(default_factory=time.time)
    host: str = ""
    cache: str = WARM

    @property
    def ok(self) -> bool:
        return self.error_no == MeasureErrorNo.NO_ERROR

    @property
    def mean_cost(self) -> float:
        """Mean seconds per run, or MAX_FLOAT for a failed measurement."""
        if not self.ok or not self.costs:
            return MAX_FLOAT
        return sum(self.costs) / len(self.costs)

    def __repr__(self) -> str:
        if self.ok:
            return f"MeasureResult({self.mean_cost * 1e3:.4f} ms over {len(self.costs)} repeats)"
        return f"MeasureResult({MeasureErrorNo(self.error_no).name}: {self.error_msg[:80]})"


class MeasureUnavailableError(RuntimeError):
    """The machinery that builds or measures is gone (a Dask scheduler shut down, a cluster with
    no worker that may measure for this target): no candidate is at fault, and no later batch
    could be measured either. Builders and runners raise it instead of returning error results,
    which would be logged as if the candidates had failed; the tuners stop on it with the log as
    it is (the batch under way is abandoned, as on Ctrl-C) and say how to resume."""


def pooled_cost(samples: "list[float] | tuple[float, ...]") -> float:
    """A schedule's cost over all its measurements: the median of its records' mean costs.

    One measurement of a 2-thread kernel on a shared host can land in a window where the
    machine runs it up to 2x faster than it usually does (measured: a conv timed 1.7 ms in one
    100 ms window, 3.5 ms in most); the best of hundreds of single measurements is then a lucky
    window, not a fast schedule. Re-measuring a best at other moments and taking the median
    keeps one lucky window from deciding which schedule a network is compiled with."""
    s = sorted(samples)
    if not s:
        return MAX_FLOAT
    m = len(s) // 2
    return s[m] if len(s) % 2 else 0.5 * (s[m - 1] + s[m])
