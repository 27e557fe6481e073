"""Timing a compiled network (``NetworkModule.benchmark``): an inference's time and the executor's
own dispatch cost beside it; and each kernel's time inside the running network
(``NetworkModule.profile``).

An inference is the module's loop of native calls on precomputed pointers, timed by the one
timing loop (``measure.timer.time_calls``) like a kernel. The dispatch cost is the same loop with a
native no-op in place of each kernel: what the executor adds to the kernels' time.

A profile runs the same steps, in order, in the native step harness (``measure.timer.StepTimer``:
the clock read between consecutive calls, no Python between them), for as many inferences as
``time_calls`` gives one repeat of ``min_repeat_ms``; a step's figure is its median over those
inferences. Each kernel finds the caches as the kernels before it left them, which is what a
kernel timed alone (warm or cold, ``measure.runner``) only approximates.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import statistics
from typing import Any, Sequence

from measure import timer

# Passes of the no-op loop timed for the dispatch cost (a few microseconds each).
DISPATCH_REPS = 200


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


def profile_steps(steps: Sequence[tuple[int, Sequence[int]]], min_repeat_ms: float,
                  warmup_ms: float) -> list[float]:
    """Median seconds of each step, ``(kernel address, argument pointers)``, over the inferences
    of one ``min_repeat_ms`` repeat after ``warmup_ms`` of warm-up (``StepTimer``)."""
    run = timer.StepTimer(steps)
    timer.time_calls(run, repeat=1, min_repeat_ms=min_repeat_ms, warmup_s=warmup_ms / 1e3)
    per_pass = run.step_seconds()
    return [statistics.median(p[k] for p in per_pass) for k in range(len(steps))]


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
