"""Compile loop-IR functions to host machine code and call them on numpy arrays.

Compilation and loading are split so measurement can compile in worker processes:
``compile_object`` produces a picklable ``CompiledObject`` (object code plus what is needed to
check arguments; the object code comes from ``measure.compile_cache``), ``load`` links it into
an MCJIT engine in the current process, ``build_func`` does both. A ``Kernel`` checks every
argument (count, type, dtype, shape, contiguity, writeability, overlap) before calling through
ctypes, which releases the GIL for the call.
"""
from __future__ import annotations

import ctypes
import json
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from compute import dtype as dt
from compute import loop_ir as L
from sketch.layout_rewrite import PackedArg

from . import compile_cache, runtime, target
from .codegen import NUM_THREADS_GLOBAL, codegen, kernel_symbol, written_buffers
from .codegen.workspace import WORKSPACE_RELEASE
from .buffers import aligned_copy, aligned_zeros


@dataclass(frozen=True)
class ArgSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    written: bool


@dataclass
class CompiledObject:
    """A compiled kernel, independent of any LLVM object: safe to pickle and ship to a worker."""

    name: str
    object_code: bytes
    llvm_ir: str
    args: tuple[ArgSpec, ...]
    toolchain_key: str
    compile_seconds: float
    timings: dict = field(default_factory=dict)
    # Arguments the kernel takes pre-packed (``sketch.layout_rewrite.PackedArg``): the caller
    # passes ``pack_array(original)`` at those positions. Empty for a plain kernel.
    packed_args: tuple = ()
    # The name of the target it was built for (``measure.targets``).
    target: str = "native"


def compile_object(func: L.PrimFunc) -> CompiledObject:
    """Lower ``func`` to LLVM IR and compile it to object code for the current target
    (``measure.targets.use_target``; default the host) at O3, through the compile cache: a module
    compiled before, by any process, is read back instead."""
    t0 = time.perf_counter()
    ir = codegen(func)
    timings = {"codegen": time.perf_counter() - t0}
    obj = compile_cache.object_code(ir, timings)
    written = written_buffers(func)
    args = tuple(ArgSpec(b.name, b.shape, b.dtype, b.uid in written) for b in func.params)
    return CompiledObject(
        name=kernel_symbol(func.name), object_code=obj, llvm_ir=ir, args=args,
        toolchain_key=target.toolchain_key(), compile_seconds=time.perf_counter() - t0,
        timings=timings, target=target.current_target().name)


def compiled_to_bytes(c: CompiledObject) -> bytes:
    """``c`` as bytes, without pickle (the compile cache keeps whole kernels so):
    a 4-byte header length, a JSON header, the IR text, the object code."""
    ir = c.llvm_ir.encode()
    head = json.dumps({"name": c.name, "toolchain": c.toolchain_key, "target": c.target, "ir": len(ir),
                       "args": [[a.name, list(a.shape), a.dtype, a.written] for a in c.args],
                       "packed": [p.to_json() for p in c.packed_args]}).encode()
    return len(head).to_bytes(4, "little") + head + ir + c.object_code


def _ints(v: Any) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in v):
        raise ValueError(f"not a list of ints: {v!r}")
    return tuple(v)


def compiled_from_bytes(data: bytes) -> CompiledObject:
    """The kernel ``compiled_to_bytes`` wrote; ValueError for anything else, or for another
    toolchain's kernel."""
    try:
        return _compiled_from_bytes(data)
    except (KeyError, TypeError, UnicodeDecodeError) as e:
        raise ValueError(f"not a compiled kernel: {type(e).__name__}: {e}") from None


def _compiled_from_bytes(data: bytes) -> CompiledObject:
    n = int.from_bytes(data[:4], "little")
    head = json.loads(data[4:4 + n])
    if not isinstance(head, dict):
        raise ValueError("bad kernel header")
    built_for = head.get("target", "native")  # kernels from before targets are native
    if not isinstance(built_for, str) or head.get("toolchain") != target.toolchain_key(built_for):
        raise ValueError("not a kernel of this toolchain")
    name, n_ir = head["name"], head["ir"]
    if not isinstance(name, str) or not isinstance(n_ir, int) or not 0 < n_ir < len(data) - 4 - n:
        raise ValueError("bad kernel header")
    args = []
    for a in head["args"]:
        if not (isinstance(a, list) and len(a) == 4 and isinstance(a[0], str) and isinstance(a[2], str)
                and isinstance(a[3], bool)):
            raise ValueError(f"bad argument {a!r}")
        args.append(ArgSpec(a[0], _ints(a[1]), a[2], a[3]))
    packed = []
    for p in head["packed"]:
        if not (isinstance(p, list) and len(p) == 6 and isinstance(p[1], str) and isinstance(p[5], str)):
            raise ValueError(f"bad packed argument {p!r}")
        position, dim, block = _ints([p[0], p[3], p[4]])
        packed.append(PackedArg(position, p[1], _ints(p[2]), dim, block, p[5]))
    ir = data[4 + n:4 + n + n_ir].decode()
    return CompiledObject(name=name, object_code=data[4 + n + n_ir:], llvm_ir=ir, args=tuple(args),
                          toolchain_key=target.toolchain_key(built_for), compile_seconds=0.0,
                          packed_args=tuple(packed), target=built_for)


class Kernel:
    """A loaded kernel. Keeps its execution engine (and so the machine code) alive.

    Any C-contiguous arrays of the right shapes work; the tuner timed the kernel on arrays that
    start on a 64-byte boundary (``measure.buffers.aligned_empty``), and a vectorised kernel can
    run slower on numpy's 16-byte placement."""

    def __init__(self, compiled: CompiledObject):
        built_for = target.get_target(compiled.target)
        if compiled.toolchain_key != target.toolchain_key(built_for):
            raise ValueError(f"kernel {compiled.name} was compiled for toolchain "
                             f"{compiled.toolchain_key}, this process is "
                             f"{target.toolchain_key(built_for)} for {built_for.name}; recompile it here")
        built_for.check_runnable(f"kernel {compiled.name}")  # one line, never an illegal instruction
        runtime.ensure_loaded()
        self.compiled = compiled
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                                  target.new_target_machine(built_for))
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(compiled.object_code))
        self._engine.finalize_object()
        addr = self._engine.get_function_address(compiled.name)
        if not addr:
            raise RuntimeError(f"symbol {compiled.name} not found in the compiled object")
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(compiled.args)))
        self._fn = proto(addr)
        gaddr = self._engine.get_global_value_address(NUM_THREADS_GLOBAL)
        self._nthreads = ctypes.c_int32.from_address(gaddr)
        self._nthreads.value = runtime.num_threads()
        self._optimized_ir: str | None = None
        self._assembly: str | None = None
        self._workspaces: weakref.finalize | None = None
        release = self._engine.get_function_address(WORKSPACE_RELEASE)
        if release:
            # The cached heap workspaces (codegen.workspace) are freed when the kernel goes, while
            # the engine that holds the release function's code is still alive.
            self._workspaces = weakref.finalize(
                self, _release_workspaces, ctypes.CFUNCTYPE(None)(release), self._engine)

    # ---- introspection ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.compiled.name

    @property
    def args(self) -> tuple[ArgSpec, ...]:
        return self.compiled.args

    @property
    def llvm_ir(self) -> str:
        return self.compiled.llvm_ir

    @property
    def packed_args(self) -> tuple:
        """The arguments taken pre-packed (``sketch.layout_rewrite.PackedArg``; see ``ansor.build``)."""
        return self.compiled.packed_args

    def _optimized_module(self) -> llvm.ModuleRef:
        # Recompiled on demand: the pipeline is deterministic, so this is what the object holds.
        with target.use_target(self.compiled.target):
            mod = target.parse(self.compiled.llvm_ir)
            target.optimize(mod)
        return mod

    @property
    def optimized_ir(self) -> str:
        if self._optimized_ir is None:
            self._optimized_ir = str(self._optimized_module())
        return self._optimized_ir

    @property
    def assembly(self) -> str:
        if self._assembly is None:
            self._assembly = target.target_machine(self.compiled.target).emit_assembly(
                self._optimized_module())
        return self._assembly

    @property
    def num_threads(self) -> int:
        return int(self._nthreads.value)

    @num_threads.setter
    def num_threads(self, n: int) -> None:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise ValueError(f"num_threads must be a positive int, got {n!r}")
        self._nthreads.value = int(n)

    @property
    def address(self) -> int:
        """Address of the entry point ``void <name>(ptr, ...)``, for native harnesses that call it
        without Python in the loop (measure.timer)."""
        return int(ctypes.cast(self._fn, ctypes.c_void_p).value or 0)

    # ---- calling ---------------------------------------------------------------------------
    def arg_pointers(self, *arrays: np.ndarray) -> list[int]:
        """Check ``arrays`` exactly as a call would and return their data pointers."""
        return self._check(arrays)

    def _check(self, arrays: tuple) -> list[int]:
        specs = self.compiled.args
        if len(arrays) != len(specs):
            names = ", ".join(s.name for s in specs)
            raise TypeError(f"kernel {self.name} takes {len(specs)} arrays ({names}), got {len(arrays)}")
        ptrs = []
        for i, (a, s) in enumerate(zip(arrays, specs)):
            what = f"kernel {self.name}: argument {i} ({s.name})"
            if not isinstance(a, np.ndarray):
                raise TypeError(f"{what} must be a numpy.ndarray, got {type(a).__name__}")
            if a.dtype != dt.to_numpy(s.dtype):
                raise ValueError(f"{what} must have dtype {s.dtype}, got {a.dtype}")
            if tuple(a.shape) != s.shape:
                raise ValueError(f"{what} must have shape {s.shape}, got {tuple(a.shape)}")
            if not a.flags.c_contiguous:
                raise ValueError(f"{what} must be C-contiguous, got strides {a.strides} "
                                 "(use np.ascontiguousarray)")
            if s.written and not a.flags.writeable:
                raise ValueError(f"{what} is written by the kernel but the array is read-only")
            ptrs.append(a.ctypes.data)
        for i, (a, s) in enumerate(zip(arrays, specs)):
            if not s.written:
                continue
            for j, b in enumerate(arrays):
                if j != i and np.shares_memory(a, b):
                    raise ValueError(f"kernel {self.name}: argument {i} ({s.name}) is written by the "
                                     f"kernel and overlaps argument {j} ({specs[j].name}) in memory")
        return ptrs

    def __call__(self, *arrays: np.ndarray) -> None:
        ptrs = self._check(arrays)
        self._fn(*ptrs)

    def random_args(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs filled with random values and written buffers zeroed (for benchmarking), each on a
        64-byte boundary (``measure.buffers``)."""
        rng = np.random.default_rng(seed)
        out = []
        for s in self.compiled.args:
            if s.written:
                out.append(aligned_zeros(s.shape, s.dtype))
            elif dt.is_float(s.dtype):
                out.append(aligned_copy(rng.uniform(-1, 1, s.shape).astype(s.dtype)))
            elif s.dtype == "bool":
                out.append(aligned_copy(rng.integers(0, 2, s.shape).astype(bool)))
            else:
                # Small values: random data used as indices or divisors stays harmless.
                out.append(aligned_copy(rng.integers(0, 4, s.shape).astype(s.dtype)))
        return out

    def benchmark(self, *arrays: np.ndarray, number: int | None = None, repeat: int = 5,
                  min_repeat_ms: float = 50, warmup_ms: float = 300) -> float:
        """Median seconds per call over ``repeat`` repeats of ``number`` calls each; ``number``
        defaults to enough calls for one repeat to take at least ``min_repeat_ms``.

        The kernel first runs for ``warmup_ms``: besides page faults and thread-pool start, an
        idle vCPU on a virtual machine can run ~2.5x slower for the first ~250 ms of work.
        Timed by ``measure.timer.time_calls`` through this ctypes call (what a Python caller pays).
        """
        from . import timer  # noqa: PLC0415 - the timing loop is only needed here

        args = list(arrays) if arrays else self.random_args()
        ptrs = self._check(tuple(args))
        fn = self._fn
        # A given ``number`` is kept as is (no minimum repeat length); else it is calibrated.
        timing = timer.time_calls(timer.python_calls(lambda: fn(*ptrs)), repeat=repeat,
                                  number=1 if number is None else number,
                                  min_repeat_ms=min_repeat_ms if number is None else 0.0,
                                  warmup_s=warmup_ms / 1e3)
        return timing.median


def _release_workspaces(release: Any, engine: Any) -> None:
    release()
    del engine  # held until now: the code of ``release`` lives in it


def load(compiled: CompiledObject) -> Kernel:
    return Kernel(compiled)


def build_func(func: L.PrimFunc) -> Kernel:
    """Compile and load ``func``."""
    return load(compile_object(func))
