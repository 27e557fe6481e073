"""Interval arithmetic over index expressions, for bound inference in lowering.

When a producer is computed inside a loop of its consumer, it must produce exactly the region the
consumer reads in one iteration of that loop. That region is the image of the consumer's index
expressions when the loops outside the attach point are *fixed* (they stay symbolic) and the loops
inside it *range* over their extents. This module answers two questions about such expressions:

- ``sym_bounds``: a symbolic lower and upper bound, in terms of the fixed variables (exact for the
  affine indices tiling produces);
- ``const_upper``: a constant upper bound of an expression over numeric variable ranges, after
  cancelling equal terms, used to size buffers statically (``hi - lo`` must cancel the fixed parts).

Bounds only ever widen: an over-estimate costs recomputation, never correctness, because the
lowering guards every region against the producer's domain.
"""
from __future__ import annotations

import math

from compute import expr as E

Range = tuple[int, int]  # inclusive


def _const_int(e: E.Expr) -> int | None:
    return e.value if isinstance(e, E.Const) and not isinstance(e.value, float) else None  # type: ignore[return-value]


def depends_on(e: E.Expr, var_ids: set[int]) -> bool:
    return any(isinstance(n, E.Var) and id(n) in var_ids for n in E.post_order(e))


def num_bounds(e: E.Expr, ranges: dict[int, Range]) -> Range:
    """Numeric [min, max] of an integer expression; every variable must have a range."""
    c = _const_int(e)
    if c is not None:
        return (int(c), int(c))
    if isinstance(e, E.Var):
        r = ranges.get(id(e))
        if r is None:
            raise KeyError(f"no range for variable {e.name}")
        return r
    if isinstance(e, E.Binary):
        a = num_bounds(e.a, ranges)
        b = num_bounds(e.b, ranges)
        op = e.op
        if op == "add":
            return (a[0] + b[0], a[1] + b[1])
        if op == "sub":
            return (a[0] - b[1], a[1] - b[0])
        if op == "mul":
            p = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
            return (min(p), max(p))
        if op == "min":
            return (min(a[0], b[0]), min(a[1], b[1]))
        if op == "max":
            return (max(a[0], b[0]), max(a[1], b[1]))
        if op in ("floordiv", "floormod") and b[0] == b[1] and b[0] > 0:
            k = b[0]
            if op == "floordiv":
                return (a[0] // k, a[1] // k)
            if a[0] // k == a[1] // k:  # the whole range sits in one period
                return (a[0] % k, a[1] % k)
            return (0, k - 1)
    if isinstance(e, E.Unary) and e.op == "neg":
        a = num_bounds(e.a, ranges)
        return (-a[1], -a[0])
    if isinstance(e, E.Select):
        t = num_bounds(e.true_value, ranges)
        f = num_bounds(e.false_value, ranges)
        return (min(t[0], f[0]), max(t[1], f[1]))
    if isinstance(e, E.Cast):
        return num_bounds(e.value, ranges)
    raise ValueError(f"cannot bound index expression `{e}`")


def sym_bounds(e: E.Expr, ranging: dict[int, Range], fixed: dict[int, Range]) -> tuple[E.Expr, E.Expr]:
    """Symbolic (lo, hi) of ``e`` with ``ranging`` variables over their ranges, others fixed.

    ``fixed`` gives the numeric ranges of the fixed variables, used only when a sub-expression
    is not monotone in a simple way and must fall back to numbers.
    """
    if not depends_on(e, set(ranging)):
        return (e, e)
    c = _const_int(e)
    if c is not None:
        return (e, e)
    if isinstance(e, E.Var):
        lo, hi = ranging[id(e)]
        return (E.const(lo, e.dtype), E.const(hi, e.dtype))
    if isinstance(e, E.Binary):
        op = e.op
        if op in ("add", "sub", "min", "max"):
            al, ah = sym_bounds(e.a, ranging, fixed)
            bl, bh = sym_bounds(e.b, ranging, fixed)
            if op == "add":
                return (al + bl, ah + bh)
            if op == "sub":
                return (al - bh, ah - bl)
            fn = E.binary
            return (fn(op, al, bl), fn(op, ah, bh))
        if op == "mul":
            k = _const_int(e.b)
            x = e.a
            if k is None:
                k, x = _const_int(e.a), e.b
            if k is not None:
                xl, xh = sym_bounds(x, ranging, fixed)
                return (xl * k, xh * k) if k >= 0 else (xh * k, xl * k)
        if op == "floordiv":
            k = _const_int(e.b)
            if k is not None and k > 0:
                xl, xh = sym_bounds(e.a, ranging, fixed)
                return (E.binary("floordiv", xl, k), E.binary("floordiv", xh, k))
    if isinstance(e, E.Unary) and e.op == "neg":
        al, ah = sym_bounds(e.a, ranging, fixed)
        return (-ah, -al)
    # Not monotone in a way we track: bound numerically over everything.
    lo, hi = num_bounds(e, {**fixed, **ranging})
    return (E.const(lo, e.dtype), E.const(hi, e.dtype))


# ---- constant bound of a difference ------------------------------------------------------------

def _linear(e: E.Expr, coef: int, acc: dict[int, list], const: list[int]) -> None:
    """Accumulate ``coef * e`` as sum(coef_i * atom_i) + const. Atoms are interned sub-terms."""
    c = _const_int(e)
    if c is not None:
        const[0] += coef * c
        return
    if isinstance(e, E.Binary):
        if e.op == "add":
            _linear(e.a, coef, acc, const)
            _linear(e.b, coef, acc, const)
            return
        if e.op == "sub":
            _linear(e.a, coef, acc, const)
            _linear(e.b, -coef, acc, const)
            return
        if e.op == "mul":
            k = _const_int(e.b)
            if k is not None:
                _linear(e.a, coef * k, acc, const)
                return
            k = _const_int(e.a)
            if k is not None:
                _linear(e.b, coef * k, acc, const)
                return
    if isinstance(e, E.Unary) and e.op == "neg":
        _linear(e.a, -coef, acc, const)
        return
    if isinstance(e, E.Cast) and e.dtype in ("int32", "int64") and e.value.dtype in ("int32", "int64"):
        _linear(e.value, coef, acc, const)
        return
    slot = acc.setdefault(id(e), [e, 0])
    slot[1] += coef


def linear_form(e: E.Expr) -> tuple[dict[int, list], int]:
    acc: dict[int, list] = {}
    const = [0]
    _linear(e, 1, acc, const)
    return {k: v for k, v in acc.items() if v[1] != 0}, const[0]


def const_upper(e: E.Expr, ranges: dict[int, Range]) -> int:
    """A constant upper bound of ``e`` over ``ranges``, cancelling identical terms first.

    Pairs ``floordiv(X + d, k) - floordiv(X, k)`` (which tiling produces when a fused loop is split)
    are bounded by ``(d + k - g) // k`` instead of by the full ranges of X, where g divides both k
    and X (the gcd of k and X's coefficients): at most ``d // k + 1``, and exactly ``d // k`` when
    X is a multiple of k (a packed block read from a tile that starts at a block boundary).
    """
    terms, const = linear_form(e)
    hi = const
    pos = {k: v for k, v in terms.items() if v[1] > 0}
    neg = {k: v for k, v in terms.items() if v[1] < 0}
    for kp, (tp, cp) in list(pos.items()):
        if not (isinstance(tp, E.Binary) and tp.op == "floordiv" and _const_int(tp.b)):
            continue
        k = _const_int(tp.b)
        for kn, (tn, cn) in list(neg.items()):
            if kn not in neg or cn != -cp:
                continue
            if isinstance(tn, E.Binary) and tn.op == "floordiv" and _const_int(tn.b) == k:
                dterms, d = linear_form(tp.a - tn.a)
                if not dterms and d >= 0:
                    xterms, x0 = linear_form(tn.a)
                    g = math.gcd(k, x0, *(c for _, c in xterms.values()))  # type: ignore[arg-type]
                    hi += cp * ((d + k - g) // k)  # type: ignore[operator]
                    del pos[kp]
                    del neg[kn]
                    break
    for t, c in list(pos.values()) + list(neg.values()):
        lo_t, hi_t = num_bounds(t, ranges)
        hi += c * hi_t if c > 0 else c * lo_t
    return hi


def simplify(e: E.Expr) -> E.Expr:
    """Cancel and collect the linear part of an integer index expression.

    ``i.0*8 + i.1 - i.0*8`` becomes ``i.1``. Non-linear atoms (floordiv, floormod, ...) are kept
    as they are; terms keep the order of their first appearance so output stays readable.
    """
    if e.dtype not in ("int32", "int64") or isinstance(e, (E.Const, E.Var)):
        return e
    terms, const = linear_form(e)
    out: E.Expr | None = None
    for atom, coef in terms.values():
        t = atom if coef == 1 else atom * coef
        if out is None:
            out = t if coef != -1 else -atom
        elif coef < 0:
            out = out - (atom if coef == -1 else atom * -coef)
        else:
            out = out + t
    if out is None:
        return E.const(const, e.dtype)
    if const > 0:
        out = out + const
    elif const < 0:
        out = out - (-const)
    return out
