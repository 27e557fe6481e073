"""Vectorisation of a ``vectorized`` loop: whether running every statement for all lanes at once
keeps the sequential semantics, and the straight-line SIMD body (in chunks of at most
MAX_VECTOR_LANES lanes) when it does."""
from __future__ import annotations

from compute import expr as E
from compute import loop_ir as L

from .emitter import Emitter
from .values import _VecCtx

MAX_VECTOR_LANES = 64


class Vectorizer(Emitter):
    """Vector emission of a loop body over the lane variable."""

    def _can_vectorize(self, loop: L.For) -> bool:
        """Whether running each statement for all lanes at once preserves sequential semantics."""
        v = loop.var
        saved = self.vec
        self.vec = _VecCtx(v, loop.extent, v, whole=loop.extent <= MAX_VECTOR_LANES)  # for _lin
        self._varies_memo = {}
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
                    flat = [self._lin(i) for i in st.indices]
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
            self.vec = saved
            self._varies_memo = {}

    def _vectorize(self, loop: L.For) -> None:
        n = loop.extent
        chunk = n if n <= MAX_VECTOR_LANES else MAX_VECTOR_LANES
        full, rem = divmod(n, chunk)
        base_var = E.var(loop.var.name + "_lane0", loop.var.dtype)
        if full == 1:
            self._vector_body(loop, base_var, "0", chunk, whole=rem == 0)
        elif full > 1:
            k = E.var(loop.var.name + "_chunk", loop.var.dtype)

            def body() -> None:
                base = self.ins(f"mul nuw nsw i64 {self.env[id(k)][1]}, {chunk}")
                self._vector_body(loop, base_var, base, chunk, whole=False)

            self.counted_loop(k, "0", str(full), body, None)
        if rem:
            self._vector_body(loop, base_var, str(full * chunk), rem, whole=False)

    def _vector_body(self, loop: L.For, base_var: E.Var, base: str, lanes: int, whole: bool) -> None:
        self.env[id(base_var)] = (base_var, base)
        self.vec = _VecCtx(loop.var, lanes, base_var, whole)
        self._varies_memo = {}
        self.memo = {}
        try:
            self.stmt(loop.body)
        finally:
            self.vec = None
            self._varies_memo = {}
            self.memo = {}
            del self.env[id(base_var)]
