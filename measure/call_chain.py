"""A fixed sequence of native calls made by one native function: how a compiled network runs
its kernels in this process.

A network used to run as a Python loop of ctypes calls, one per kernel: argument conversion,
the interpreter loop and a GIL release and re-acquire per kernel, about a microsecond each, paid
between every two kernels (MobileNet-V2 has 60+ of tens of microseconds). ``CallChain`` makes a
run one native call instead: a function generated from the arities of the steps,

    void ansor_chain(ptr table)

which reads, for each step in order, a function address and its argument pointers from
``table`` and calls it. The table is plain memory (``CallTable``), one per run context (each
context has its own buffers), so one chain serves every context of a module, and the chain is
re-entrant (it has no state). ``CallTable.profile`` runs a variant that reads the clock between
steps: each kernel's time inside the running network. Its IR depends only on the list of arities, so chains are cached
per process by that list (a module's chain is compiled once, in a few milliseconds: no
optimisation is needed for straight-line loads and calls).

A call made through ``CallTable.run`` releases the GIL once for the whole run. The table also
serves the native timing harness (``measure.timer.Timer(chain.address, [table.address])``), so a
network is timed with no Python between its kernels.
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence

import llvmlite.binding as llvm
import numpy as np

from . import target

_LOCK = threading.Lock()
_CHAINS: dict[tuple[int, ...], "CallChain"] = {}
_PROTO = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_PROFILED_PROTO = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
CLOCK_MONOTONIC = 1  # Linux <time.h>


def chain_ir(arities: Sequence[int], profiled: bool = False) -> str:
    """IR of ``ansor_chain``: step ``i`` calls ``table[o_i]`` on the ``arities[i]`` pointers that
    follow it (``o_i``: the sum of ``1 + arity`` of the steps before it). ``profiled``: the
    function takes a second pointer, to ``len(arities) + 1`` int64s, and stores CLOCK_MONOTONIC
    nanoseconds there before the first step and after each step."""
    lines = [f'target datalayout = "{target.data_layout()}"', f'target triple = "{target.host_triple()}"', "",
             "declare i32 @clock_gettime(i32, ptr)", "",
             f"define void @ansor_chain(ptr %t{', ptr %ns' if profiled else ''}) {{", "entry:",
             "  %ts = alloca [2 x i64], align 8"]
    slot = 0

    def stamp(k: int) -> None:
        if profiled:
            lines.append(f"  call i32 @clock_gettime(i32 {CLOCK_MONOTONIC}, ptr %ts)")
            lines.append(f"  %s{k} = load i64, ptr %ts, align 8")
            lines.append(f"  %n{k}.p = getelementptr i64, ptr %ts, i64 1")
            lines.append(f"  %n{k} = load i64, ptr %n{k}.p, align 8")
            lines.append(f"  %s{k}.ns = mul i64 %s{k}, 1000000000")
            lines.append(f"  %t{k} = add i64 %s{k}.ns, %n{k}")
            lines.append(f"  %o{k} = getelementptr inbounds i64, ptr %ns, i64 {k}")
            lines.append(f"  store i64 %t{k}, ptr %o{k}, align 8")

    stamp(0)

    def load(name: str) -> None:
        nonlocal slot
        lines.append(f"  %{name}.p = getelementptr inbounds ptr, ptr %t, i64 {slot}")
        lines.append(f"  %{name} = load ptr, ptr %{name}.p, align 8")
        slot += 1

    for i, n in enumerate(arities):
        load(f"f{i}")
        for j in range(n):
            load(f"a{i}.{j}")
        args = ", ".join(f"ptr %a{i}.{j}" for j in range(n))
        lines.append(f"  call void %f{i}({args})")
        stamp(i + 1)
    lines += ["  ret void", "}", ""]
    return "\n".join(lines)


class CallChain:
    """The compiled ``ansor_chain`` for one list of arities (``address``); use ``chain_for``."""

    def __init__(self, arities: tuple[int, ...]):
        self.arities = arities
        self._engines = []  # they own the machine code: kept alive with the chain
        self.address = self._compile(chain_ir(arities))
        self._fn = _PROTO(self.address)
        self._profiled: object | None = None  # compiled on the first ``profile``

    def _compile(self, ir: str) -> int:
        mod = llvm.parse_assembly(ir)
        mod.verify()
        engine = llvm.create_mcjit_compiler(mod, target.new_target_machine())
        engine.finalize_object()
        self._engines.append(engine)
        return int(engine.get_function_address("ansor_chain"))

    def table(self, calls: Sequence[tuple[int, Sequence[int]]]) -> "CallTable":
        """The table of ``calls`` (function address, argument pointers) for this chain."""
        if tuple(len(p) for _, p in calls) != self.arities:
            raise ValueError("the calls do not have the arities this chain was made for")
        return CallTable(self, calls)


class CallTable:
    """One run's function addresses and argument pointers, in the chain's order; ``run()`` makes
    every call, in one native call. The addresses must stay valid while the table is used (the
    caller keeps the kernels and buffers alive)."""

    __slots__ = ("chain", "_slots", "address")

    def __init__(self, chain: CallChain, calls: Sequence[tuple[int, Sequence[int]]]):
        flat: list[int] = []
        for fn, ptrs in calls:
            flat.append(int(fn))
            flat.extend(int(p) for p in ptrs)
        if any(v == 0 for v in flat):
            raise ValueError("a null function address or argument pointer in a call chain")
        self.chain = chain
        self._slots = (ctypes.c_void_p * max(1, len(flat)))(*flat)
        self.address = ctypes.addressof(self._slots)

    def run(self) -> None:
        self.chain._fn(self.address)

    def profile(self, passes: int) -> np.ndarray:
        """Seconds each call took, per pass: a ``(passes, calls)`` array from ``passes`` runs of
        the whole table, back to back, each call timed where it runs (between its neighbours in
        the sequence, with what they left in the caches)."""
        chain = self.chain
        with _LOCK:
            if chain._profiled is None:
                chain._profiled = _PROFILED_PROTO(chain._compile(chain_ir(chain.arities, profiled=True)))
        fn = chain._profiled
        n = len(chain.arities)
        stamps = np.zeros((max(1, int(passes)), n + 1), dtype=np.int64)
        for row in stamps:
            fn(self.address, row.ctypes.data)
        return np.diff(stamps, axis=1).astype(np.float64) * 1e-9


def chain_for(arities: Sequence[int]) -> CallChain:
    """The process's chain for these arities (compiled on first use; thread-safe)."""
    key = tuple(int(n) for n in arities)
    if any(n < 0 for n in key):
        raise ValueError(f"negative arity in {key}")
    with _LOCK:
        chain = _CHAINS.get(key)
        if chain is None:
            chain = _CHAINS[key] = CallChain(key)
        return chain
