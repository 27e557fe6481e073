"""Run contexts of a compiled network and the bounded pool they are taken from, so that
``NetworkModule.run`` is safe to call from many threads.

A ``Context`` is what one run writes: its own input, intermediate and output buffers and the
table of kernel calls on their precomputed pointers (one native call runs them all); constants (packed weights) are shared by
every context, read-only. A run takes a context from the module's ``ContextPool``, runs, and
gives it back, so a single thread keeps reusing one context (cache-warm buffers, one context's
memory) and the per-call cost is a lock-free queue get and put.

The pool is bounded: ``limit`` contexts at most, made lazily as concurrent runs need them; a run
that finds all of them busy waits (asleep) for one to come back. The bound is the number of runs
allowed to execute at once (``NetworkModule.max_concurrent_runs``, by default ``default_limit``):
a parallel kernel runs on its thread count of the process's thread pool (``measure.thread_pool``;
one caller at a time, a kernel finding it busy runs on its own thread alone), so runs beyond what
the cores hold would only time-share them. Bounded, each run executes as a lone run would, and
the memory spent on contexts is bounded too.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from compute import dtype as dt
from measure.buffers import aligned_copy, aligned_zeros, is_aligned
from measure.call_chain import chain_for


class Context:
    """One run's buffers (``buffers``: shared constants and this context's own arrays, by buffer
    id), its kernel calls (``calls``: ``(function address, argument pointers)`` per step) and
    their table for the module's call chain (``table``: ``measure.call_chain``)."""

    __slots__ = ("buffers", "calls", "table")

    def __init__(self, buffers: list[np.ndarray], steps: Sequence[Any]):
        self.buffers = buffers
        # Pointers computed once per context: a run is then one native call making every kernel
        # call in order (the steps' kernels and these buffers outlive the context's use).
        self.calls = [(s.kernel.address, [buffers[b].ctypes.data for b in s.args]) for s in steps]
        self.table = chain_for([len(p) for _, p in self.calls]).table(self.calls)

    def execute(self) -> None:
        # One ctypes call: the GIL is released once for the whole run, so runs in other contexts
        # overlap, and no Python runs between two kernels.
        self.table.run()


def materialise(specs: list[tuple], consts: Mapping[str, np.ndarray],
                shared: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """The arrays of buffer ``specs``, each on a 64-byte boundary (``measure.buffers``: where the
    tuner timed the kernels): ``("input", shape, dtype)``, ``("alloc", size, dtype)``
    (flat), ``("const", key)`` (``consts[key]``), ``("view", buffer, shape)`` (the first elements of
    that buffer, row-major). ``shared``: another context's arrays, whose constants and views of
    constants are taken as they are (only the rest is allocated again)."""
    out: list[np.ndarray] = []
    const: list[bool] = []  # per buffer: a constant or a view of one
    for i, spec in enumerate(specs):
        kind = spec[0]
        const.append(kind == "const" or (kind == "view" and const[spec[1]]))
        if shared is not None and const[i]:
            out.append(shared[i])
        elif kind in ("input", "alloc"):
            out.append(aligned_zeros(spec[1], dt.to_numpy(spec[2])))
        elif kind == "const":
            c = np.asarray(consts[spec[1]])
            out.append(c if c.flags.c_contiguous and is_aligned(c) else aligned_copy(c))
        else:
            flat = out[spec[1]].reshape(-1)  # a view: every buffer is C-contiguous
            out.append(flat[:int(np.prod(spec[2]))].reshape(spec[2]))
    return out


def own_nbytes(specs: list[tuple]) -> int:
    """Bytes a context allocates for itself: its inputs, intermediates and outputs."""
    return sum(int(sp[1] if sp[0] == "alloc" else np.prod(sp[1], dtype=np.int64)) * dt.to_numpy(sp[2]).itemsize
               for sp in specs if sp[0] in ("input", "alloc"))


def default_limit(kernels: Iterable[Any]) -> int:
    """Concurrent runs that fit the cores without oversubscribing them: every kernel runs on
    its ``num_threads`` (``ANSOR_NUM_THREADS`` when it was loaded, else every usable CPU), so
    ``max(1, usable CPUs // the largest count)``."""
    from measure.target import usable_cpus  # noqa: PLC0415 - LLVM: the kernels loaded it already

    per_run = max((k.num_threads for k in kernels), default=1)
    return max(1, usable_cpus() // per_run)


def check_limit(n: Any) -> int:
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"max_concurrent_runs must be a positive int, got {n!r}")
    return int(n)


class ContextPool:
    """At most ``limit`` contexts made by ``make()`` (``first`` counts as made), taken by
    ``take()`` and returned by ``give(ctx)``; ``take`` waits while all are in use. Changing
    ``limit`` takes effect as contexts are given back (extra ones are dropped)."""

    def __init__(self, make: Callable[[], Context], limit: int, first: Context | None = None):
        self._make = make
        self._limit = check_limit(limit)
        self._free: queue.SimpleQueue = queue.SimpleQueue()  # C-level get/put: the fast path
        self._lock = threading.Lock()  # guards _made (the slow path only)
        self._made = 0
        if first is not None:
            self._made = 1
            self._free.put(first)

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, n: int) -> None:
        n = check_limit(n)
        with self._lock:
            grow = n - max(self._limit, self._made)
            self._limit = n
        for _ in range(max(0, grow)):  # waiting runs may make a context now: wake them
            self._free.put(None)

    @property
    def made(self) -> int:
        """Contexts that exist now (in use or free)."""
        return self._made

    def take(self) -> Context:
        while True:
            try:
                ctx = self._free.get_nowait()
            except queue.Empty:
                with self._lock:
                    make = self._made < self._limit
                    if make:
                        self._made += 1
                if make:
                    try:
                        return self._make()
                    except BaseException:
                        with self._lock:
                            self._made -= 1
                        self._free.put(None)  # a waiting run may make one in its place
                        raise
                ctx = self._free.get()  # all in use: wait for one to come back
            if ctx is not None:
                return ctx
            # None: a wake-up (a context could not be made, or the limit grew): try again

    def give(self, ctx: Context) -> None:
        if self._made > self._limit:  # the limit was lowered: retire this one
            with self._lock:
                if self._made > self._limit:
                    self._made -= 1
                    return
        self._free.put(ctx)
