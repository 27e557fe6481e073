"""Index analysis: which expressions are loads, lane-dependent or pure index arithmetic, and the
coefficient of the lane variable in an index (what picks vector load, splat or gather).

Each analysis is a fold (``_fold``): iterative, so expressions of any depth are fine. The
analyses read the emitter's vector context (which loop variable is the lane) and nothing else.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from compute import expr as E
from compute import loop_ir as L

from .emitter import Emitter
from .values import _INDEX_DTYPES


class IndexAnalysis:
    """Analyses of expressions in the current (vector) context of ``fn``, memoised per function."""

    def __init__(self, fn: Emitter):
        self.fn = fn
        self._varies_memo: dict[int, tuple[E.Expr, bool]] = {}
        self._load_memo: dict[int, tuple[E.Expr, bool]] = {}
        self._index_memo: dict[int, tuple[E.Expr, bool]] = {}

    def forget_lanes(self) -> None:
        """Drop what depended on the lane variable: called whenever the vector context changes."""
        self._varies_memo = {}

    def contains_load(self, e: E.Expr) -> bool:
        return _fold(self._load_memo, e, _children,
                     lambda n, ks: isinstance(n, L.BufferLoad) or any(ks))

    def varies(self, e: E.Expr) -> bool:
        """Whether ``e`` depends on the current lane variable."""
        if self.fn.vec is None:
            return False
        var = self.fn.vec.var
        return _fold(self._varies_memo, e, _children, lambda n, ks: n is var or any(ks))

    def is_index(self, e: E.Expr) -> bool:
        """Integer arithmetic over loop variables and constants only (safe to widen to i64)."""
        def operands(n: E.Expr) -> tuple:
            if n.dtype not in _INDEX_DTYPES:
                return ()
            if isinstance(n, E.Binary):
                return (n.a, n.b)
            return (n.value,) if isinstance(n, E.Cast) else ()

        def node(n: E.Expr, ks: list) -> bool:
            if n.dtype not in _INDEX_DTYPES:
                return False
            if isinstance(n, (E.Var, E.Const)):
                return True
            return isinstance(n, (E.Binary, E.Cast)) and all(ks)

        return _fold(self._index_memo, e, operands, node)

    def lin(self, e: E.Expr) -> int | None:
        """Coefficient of the lane variable in ``e`` if ``e`` is affine in it, else None."""
        assert self.fn.vec is not None
        var = self.fn.vec.var

        def operands(n: E.Expr) -> tuple:
            if n is var or not self.varies(n):
                return ()
            if isinstance(n, E.Binary):
                if n.op in ("add", "sub"):
                    return (n.a, n.b)
                if n.op == "mul" and isinstance(n.b, E.Const):
                    return (n.a,)
                if n.op == "mul" and isinstance(n.a, E.Const):
                    return (n.b,)
                if n.op in ("min", "max"):
                    return (n.a, n.b)
                return ()
            if isinstance(n, E.Cast) and n.dtype in _INDEX_DTYPES and n.value.dtype in _INDEX_DTYPES:
                return (n.value,)
            return ()

        def node(n: E.Expr, ks: list) -> int | None:
            if not self.varies(n):
                return 0
            if n is var:
                return 1
            if isinstance(n, E.Binary):
                if n.op in ("add", "sub"):
                    a, b = ks
                    if a is None or b is None:
                        return None
                    return a + b if n.op == "add" else a - b
                if n.op == "mul" and (isinstance(n.a, E.Const) or isinstance(n.b, E.Const)):
                    c = int(n.b.value) if isinstance(n.b, E.Const) else int(n.a.value)  # type: ignore[attr-defined]
                    return None if ks[0] is None else ks[0] * c
                if n.op in ("floordiv", "floormod"):
                    return self._lin_floor(n)
                if n.op in ("min", "max") and ks == [0, 0]:
                    return 0  # a clamped block index (a "pad" tail): still one value per vector
                return None
            if isinstance(n, E.Cast) and n.dtype in _INDEX_DTYPES and n.value.dtype in _INDEX_DTYPES:
                return ks[0]
            return None

        return _fold({}, e, operands, node)

    def _affine(self, e: E.Expr) -> tuple[dict[int, int], int, int] | None:
        """``e`` as sum(coeff * var) + const + opaque, where opaque (lane-invariant terms that are
        not affine, such as ``fused % 2 * 128``) is known only to be a multiple of the third
        value (0: no such term). Tiles of a fused loop index like that, and the multiple is what
        lets ``_lin_floor`` still see a division that the lanes never cross."""
        def operands(n: E.Expr) -> tuple:
            if isinstance(n, E.Cast) and n.dtype in _INDEX_DTYPES and n.value.dtype in _INDEX_DTYPES:
                return (n.value,)
            if isinstance(n, E.Binary) and n.op in ("add", "sub"):
                return (n.a, n.b)
            if isinstance(n, E.Binary) and n.op == "mul":
                if isinstance(n.a, E.Const):
                    return (n.b,)
                if isinstance(n.b, E.Const):
                    return (n.a,)
            return ()

        def node(n: E.Expr, ks: list) -> tuple[dict[int, int], int, int] | None:
            if isinstance(n, E.Const):
                return {}, int(n.value), 0
            if isinstance(n, E.Var):
                return {id(n): 1}, 0, 0
            if isinstance(n, E.Cast) and n.dtype in _INDEX_DTYPES and n.value.dtype in _INDEX_DTYPES:
                return ks[0]
            if isinstance(n, E.Binary) and n.op in ("add", "sub"):
                a, b = ks
                if a is None or b is None:
                    return None
                sign = 1 if n.op == "add" else -1
                coeffs = dict(a[0])
                for k, c in b[0].items():
                    coeffs[k] = coeffs.get(k, 0) + sign * c
                return coeffs, a[1] + sign * b[1], math.gcd(a[2], b[2])
            if isinstance(n, E.Binary) and n.op == "mul" and (isinstance(n.a, E.Const) or isinstance(n.b, E.Const)):
                c = int(n.a.value) if isinstance(n.a, E.Const) else int(n.b.value)  # type: ignore[union-attr]
                r = ks[0]
                if r is None:
                    return None
                return {k: v * c for k, v in r[0].items()}, r[1] * c, abs(r[2] * c)
            if not self.varies(n):
                return {}, 0, 1
            return None

        return _fold({}, e, operands, node)

    def _lin_floor(self, e: E.Binary) -> int | None:
        """``(c*v + rest) // d`` and ``% d`` where the lanes never cross a multiple of ``d``:
        ``rest`` is always a multiple of ``g = gcd(d, its coefficients)``, so if the lanes span
        less than ``g`` the quotient is lane-invariant and the remainder advances by ``c``. This is
        the index pattern of a fused-then-split vectorized axis (``floormod(f*16 + v, 64)``)."""
        vec = self.fn.vec
        assert vec is not None
        d = e.b
        if not (isinstance(d, E.Const) and int(d.value) > 0 and vec.whole):
            return None
        aff = self._affine(e.a)
        if aff is None:
            return None
        coeffs, const, opaque = aff
        cv = coeffs.get(id(vec.var), 0)
        if cv < 0:
            return None
        g = math.gcd(int(d.value), opaque)
        for k, c in coeffs.items():
            if k != id(vec.var):
                g = math.gcd(g, c)
        g = math.gcd(g, const)
        if cv * (vec.lanes - 1) >= g:
            return None
        return 0 if e.op == "floordiv" else cv


def _children(e: E.Expr) -> tuple[E.Expr, ...]:
    return e.children()


def _fold(memo: dict[int, tuple[E.Expr, Any]], e: E.Expr,
          operands: Callable[[E.Expr], Sequence[E.Expr]], fn: Callable[[E.Expr, list], Any]) -> Any:
    """``fn(node, values of operands(node))`` bottom-up from an explicit stack, memoised in ``memo``
    as id -> (node, value) (the node is kept so that a reused id of a dead node never hits)."""
    stack = [e]
    while stack:
        n = stack[-1]
        hit = memo.get(id(n))
        if hit is not None and hit[0] is n:
            stack.pop()
            continue
        ops = operands(n)
        pending = []
        for c in ops:
            h = memo.get(id(c))
            if h is None or h[0] is not c:
                pending.append(c)
        if pending:
            stack.extend(reversed(pending))
            continue
        stack.pop()
        memo[id(n)] = (n, fn(n, [memo[id(c)][1] for c in ops]))
    return memo[id(e)][1]
