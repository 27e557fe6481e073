"""How anything is timed: the one timing loop (``time_calls``) and the native harness it drives.

``time_calls(run, ...)`` is the only timing loop: the runner (per candidate), ``Kernel.benchmark``,
a compiled network's ``benchmark`` and the benchmark suite (``ansor.bench.timing.time_callable``,
for ours and every in-process peer) all call it, each stating its own warm-up, calls per repeat,
repeats, minimum repeat length, cache flush and cooldown as parameters, so that one rule decides
how a figure is taken. ``run(n)`` makes ``n`` back-to-back calls and returns the seconds they took:
the native harness below (``Timer``) for a kernel on fixed pointers, ``python_calls(fn)`` for any
Python callable.

Timing a small kernel from Python adds the ctypes call, argument conversion and the interpreter
loop to every call (microseconds, as much as the kernel itself for small workloads). The harness is
a few lines of LLVM IR, compiled once per process and per argument count:

    double ansor_time_N(ptr fn, ptr sets, i64 number, i64 nsets, i64 start)

reads CLOCK_MONOTONIC, calls ``fn`` ``number`` times through the pointer and reads the clock again;
only one ctypes call per repeat remains, outside the timed region. ``sets`` holds ``nsets`` argument
sets of N pointers each; call ``i`` passes set ``(start + i) mod nsets``. With one set every call
runs on the same buffers (warm: what was timed before cold mode existed, the loads of N pointers
from L1 aside); with several (``Timer(..., rotate=...)``, the runner's cold mode) each call finds
its arguments where the calls since its set's last use evicted them, and nothing but the calls is
timed (no flush inside the timed region). ``rotation_sets`` says how many sets make that so. In
the runner's network mode only the constant arguments differ from set to set.
``ansor_clflush(ptr, i64)`` evicts a buffer from every cache level (clflush on each line, then a
fence) so a repeat can start cold. (A network's kernels in order, each timed where it runs, are
``measure.call_chain``'s: ``NetworkModule.profile``.)
"""
from __future__ import annotations

import ctypes
import math
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import llvmlite.binding as llvm

from . import target

CLOCK_MONOTONIC = 1  # Linux <time.h>

_LOCK = threading.Lock()
_HARNESS: dict[object, tuple[object, object]] = {}  # arity / "flush" -> (engine, fn)

_TIME_PROTO = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                               ctypes.c_int64, ctypes.c_int64)
_FLUSH_PROTO = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


def _header() -> list[str]:
    return [f'target datalayout = "{target.data_layout()}"', f'target triple = "{target.host_triple()}"', ""]


def timer_ir(n_args: int) -> str:
    """IR of ``ansor_time_<n_args>``; at least one call is made even if ``number`` < 1; ``start``
    must be below ``nsets``."""
    loads = []
    for i in range(n_args):
        loads.append(f"  %p{i} = getelementptr ptr, ptr %set, i64 {i}")
        loads.append(f"  %a{i} = load ptr, ptr %p{i}, align 8")
    call_args = ", ".join(f"ptr %a{i}" for i in range(n_args))
    return "\n".join(_header() + [
        "declare i32 @clock_gettime(i32, ptr)",
        "",
        f"define double @ansor_time_{n_args}(ptr %fn, ptr %sets, i64 %number, i64 %nsets, "
        "i64 %start) {",
        "entry:",
        "  %t0 = alloca [2 x i64], align 8",
        "  %t1 = alloca [2 x i64], align 8",
        f"  call i32 @clock_gettime(i32 {CLOCK_MONOTONIC}, ptr %t0)",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [ 0, %entry ], [ %next, %loop ]",
        "  %j = phi i64 [ %start, %entry ], [ %jn, %loop ]",
        f"  %off = mul i64 %j, {n_args}",
        "  %set = getelementptr ptr, ptr %sets, i64 %off",
        *loads,
        f"  call void %fn({call_args})",
        "  %j1 = add i64 %j, 1",
        "  %wrap = icmp sge i64 %j1, %nsets",
        "  %jn = select i1 %wrap, i64 0, i64 %j1",
        "  %next = add i64 %i, 1",
        "  %more = icmp slt i64 %next, %number",
        "  br i1 %more, label %loop, label %done",
        "done:",
        f"  call i32 @clock_gettime(i32 {CLOCK_MONOTONIC}, ptr %t1)",
        "  %s0 = load i64, ptr %t0, align 8",
        "  %n0p = getelementptr i64, ptr %t0, i64 1",
        "  %n0 = load i64, ptr %n0p, align 8",
        "  %s1 = load i64, ptr %t1, align 8",
        "  %n1p = getelementptr i64, ptr %t1, i64 1",
        "  %n1 = load i64, ptr %n1p, align 8",
        "  %ds = sub i64 %s1, %s0",
        "  %dn = sub i64 %n1, %n0",
        "  %dsf = sitofp i64 %ds to double",
        "  %dnf = sitofp i64 %dn to double",
        "  %dns = fmul double %dnf, 1.0e-9",
        "  %r = fadd double %dsf, %dns",
        "  ret double %r",
        "}",
        ""])


def flush_ir() -> str:
    """IR of ``ansor_clflush(ptr start, i64 nbytes)``; ``start`` must be cache-line aligned."""
    return "\n".join(_header() + [
        "declare void @llvm.x86.sse2.clflush(ptr)",
        "declare void @llvm.x86.sse2.mfence()",
        "",
        "define void @ansor_clflush(ptr %p, i64 %n) {",
        "entry:",
        "  %any = icmp sgt i64 %n, 0",
        "  br i1 %any, label %loop, label %done",
        "loop:",
        "  %off = phi i64 [ 0, %entry ], [ %next, %loop ]",
        "  %q = getelementptr i8, ptr %p, i64 %off",
        "  call void @llvm.x86.sse2.clflush(ptr %q)",
        f"  %next = add i64 %off, {target.cache_line_bytes()}",
        "  %more = icmp slt i64 %next, %n",
        "  br i1 %more, label %loop, label %done",
        "done:",
        "  call void @llvm.x86.sse2.mfence()",
        "  ret void",
        "}",
        ""])


def _compile(key: object, ir: str, symbol: str, proto: type) -> object:
    with _LOCK:
        hit = _HARNESS.get(key)
        if hit is not None:
            return hit[1]
        mod = llvm.parse_assembly(ir)
        mod.verify()
        engine = llvm.create_mcjit_compiler(mod, target.new_target_machine())
        engine.finalize_object()
        fn = proto(engine.get_function_address(symbol))
        _HARNESS[key] = (engine, fn)  # the engine owns the machine code: keep it alive
        return fn


class Timer:
    """Times ``void fn(ptr...)``: ``timer(number)`` returns the seconds that ``number``
    back-to-back calls took. ``pointers``: the arguments; ``rotate``: further argument sets (same
    arity), the calls cycling through all of them (``pointers`` first), the cycle carried on from
    one ``timer(number)`` to the next, so a set's next use always comes ``sets`` calls after its
    last one."""

    def __init__(self, fn_address: int, pointers: Sequence[int],
                 rotate: Sequence[Sequence[int]] = ()):
        n = len(pointers)
        if any(len(s) != n for s in rotate):
            raise ValueError(f"Timer: every argument set needs {n} pointers")
        self._fn = _compile(n, timer_ir(n), f"ansor_time_{n}", _TIME_PROTO)
        self._address = fn_address
        flat = [int(p) for p in pointers] + [int(p) for s in rotate for p in s]
        self.sets = 1 + len(rotate)
        self._args = (ctypes.c_void_p * max(1, len(flat)))(*flat)
        self._args_address = ctypes.addressof(self._args)
        self._next = 0  # the set the next call takes

    def __call__(self, number: int) -> float:
        number = max(1, int(number))
        elapsed = float(self._fn(self._address, self._args_address, number, self.sets, self._next))
        self._next = (self._next + number) % self.sets
        return elapsed


# Cold timing (``rotation_sets``): the argument sets one rotation cycles through hold at least
# this many times the last-level cache, so that the calls between two uses of a set evict it.
COLD_LLC_FACTOR = 2
# Caps of a rotation: its sets (their pointers and per-set bookkeeping) and the bytes of the
# copies beyond the first set (the worker's address space is capped too: ``memory_limit_gb``).
MAX_ROTATION_SETS = 1 << 16
MAX_ROTATION_EXTRA_BYTES = 1 << 30


def rotation_sets(set_bytes: int, llc_bytes: int, cover_bytes: int | None = None) -> int:
    """Argument sets a rotation cycles through. Cold (``cover_bytes`` None): enough that
    ``sets x set_bytes`` is at least ``COLD_LLC_FACTOR`` last-level caches, at least 2. Network
    mode (``cover_bytes``: what the rest of a network touches between two calls of the kernel):
    enough that the other ``sets - 1`` sets cover it, as far as ``COLD_LLC_FACTOR`` caches (beyond
    that a set is evicted anyway), at least 1 (nothing between two calls: no rotation). Either way
    at most ``MAX_ROTATION_SETS`` and no more than ``MAX_ROTATION_EXTRA_BYTES`` of copies beyond
    the first set. A set bigger than the cap rotates alone (1): a kernel streaming through many
    times the cache evicts its own start."""
    set_bytes = max(1, int(set_bytes))
    evicting = COLD_LLC_FACTOR * max(1, int(llc_bytes))
    if cover_bytes is None:
        want = max(2, math.ceil(evicting / set_bytes))
    else:
        want = 1 + math.ceil(min(max(0, int(cover_bytes)), evicting) / set_bytes)
    return max(1, min(want, MAX_ROTATION_SETS, 1 + MAX_ROTATION_EXTRA_BYTES // set_bytes))


def can_flush() -> bool:
    """clflush exists on every x86-64 CPU and on no other architecture we build for."""
    return target.host_triple().startswith(("x86_64", "i386", "i686"))


def flush(address: int, nbytes: int) -> None:
    """Evict ``[address, address + nbytes)`` from every cache level."""
    if nbytes <= 0:
        return
    fn = _compile("flush", flush_ir(), "ansor_clflush", _FLUSH_PROTO)
    start = address & ~(target.cache_line_bytes() - 1)
    fn(start, address + nbytes - start)


# ---- the timing loop ----------------------------------------------------------------------------

# ``run(n)``: make ``n`` back-to-back calls, return the seconds they took.
RunCalls = Callable[[int], float]


@dataclass(frozen=True)
class Timing:
    """What ``time_calls`` measured: ``samples`` are seconds per call, one per repeat;
    ``number`` the calls per repeat (after any growth in the first repeat)."""

    samples: tuple[float, ...]
    number: int

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))

    @property
    def mean(self) -> float:
        return float(statistics.fmean(self.samples))

    @property
    def best(self) -> float:
        return float(min(self.samples))


def python_calls(fn: Callable[[], object]) -> RunCalls:
    """``run(n)`` for a Python callable: ``n`` calls of ``fn()`` between two ``perf_counter``
    reads (the interpreter loop is timed with it: the figure is what a Python caller pays)."""
    def run(number: int) -> float:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return time.perf_counter() - t0
    return run


def time_calls(run: RunCalls, *, repeat: int, number: int = 1, min_repeat_ms: float = 0.0,
               warmup_s: float = 0.0, first_estimate: float | None = None,
               before_repeat: Callable[[], None] | None = None,
               cooldown_s: float = 0.0) -> Timing:
    """Time ``run``: warm up, then ``repeat`` repeats of ``number`` calls.

    * warm-up: batches of calls doubling in size until ``warmup_s`` seconds (as ``run`` reports
      them) are spent; it also estimates one call's time (an idle vCPU runs ~2.5x slower for its
      first ~250 ms of work, and page faults and thread-pool start-up land there too);
    * ``number`` grows from that estimate (or ``first_estimate``, seconds of one call already
      made) so that a repeat lasts at least ``min_repeat_ms``; if the first repeat still falls
      short (an estimate from cold calls can be off) it grows and that repeat is redone, as TVM's
      time_evaluator does. ``min_repeat_ms`` 0 keeps ``number`` as given;
    * ``before_repeat`` (e.g. a cache flush) runs before each timed repeat, redone ones too;
      ``cooldown_s`` seconds pass between repeats.
    """
    min_repeat_s = max(0.0, float(min_repeat_ms)) / 1e3
    number = max(1, int(number))
    warm_s = max(0.0, float(warmup_s))
    per_call = first_estimate
    if warm_s > 0:
        calls, spent, batch = 0, 0.0, 1
        while spent < warm_s:
            spent += run(batch)
            calls += batch
            per_call = spent / calls
            batch = max(1, min(batch * 2, math.ceil((warm_s - spent) / max(per_call, 1e-9))))
    if per_call is not None and min_repeat_s > 0:
        number = max(number, math.ceil(min_repeat_s / max(per_call, 1e-9)))
    cooldown = max(0.0, float(cooldown_s))
    samples: list[float] = []
    for r in range(max(1, int(repeat))):
        if r and cooldown:
            time.sleep(cooldown)
        while True:
            if before_repeat is not None:
                before_repeat()
            elapsed = run(number)
            if elapsed >= min_repeat_s or samples:
                break
            number = max(number + 1,
                         math.ceil(number * min(min_repeat_s / max(elapsed, 1e-9), 1e6) * 1.1))
        samples.append(elapsed / number)
    return Timing(tuple(samples), number)
