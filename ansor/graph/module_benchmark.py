"""Timing a compiled network (``NetworkModule.benchmark``): an inference's time and the executor's
own dispatch cost beside it; each kernel's time inside the running network
(``NetworkModule.profile``); and the per-kernel choice of one thread or all
(``NetworkModule.pick_kernel_threads``).

An inference is one native call of the module's call chain (``measure.call_chain``: every kernel
called in order on precomputed pointers, no Python between kernels), timed by the native harness
and the one timing loop (``measure.timer``) like a kernel. The dispatch cost is the same chain with
a native no-op in place of each kernel: what the executor adds to the kernels' time.

A profile runs the same chain with the clock read between consecutive calls
(``CallTable.profile``), for as many inferences as make one repeat of ``min_repeat_ms``; a step's
figure is its median over those inferences. Each kernel finds the caches as the kernels before it
left them, which is what a kernel timed alone (warm or cold, ``measure.runner``) only
approximates.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import statistics
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from measure import timer
from measure.call_chain import CallTable

# Passes of the no-op chain timed for the dispatch cost (well under a microsecond each).
DISPATCH_REPS = 2000
# One thread is kept for a kernel only when it is this much faster than all of them: noise on a
# shared machine must not take threads from a kernel that gains from them.
ONE_THREAD_MARGIN = 0.10


@lru_cache(maxsize=1)
def native_noop_address() -> int:
    """The address of libc's ``labs``: a native function that does nothing a caller sees, called
    in place of each kernel to time what the dispatch alone costs (extra pointer arguments in
    registers or on the caller's stack are ignored by the C calling convention)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    return int(ctypes.cast(libc.labs, ctypes.c_void_p).value or 0)


def benchmark_table(table: CallTable, calls: list[tuple[int, list[int]]], repeat: int,
                    min_repeat_ms: float, warmup_ms: float) -> dict[str, float]:
    """Median seconds per pass of ``table`` (``mean``: one inference), the dispatch cost per pass
    (``overhead``: the same chain over ``calls``' pointers with a no-op for every function) and
    its share of ``mean`` (``overhead_share``); ``kernels`` is the number of calls."""
    inference = timer.time_calls(timer.Timer(table.chain.address, [table.address]), repeat=repeat,
                                 min_repeat_ms=min_repeat_ms, warmup_s=warmup_ms / 1e3)
    mean = inference.median
    noop = native_noop_address()
    dispatch = table.chain.table([(noop, ptrs) for _, ptrs in calls])
    overhead = timer.time_calls(timer.Timer(dispatch.chain.address, [dispatch.address]), repeat=1,
                                number=DISPATCH_REPS).median
    return {"mean": mean, "overhead": overhead, "overhead_share": overhead / mean if mean else 0.0,
            "kernels": len(calls)}


PROFILE_STATISTICS = ("median", "mean")


def profile_table(table: CallTable, min_repeat_ms: float, warmup_ms: float,
                  statistic: str = "median") -> list[float]:
    """Seconds of each call of ``table`` over the inferences of one ``min_repeat_ms`` repeat (at
    least 5), after ``warmup_ms`` of warm-up that also estimates an inference: each call's
    median, or its mean (``statistic="mean"``: the steps then sum to the mean inference, as a
    benchmark repeat averages its calls; the medians sum lower when steps are slow at random,
    3-14% below ``benchmark()`` on a shared host)."""
    if statistic not in PROFILE_STATISTICS:
        raise ValueError(f"profile statistic must be one of {', '.join(PROFILE_STATISTICS)}, got {statistic!r}")
    run = timer.Timer(table.chain.address, [table.address])
    warm = timer.time_calls(run, repeat=1, warmup_s=max(0.0, warmup_ms) / 1e3)
    passes = max(5, math.ceil(max(0.0, min_repeat_ms) / 1e3 / max(warm.median, 1e-9)))
    reduce = np.median if statistic == "median" else np.mean
    return [float(t) for t in reduce(table.profile(passes), axis=0)]


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
