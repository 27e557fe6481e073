"""Counted loops: ``for var in [start, end)`` as a bottom-tested block with an i64 phi. The one
loop shape every emitter uses (serial and unrolled loops, vector chunks, scalar fallbacks, the
outlined body of a parallel loop)."""
from __future__ import annotations

from typing import Callable

from compute import expr as E

from .emitter import Emitter
from .expr import Expressions
from .names import _hint


class CountedLoops:
    """Counted loops in ``fn``; the values ``exprs`` emitted before a loop are forgotten inside
    it and after it (the body's blocks do not dominate the exit, and a value of the previous
    iteration is not this one's)."""

    def __init__(self, fn: Emitter, exprs: Expressions):
        self.fn = fn
        self.exprs = exprs

    def counted(self, var: E.Var, start: str, end: str, body: Callable[[], None],
                md: str | None) -> None:
        """``for var in [start, end)`` around what ``body`` emits, with loop metadata ``md``;
        the caller guarantees ``start < end`` (bottom-tested)."""
        fn = self.fn
        pre = fn.cur
        hdr = fn.label(f"for_{_hint(var.name)}_")
        ext = fn.label("endfor")
        fn.br(hdr)
        fn.block(hdr)
        iv = fn.fresh(_hint(var.name) + "_")
        slot = len(fn.lines)
        fn.lines.append(None)  # the phi, filled once the latch is known
        if fn.vec is not None:
            raise AssertionError("loops inside vector emission")
        prev = fn.env.get(id(var))
        fn.env[id(var)] = (var, iv)
        self.exprs.forget()
        body()
        self.exprs.forget()
        if prev is None:
            del fn.env[id(var)]
        else:
            fn.env[id(var)] = prev
        nxt = fn.ins(f"add nuw nsw i64 {iv}, 1")
        c = fn.ins(f"icmp slt i64 {nxt}, {end}")
        tail = f", !llvm.loop {md}" if md else ""
        fn.do(f"br i1 {c}, label %{hdr}, label %{ext}{tail}")
        fn.lines[slot] = f"  {iv} = phi i64 [ {start}, %{pre} ], [ {nxt}, %{fn.cur} ]"
        fn.block(ext)
