"""Parallel loops: the body outlined into an internal function of buffer pointers, loop
variables and ``[begin, end)``, a trampoline ``(closure, begin, end)`` that unpacks the closure
and calls it, and the call of the thread pool's ``ansor_parallel_for`` (``measure.thread_pool``)
in the caller, which runs the trampoline on chunks of the range in its threads.

The outlined body is a new function with its own emitters: the outliner is handed a factory
(``NewBody``) that wires them around a new ``Emitter``, so it depends on no statement emitter."""
from __future__ import annotations

from typing import Callable, Protocol

from compute import expr as E
from compute import loop_ir as L

from ..thread_pool import ENTRY as POOL_ENTRY
from .emitter import Emitter
from .names import NUM_THREADS_GLOBAL, sanitize


class Body(Protocol):
    """What the outliner needs of the statement emitter of the outlined function."""

    def loop(self, var: E.Var, start: str, end: str, body: L.Stmt) -> None:
        """``for var in [start, end): body`` (a counted serial loop)."""


NewBody = Callable[[Emitter], Body]  # the statement emitter of a new function, wired to it


class ParallelOutliner:
    """Outlining of a ``parallel`` loop of ``fn``."""

    def __init__(self, fn: Emitter, new_body: NewBody):
        self.fn = fn
        self.new_body = new_body

    def outline(self, loop: L.For) -> None:
        """``loop`` as an internal function run by the thread pool's threads on chunks of its range."""
        fn = self.fn
        if fn.in_parallel:
            raise ValueError(f"nested parallel loop `{loop.var.name}`: a parallel loop may not contain "
                             "another parallel loop")
        mod = fn.mod
        k = mod.next_parallel_id()
        body_sym = f"@{sanitize(mod.name)}.par{k}"
        tramp_sym = f"@{sanitize(mod.name)}.par{k}.tramp"
        bufs = list(fn.buffers.values())
        vars_ = list(fn.env.values())
        mod.declare(POOL_ENTRY, f"declare void @{POOL_ENTRY}(ptr, ptr, i64, i32) nounwind")

        # The body: noalias pointers (distinct allocations), so the inliner turns them into
        # scoped alias metadata and the loop inside keeps its alias information.
        child = Emitter(mod, in_parallel=True)
        params = []
        for b, _ in bufs:
            ref = f"%b{b.uid}"
            params.append(f"ptr noalias nocapture {ref}")
            child.buffers[b.uid] = (b, ref)
        for v, _ in vars_:
            ref = f"%v{v.uid}"
            params.append(f"i64 {ref}")
            child.env[id(v)] = (v, ref)
        params += ["i64 %begin", "i64 %end"]
        self.new_body(child).loop(loop.var, "%begin", "%end", loop.body)
        mod.functions.append(child.finish(
            f"define internal void {body_sym}({', '.join(params)}) {mod.attr_group} {{"))

        nslots = max(len(bufs) + len(vars_), 1)
        t = []
        args = []
        for i, (b, _) in enumerate(bufs):
            t.append(f"  %s{i} = getelementptr inbounds [{nslots} x i64], ptr %clo, i64 0, i64 {i}")
            t.append(f"  %p{i} = load ptr, ptr %s{i}, align 8")
            args.append(f"ptr %p{i}")
        for j, _ in enumerate(vars_):
            i = len(bufs) + j
            t.append(f"  %s{i} = getelementptr inbounds [{nslots} x i64], ptr %clo, i64 0, i64 {i}")
            t.append(f"  %p{i} = load i64, ptr %s{i}, align 8")
            args.append(f"i64 %p{i}")
        t += [f"  call void {body_sym}({', '.join(args + ['i64 %begin', 'i64 %end'])})",
              "  ret void",
              "}", ""]
        mod.functions.append(f"define internal void {tramp_sym}(ptr %clo, i64 %begin, i64 %end) {mod.attr_group} {{\n"
                             "entry:\n" + "\n".join(t))

        clo = f"%clo{k}"
        fn.entry.append(f"  {clo} = alloca [{nslots} x i64], align 8")
        for i, (b, ref) in enumerate(bufs):
            slot = fn.ins(f"getelementptr inbounds [{nslots} x i64], ptr {clo}, i64 0, i64 {i}")
            fn.do(f"store ptr {ref}, ptr {slot}, align 8")
        for j, (v, ref) in enumerate(vars_):
            slot = fn.ins(f"getelementptr inbounds [{nslots} x i64], ptr {clo}, i64 0, i64 {len(bufs) + j}")
            fn.do(f"store i64 {ref}, ptr {slot}, align 8")
        nt = fn.ins(f"load i32, ptr @{NUM_THREADS_GLOBAL}, align 4")
        fn.do(f"call void @{POOL_ENTRY}(ptr {tramp_sym}, ptr {clo}, i64 {loop.extent}, i32 {nt})")
