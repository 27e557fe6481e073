"""Timing a compiled network (``NetworkModule.benchmark``): an inference's time and the executor's
own dispatch cost beside it; and the per-kernel choice of one thread or all
(``NetworkModule.pick_kernel_threads``).

An inference is the module's loop of native calls on precomputed pointers, timed by the one
timing loop (``measure.timer.time_calls``) like a kernel. The dispatch cost is the same loop with a
native no-op in place of each kernel: what the executor adds to the kernels' time.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import statistics
from typing import Any, Sequence

from measure import timer

# Passes of the no-op loop timed for the dispatch cost (a few microseconds each).
DISPATCH_REPS = 200
# One thread is kept for a kernel only when it is this much faster than all of them: noise on a
# shared machine must not take threads from a kernel that gains from them.
ONE_THREAD_MARGIN = 0.10


def native_noop(nargs: int) -> Any:
    """libc's ``labs`` behind a prototype of ``nargs`` pointers: a native call that does
    nothing, to time what ctypes dispatch alone costs (extra register arguments are ignored)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    addr = ctypes.cast(libc.labs, ctypes.c_void_p).value
    return ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs))(addr)


def _loop(calls: Sequence[tuple[Any, Sequence[int]]]) -> Any:
    def execute() -> None:
        for fn, ptrs in calls:
            fn(*ptrs)
    return execute


def benchmark_calls(calls: Sequence[tuple[Any, Sequence[int]]], repeat: int, min_repeat_ms: float,
                    warmup_ms: float) -> dict[str, float]:
    """Median seconds per pass over ``calls`` (``mean``; ``(fn, pointers)`` pairs, as a module
    runs them), the dispatch cost per pass (``overhead``) and its share of ``mean``
    (``overhead_share``); ``kernels`` is the number of calls."""
    inference = timer.time_calls(timer.python_calls(_loop(calls)), repeat=repeat,
                                 min_repeat_ms=min_repeat_ms, warmup_s=warmup_ms / 1e3)
    mean = inference.median
    noops: dict[int, Any] = {}
    dispatch = [(noops.setdefault(len(ptrs), native_noop(len(ptrs))), ptrs) for _, ptrs in calls]
    overhead = timer.time_calls(timer.python_calls(_loop(dispatch)), repeat=1,
                                number=DISPATCH_REPS).median
    return {"mean": mean, "overhead": overhead, "overhead_share": overhead / mean if mean else 0.0,
            "kernels": len(calls)}


def pick_threads(kernels: Sequence[tuple[Any, Sequence[int]]], threads: int, rounds: int = 3,
                 min_repeat_ms: float = 2.0) -> list[int]:
    """For each ``(kernel, argument pointers)``: 1 if the kernel runs faster on one thread than
    on ``threads`` (its median over ``rounds`` alternating timings lower by ``ONE_THREAD_MARGIN``),
    else ``threads``; each kernel's ``num_threads`` is set to its choice. Kernels too small to
    gain from threads (a few microseconds: the pool's hand-off costs about as much) get one."""
    chosen = []
    for kernel, ptrs in kernels:
        run = timer.Timer(kernel.address, ptrs)
        times: dict[int, list[float]] = {1: [], threads: []}
        for _ in range(max(1, rounds)):
            for n in times:
                kernel.num_threads = n
                times[n].append(timer.time_calls(run, repeat=1, min_repeat_ms=min_repeat_ms,
                                                 warmup_s=min_repeat_ms / 2e3).median)
        one, many = statistics.median(times[1]), statistics.median(times[threads])
        best = 1 if threads > 1 and one < many * (1 - ONE_THREAD_MARGIN) else threads
        kernel.num_threads = best
        chosen.append(best)
    return chosen
