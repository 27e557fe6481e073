"""The compiled network as an object: ``NetworkModule`` (run, benchmark, export), built by
``executor.link`` and ``executor.load_module``.

It runs in a context (``module_contexts``) owning one buffer per graph input and output and a
planned pool of intermediate buffers; concurrent runs take different contexts from a pool capped
at the runs the cores can hold (see the class docstring). ``export`` writes the module directory
that ``executor.load_module`` reads back; ``export_library`` writes one shared library with a C ABI
and the standalone loader (``export_library.py``).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compute import dtype as dt

from .ir import GraphError, TensorType, display_name
from .ir_types import numpy_dtype
from .module_benchmark import benchmark_table, pick_threads, profile_table
from .module_contexts import Context, ContextPool, default_limit, materialise, own_nbytes
from .module_target import target_entry


FORMAT = "ansor-network-module"
VERSION = 1


@dataclass
class _Step:
    kernel: Any  # measure.kernel.Kernel
    args: list[int]  # buffer ids
    name: str  # subgraph name, for profiles
    transform: bool = False  # a layout transform between two groups (``layouts``)
    one_thread: bool = False  # its kernel runs on one thread (``pick_kernel_threads``)
    task: str = ""  # the workload key of its tuning task ("" for a transform or a non-task group)


class NetworkModule:
    """A compiled network. ``run(inputs)`` -> ``{output name: array}``. ``io_dtypes``: the
    graph's boundary dtypes (``Graph.io_dtypes``: float16/bfloat16 inputs and outputs computed
    as float32 inside), kept by ``export``/``load_module``.

    Threads: ``run`` may be called from many threads at once (a loaded module too). Each run
    takes a context from a pool: its own inputs, intermediates and outputs (``context_nbytes``
    each), constants shared read-only. At most ``max_concurrent_runs`` (settable) runs execute
    at once, others wait for a context: by default ``max(1, usable CPUs // kernel threads)``, as
    every parallel kernel asks the process's thread pool (``measure.thread_pool``) for
    ``ANSOR_NUM_THREADS`` (default: every CPU) threads (fixed when it loads; a kernel that finds
    the pool busy with another run's kernel runs on its own thread alone), so runs do not
    oversubscribe the cores: by default one run at a time on all cores, with
    ``ANSOR_NUM_THREADS=1`` one per core.
    The pool grows lazily to that bound, so contexts take at most ``max_concurrent_runs *
    context_nbytes``; one thread reuses one context, taken for ~0.2 us a call. Measured on 2
    cores shared with other jobs (load 7-9), 8 threads x 5 calls of resnet-18 at 32x32, 2-thread
    kernels: CPU time per call the same at limits 1, 2 and 8 (17-20 ms, two runs), so the bound
    loses no work; wall-clock calls/s there followed the share of the machine won, not the
    limit. ``benchmark`` times one context."""

    def __init__(self, inputs: Mapping[str, TensorType], outputs: list[tuple[str, int]],
                 specs: list[tuple], consts: Mapping[str, np.ndarray], input_buffers: dict[str, int],
                 steps: list[_Step], io_dtypes: Mapping[str, str] | None = None):
        self.input_types = dict(inputs)
        self.io_dtypes = dict(io_dtypes or {})
        # The numpy dtypes a caller may give per input (its own; for a half-precision boundary
        # also that one) and the one each output is returned in.
        self._accepts = {n: {dt.to_numpy(t.dtype)} | ({numpy_dtype(self.io_dtypes[n])} if n in self.io_dtypes else set())
                         for n, t in self.input_types.items()}
        self._out_dtypes = {n: numpy_dtype(d) for n, d in self.io_dtypes.items()}
        self.output_names = [o for o, _ in outputs]
        self._outputs, self._specs = outputs, specs
        self._consts = dict(consts)
        self._input_buffers = input_buffers
        self._steps = steps
        for s in steps:
            if s.one_thread:
                s.kernel.num_threads = 1
        first = Context(materialise(specs, consts), steps)
        self._buffers = first.buffers  # the first context's, for inspection
        for s in steps:  # check every call once, as a Kernel call would, then call raw
            s.kernel.arg_pointers(*[first.buffers[b] for b in s.args])
        self._contexts = ContextPool(self._new_context, default_limit(s.kernel for s in steps), first)

    @property
    def num_kernels(self) -> int:
        return len(self._steps)

    @property
    def target_name(self) -> str:  # the CPU the kernels were built for (``measure.targets``)
        return self._steps[0].kernel.compiled.target if self._steps else "native"

    @property
    def num_layout_transforms(self) -> int:
        """Kernel calls that only change an activation's layout (see ``compile_network``)."""
        return sum(1 for s in self._steps if s.transform)

    @property
    def max_concurrent_runs(self) -> int:
        """How many runs may execute at once (each in its own context); more wait for a context."""
        return self._contexts.limit

    @max_concurrent_runs.setter
    def max_concurrent_runs(self, n: int) -> None:
        self._contexts.limit = n

    @property
    def num_contexts(self) -> int:
        """Contexts made so far (at most ``max_concurrent_runs``)."""
        return self._contexts.made

    @property
    def context_nbytes(self) -> int:
        """Bytes of one context's own buffers (inputs, intermediates, outputs)."""
        return own_nbytes(self._specs)

    def _new_context(self) -> Context:
        # Constants (and views of them) are the first context's arrays, shared read-only.
        return Context(materialise(self._specs, self._consts, self._buffers), self._steps)

    def _set_inputs(self, buffers: list[np.ndarray], inputs: Mapping[str, Any]) -> None:
        if not isinstance(inputs, Mapping):
            raise TypeError(f"run takes a dict of input name -> array, got {type(inputs).__name__}")
        unknown = [n for n in inputs if n not in self.input_types]
        if unknown:
            raise GraphError("unknown input name(s): " + ", ".join(display_name(str(n)) for n in unknown)
                             + "; the network's inputs: " + ", ".join(display_name(n) for n in self.input_types))
        missing = [n for n in self.input_types if n not in inputs]
        if missing:
            raise GraphError("missing input(s): " + ", ".join(display_name(n) for n in missing))
        for name, t in self.input_types.items():
            arr = inputs[name]
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr)
            if tuple(arr.shape) != t.shape:
                raise GraphError(f"input {display_name(name)}: expected shape {list(t.shape)}, got {list(arr.shape)}")
            if arr.dtype not in self._accepts[name]:
                want = " or ".join(sorted(str(d) for d in self._accepts[name]))
                raise GraphError(f"input {display_name(name)}: expected dtype {want}, got {arr.dtype}")
            buffers[self._input_buffers[name]][...] = arr  # a half-precision array: widened here

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run on named numpy inputs (exact shape and dtype; an input with a float16/bfloat16
        boundary takes that dtype or float32); returns fresh output arrays (a half-precision
        output rounded to its boundary dtype)."""
        pool = self._contexts
        ctx = pool.take()
        try:
            buffers = ctx.buffers
            self._set_inputs(buffers, inputs)
            ctx.execute()
            return {name: buffers[b].astype(self._out_dtypes[name]) if name in self._out_dtypes
                    else buffers[b].copy() for name, b in self._outputs}
        finally:
            pool.give(ctx)

    @property
    def kernel_threads(self) -> dict[str, int]:
        """The threads each step's kernel runs on, by step name (``pick_kernel_threads``)."""
        return {s.name: s.kernel.num_threads for s in self._steps}

    def pick_kernel_threads(self, rounds: int = 3) -> dict[str, int]:
        """Time every kernel on one thread and on ``ANSOR_NUM_THREADS`` (on this module's
        buffers) and keep one thread where that is clearly faster (``module_benchmark.
        pick_threads``): a kernel of a few microseconds loses more to the hand-off to the thread
        pool than it gains. Returns ``kernel_threads``. ``export`` keeps the choice (a kernel
        marked ``one_thread`` in ``module.json``), and so does the exported library (such a
        kernel runs on one thread whatever the context's count)."""
        from measure.target import num_threads  # noqa: PLC0415 - LLVM: the kernels loaded it already

        ctx = self._contexts.take()
        try:
            seen: dict[int, tuple[Any, list[int]]] = {}
            for s, (_, ptrs) in zip(self._steps, ctx.calls):
                seen.setdefault(id(s.kernel), (s.kernel, ptrs))
            n = num_threads()
            pick_threads(list(seen.values()), n, rounds)
        finally:
            self._contexts.give(ctx)
        for s in self._steps:
            s.one_thread = n > 1 and s.kernel.num_threads == 1
        return self.kernel_threads

    def benchmark(self, repeat: int = 5, min_repeat_ms: float = 100, warmup_ms: float = 200) -> dict[str, float]:
        """Median seconds per inference (``mean``), the executor's own dispatch cost per inference
        (``overhead``: the same loop of calls with a native no-op in place of each kernel) and its
        share of ``mean`` (``overhead_share``); ``kernels`` is the number of kernel calls."""
        ctx = self._contexts.take()  # one context, as one thread's runs use
        try:
            return benchmark_table(ctx.table, ctx.calls, repeat, min_repeat_ms, warmup_ms)
        finally:
            self._contexts.give(ctx)

    def profile(self, min_repeat_ms: float = 200, warmup_ms: float = 200,
                statistic: str = "median") -> list[dict[str, Any]]:
        """Each kernel call's time inside the running network (``module_benchmark.profile_table``:
        the module's call chain with the clock read natively between consecutive calls, median
        (or ``statistic="mean"``: mean) over the inferences of one ``min_repeat_ms`` repeat after
        ``warmup_ms`` of warm-up): per
        step in run order, ``name`` (the fused group, or the transform), ``symbol`` (its kernel),
        ``task`` (its tuning task's workload key; "" for a transform, a group that is no task, or
        a module loaded from an export older than the field), ``transform`` and ``seconds``.
        Each kernel finds the caches as the kernels before it left them; the sum is about
        ``benchmark()['mean']`` less the executor's dispatch."""
        ctx = self._contexts.take()  # one context, as ``benchmark`` times
        try:
            secs = profile_table(ctx.table, min_repeat_ms, warmup_ms, statistic)
        finally:
            self._contexts.give(ctx)
        return [{"name": s.name, "symbol": s.kernel.compiled.name, "task": s.task,
                 "transform": s.transform, "seconds": t} for s, t in zip(self._steps, secs)]

    # ---- export / load --------------------------------------------------------------------
    def export(self, path: str | os.PathLike) -> Path:
        """Write the module to directory ``path`` (created); returns it."""
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        kernels: dict[int, int] = {}
        kernel_list = []
        plan = []
        for s in self._steps:
            if id(s.kernel) not in kernels:
                kernels[id(s.kernel)] = len(kernel_list)
                kernel_list.append(s.kernel)
            plan.append({"kernel": kernels[id(s.kernel)], "args": s.args, "name": s.name,
                         "transform": s.transform, "task": s.task})
        for i, k in enumerate(kernel_list):
            c = k.compiled
            (out / f"kernel{i}.ll").write_text(c.llvm_ir)
            (out / f"kernel{i}.o").write_bytes(c.object_code)
        meta = {
            "format": FORMAT, "version": VERSION,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": t.dtype, "buffer": self._input_buffers[n]}
                       for n, t in self.input_types.items()],
            "outputs": [{"name": n, "buffer": b} for n, b in self._outputs],
            "io_dtypes": self.io_dtypes,
            "buffers": [list(sp) for sp in self._specs],
            "kernels": [{"symbol": k.compiled.name, "toolchain": k.compiled.toolchain_key,
                         "one_thread": any(s.one_thread for s in self._steps if s.kernel is k),
                         "args": [{"name": a.name, "shape": list(a.shape), "dtype": a.dtype, "written": a.written}
                                  for a in k.compiled.args]} for k in kernel_list],
            "steps": plan,
            "target": target_entry(self.target_name),
        }
        np.savez(out / "weights.npz", **self._consts)
        (out / "module.json").write_text(json.dumps(meta))
        return out

    def export_library(self, path: str | os.PathLike) -> Path:
        """Write the network as one shared library ``path`` (``DIR/net.so``) with a C ABI, its
        weights, ``net.json``, the standalone loader ``ansor_runtime.py``, ``ansor_net.h`` and
        ``example.c`` beside it (``ansor.graph.export_library``); returns the library's path."""
        from .export_library import export_library  # noqa: PLC0415 - LLVM and a linker, on demand

        return export_library(self, path).library
