"""Vectorisation of a ``vectorized`` loop: whether running every statement for all lanes at once
keeps the sequential semantics, and the straight-line SIMD body (in chunks of at most
MAX_VECTOR_LANES lanes) when it does.

The body's statements are emitted by the statement emitter, which calls ``vectorize`` and hands
over its own ``stmt`` (no cycle between the two objects)."""
from __future__ import annotations

from typing import Callable

from compute import expr as E
from compute import loop_ir as L

from .affine import IndexAnalysis
from .emitter import Emitter
from .expr import Expressions
from .loops import CountedLoops
from .values import _VecCtx

MAX_VECTOR_LANES = 64


class Vectorizer:
    """Vector emission of a loop body over the lane variable, in ``fn``."""

    def __init__(self, fn: Emitter, index: IndexAnalysis, exprs: Expressions, loops: CountedLoops):
        self.fn = fn
        self.index = index
        self.exprs = exprs
        self.loops = loops

    def can_vectorize(self, loop: L.For) -> bool:
        """Whether running each statement for all lanes at once preserves sequential semantics."""
        fn = self.fn
        v = loop.var
        saved = fn.vec
        fn.vec = _VecCtx(v, loop.extent, v, whole=loop.extent <= MAX_VECTOR_LANES)  # for lin
        self.index.forget_lanes()
        try:
            stores: dict[int, set[tuple[int, ...]]] = {}
            accesses: list[tuple[L.Buffer, tuple[E.Expr, ...]]] = []
            exprs: list[E.Expr] = []
            for st in L.walk(loop.body):
                if isinstance(st, (L.For, L.Allocate)):
                    return False
                if isinstance(st, L.IfThenElse):
                    exprs.append(st.cond)
                elif isinstance(st, L.Store):
                    flat = [self.index.lin(i) for i in st.indices]
                    if any(c is None for c in flat):
                        return False
                    if sum(c * s for c, s in zip(flat, st.buffer.strides)) == 0:  # type: ignore[misc]
                        return False  # every lane writes the same element: a reduction
                    stores.setdefault(st.buffer.uid, set()).add(tuple(map(id, st.indices)))
                    exprs.append(st.value)
                    exprs.extend(st.indices)
            for e in exprs:
                for n in E.post_order(e):
                    if isinstance(n, L.BufferLoad):
                        accesses.append((n.buffer, n.indices))
            for uid, tuples in stores.items():
                if len(tuples) != 1:
                    return False
                (only,) = tuples
                for b, idx in accesses:
                    if b.uid == uid and tuple(map(id, idx)) != only:
                        return False
            return True
        finally:
            fn.vec = saved
            self.index.forget_lanes()

    def vectorize(self, loop: L.For, stmt: Callable[[L.Stmt], None]) -> None:
        """``loop`` (which ``can_vectorize``) as SIMD code, its body's statements emitted by
        ``stmt`` under the vector context."""
        n = loop.extent
        chunk = n if n <= MAX_VECTOR_LANES else MAX_VECTOR_LANES
        full, rem = divmod(n, chunk)
        base_var = E.var(loop.var.name + "_lane0", loop.var.dtype)
        if full == 1:
            self._vector_body(loop, stmt, base_var, "0", chunk, whole=rem == 0)
        elif full > 1:
            k = E.var(loop.var.name + "_chunk", loop.var.dtype)

            def body() -> None:
                base = self.fn.ins(f"mul nuw nsw i64 {self.fn.env[id(k)][1]}, {chunk}")
                self._vector_body(loop, stmt, base_var, base, chunk, whole=False)

            self.loops.counted(k, "0", str(full), body, None)
        if rem:
            self._vector_body(loop, stmt, base_var, str(full * chunk), rem, whole=False)

    def _vector_body(self, loop: L.For, stmt: Callable[[L.Stmt], None], base_var: E.Var, base: str,
                     lanes: int, whole: bool) -> None:
        fn = self.fn
        fn.env[id(base_var)] = (base_var, base)
        fn.vec = _VecCtx(loop.var, lanes, base_var, whole)
        self.index.forget_lanes()
        self.exprs.forget()
        try:
            stmt(loop.body)
        finally:
            fn.vec = None
            self.index.forget_lanes()
            self.exprs.forget()
            del fn.env[id(base_var)]
