"""The tensor-expression language's constructors: every expression is built here (``const``,
``var``, ``binary``, ``compare``, ``call``, ``select``, ``cast``, ``reduce``, ...), with the dtype
rules and the constant folding and simplifications applied as a node is made.

The node classes live in ``expr_nodes.py`` and are re-exported here, so ``compute.expr`` is the
one module users import (``E.Binary``, ``E.const``). Importing this module also gives the nodes
their Python operators (``a + b``, ``a < b``) through ``expr_nodes.BUILD``.
"""
from __future__ import annotations

import math
from typing import Iterable

from . import dtype as dt
from .expr_nodes import (BUILD, _UID, Binary, Call, Cast, Compare, Const, Expr, IterVar,  # noqa: F401 - re-exported
                         Reduce, Select, TensorLoad, Unary, Var)
from .expr_walk import fold, post_order, rewrite  # noqa: F401 - re-exported: E.fold, E.rewrite, E.post_order
from .int_arith import _fold_int, _wrap_int, int_range  # noqa: F401 - int_range re-exported as E.int_range


# ---- constructors ---------------------------------------------------------------------------

ARITH_OPS = frozenset({"add", "sub", "mul", "div", "floordiv", "floormod", "min", "max"})
LOGIC_OPS = frozenset({"and", "or"})
CMP_OPS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
MATH_FUNCS = {  # name -> number of arguments
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1, "pow": 2,
    "abs": 1, "floor": 1, "ceil": 1, "trunc": 1, "round": 1,
}
FLOAT_ONLY_FUNCS = frozenset(MATH_FUNCS) - {"abs"}
_OP_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%"}


def const(value: int | float | bool, dtype: str | None = None) -> Const:
    """A constant. Without ``dtype``: bool -> bool, int -> int32, float -> float32."""
    if isinstance(value, Const):
        return value if dtype is None else cast(value, dtype)  # type: ignore[return-value]
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant from {value!r} of type {type(value).__name__}")
    dtype = dt.canonical(dtype)
    if dt.is_float(dtype):
        v: int | float | bool = float(value)
    elif dt.is_bool(dtype):
        v = bool(value)
    else:
        if isinstance(value, float) and not value.is_integer():
            raise TypeError(f"constant {value!r} is not an integer but dtype {dtype} was asked for")
        v = int(value)
        lo, hi = int_range(dtype)
        if not lo <= v <= hi:
            raise ValueError(f"constant {v} does not fit in {dtype} (range {lo}..{hi}); "
                             f"use te.cast({v}, {dtype!r}) to wrap it explicitly")
    return Const._make(dtype, v)  # type: ignore[return-value]


def var(name: str, dtype: str = dt.INDEX_DTYPE) -> Var:
    return Var._make(dt.canonical(dtype), name, next(_UID))  # type: ignore[return-value]


def iter_var(name: str, lo: int, extent: int, kind: str) -> IterVar:
    return IterVar._make(dt.INDEX_DTYPE, name, next(_UID), lo, extent, kind)  # type: ignore[return-value]


def as_expr(x: object, like: str | None = None) -> Expr:
    """Convert a Python scalar to a constant, adopting the dtype ``like`` of the other operand."""
    if isinstance(x, Expr):
        return x
    if hasattr(x, "as_expr"):  # a single-element tensor handle is not an expression
        raise TypeError(f"cannot use tensor {getattr(x, 'name', x)!r} as a value; index it first")
    if isinstance(x, bool):
        return const(x, "bool")
    if isinstance(x, int):
        if like is not None and like != "bool":
            return const(x, like)
        return const(x, "int32")
    if isinstance(x, float):
        if like is not None and dt.is_float(like):
            return const(x, like)
        if like is not None and (dt.is_int(like) or like == "bool"):
            raise TypeError(
                f"cannot mix the float literal {x!r} with a {like} expression; "
                f"use te.cast(expr, 'float32') or an integer literal"
            )
        return const(x, "float32")
    if hasattr(x, "dtype") and hasattr(x, "item") and getattr(x, "shape", None) == ():
        return const(x.item(), dt.canonical(x.dtype))  # numpy scalar
    raise TypeError(f"cannot use {x!r} (type {type(x).__name__}) in a tensor expression")


def _coerce_pair(a: object, b: object, what: str) -> tuple[Expr, Expr]:
    a_like = a.dtype if isinstance(a, Expr) else None
    b_like = b.dtype if isinstance(b, Expr) else None
    ea = as_expr(a, b_like)
    eb = as_expr(b, a_like)
    if ea.dtype != eb.dtype:
        # Widening between the two index types is the one implicit conversion: shapes are int32
        # but users legitimately mix in int64 index arithmetic. Everything else needs a cast.
        if {ea.dtype, eb.dtype} == {"int32", "int64"}:
            ea, eb = cast(ea, "int64"), cast(eb, "int64")
        else:
            raise TypeError(
                f"{what}: operands have different dtypes {ea.dtype} and {eb.dtype} "
                f"(`{ea}` and `{eb}`); insert te.cast to make them match"
            )
    return ea, eb


def binary(op: str, a: object, b: object) -> Expr:
    if op not in ARITH_OPS and op not in LOGIC_OPS:
        raise ValueError(f"unknown binary operator {op!r}")
    ea, eb = _coerce_pair(a, b, f"operator {_OP_SYMBOL.get(op, op)}")
    d = ea.dtype
    if op in LOGIC_OPS:
        if d != "bool":
            raise TypeError(f"logical {op} needs bool operands, got {d} (`{ea}`, `{eb}`)")
    elif d == "bool":
        raise TypeError(f"arithmetic {op} on bool operands (`{ea}`, `{eb}`); cast to a number first")
    elif op == "div" and not dt.is_float(d):
        raise TypeError(
            f"true division `/` of {d} values (`{ea}` / `{eb}`); use `//` (te.floordiv) for "
            "integers or cast to float"
        )
    # Integer folding keeps the index arithmetic that splitting and fusing generate readable and
    # lets bound inference see constants. Floats are never folded: float32 rounding must match.
    if dt.is_int(d):
        ca = ea.value if isinstance(ea, Const) else None
        cb = eb.value if isinstance(eb, Const) else None
        if ca is not None and cb is not None:
            r = _fold_int(op, ca, cb)  # type: ignore[arg-type]
            if r is not None:
                return const(_wrap_int(r, d), d)
        if op == "add":
            if ca == 0:
                return eb
            if cb == 0:
                return ea
        elif op == "sub" and cb == 0:
            return ea
        elif op == "mul":
            if ca == 1:
                return eb
            if cb == 1:
                return ea
            if ca == 0 or cb == 0:
                return const(0, d)
        elif op == "floordiv" and cb == 1:
            return ea
        elif op == "floormod" and cb == 1:
            return const(0, d)
    elif d == "bool":
        ca = ea.value if isinstance(ea, Const) else None
        cb = eb.value if isinstance(eb, Const) else None
        if op == "and":
            if ca is True:
                return eb
            if cb is True:
                return ea
            if ca is False or cb is False:
                return const(False)
        else:
            if ca is False:
                return eb
            if cb is False:
                return ea
            if ca is True or cb is True:
                return const(True)
    return Binary._make("bool" if op in LOGIC_OPS else d, op, ea, eb)


def compare(op: str, a: object, b: object) -> Expr:
    if op not in CMP_OPS:
        raise ValueError(f"unknown comparison {op!r}")
    ea, eb = _coerce_pair(a, b, f"comparison {op}")
    if isinstance(ea, Const) and isinstance(eb, Const) and not dt.is_float(ea.dtype):
        x, y = ea.value, eb.value
        r = {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}[op]
        return const(bool(r))
    return Compare._make("bool", op, ea, eb)


def unary(op: str, a: object) -> Expr:
    ea = as_expr(a)
    if op == "neg":
        if ea.dtype == "bool":
            raise TypeError(f"negation of a bool expression `{ea}`; use ~ for logical not")
        if isinstance(ea, Const) and dt.is_int(ea.dtype):
            return const(_wrap_int(-ea.value, ea.dtype), ea.dtype)  # type: ignore[operator]
    elif op == "not":
        if ea.dtype != "bool":
            raise TypeError(f"logical not needs a bool operand, got {ea.dtype} (`{ea}`)")
        if isinstance(ea, Const):
            return const(not ea.value)
    else:
        raise ValueError(f"unknown unary operator {op!r}")
    return Unary._make(ea.dtype, op, ea)


def call(name: str, *args: object) -> Expr:
    if name not in MATH_FUNCS:
        raise ValueError(f"unknown math function {name!r}; known: {', '.join(sorted(MATH_FUNCS))}")
    if len(args) != MATH_FUNCS[name]:
        raise TypeError(f"{name} takes {MATH_FUNCS[name]} argument(s), got {len(args)}")
    if len(args) == 2:
        ea, eb = _coerce_pair(args[0], args[1], name)
        eargs: tuple[Expr, ...] = (ea, eb)
    else:
        eargs = (as_expr(args[0], "float32") if isinstance(args[0], float) else as_expr(args[0]),)
    d = eargs[0].dtype
    if name in FLOAT_ONLY_FUNCS and not dt.is_float(d):
        raise TypeError(f"{name} needs a float argument, got {d} (`{eargs[0]}`); use te.cast")
    if name == "abs" and d == "bool":
        raise TypeError(f"abs of a bool expression `{eargs[0]}`")
    return Call._make(d, name, eargs)


def select(cond: object, true_value: object, false_value: object) -> Expr:
    c = as_expr(cond)
    if c.dtype != "bool":
        raise TypeError(f"select/if_then_else condition must be bool, got {c.dtype} (`{c}`)")
    t, f = _coerce_pair(true_value, false_value, "select")
    if isinstance(c, Const):
        return t if c.value else f
    if t is f:
        return t
    return Select._make(t.dtype, c, t, f)


def cast(value: object, dtype: str) -> Expr:
    dtype = dt.canonical(dtype)
    if isinstance(value, (int, float, bool)) and not isinstance(value, Expr):
        if dt.is_float(dtype):
            return const(float(value), dtype)
        if dtype == "bool":
            return const(bool(value))
        if isinstance(value, float):
            return const(math.trunc(value), dtype)
        return const(_wrap_int(int(value), dtype), dtype)
    e = as_expr(value)
    if e.dtype == dtype:
        return e
    if isinstance(e, Const) and dt.is_int(e.dtype) and dt.is_int(dtype):
        return const(_wrap_int(e.value, dtype), dtype)  # type: ignore[arg-type]
    return Cast._make(dtype, e)


def reduce(combiner: str, source: object, axes: Iterable[IterVar], where: object = None) -> Reduce:
    src = as_expr(source)
    if src.dtype == "bool":
        raise TypeError(f"{combiner} over bool values (`{src}`); cast to a number first")
    ax = tuple(axes)
    for a in ax:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise TypeError(f"{combiner}: axis {a!r} is not a reduce_axis")
    if len(set(map(id, ax))) != len(ax):
        raise ValueError(f"{combiner}: the same reduce axis is listed twice")
    if not ax:
        raise ValueError(f"{combiner}: needs at least one reduce axis")
    w = None
    if where is not None:
        w = as_expr(where)
        if w.dtype != "bool":
            raise TypeError(f"{combiner}: `where` must be a bool condition, got {w.dtype} (`{w}`)")
        if isinstance(w, Const) and w.value is True:
            w = None
    return Reduce._make(src.dtype, combiner, src, ax, w)  # type: ignore[return-value]


def reduce_identity(combiner: str, dtype: str) -> Const:
    if combiner == "sum":
        return const(0, dtype) if not dt.is_float(dtype) else const(0.0, dtype)
    if dt.is_float(dtype):
        return const(-math.inf if combiner == "max" else math.inf, dtype)
    info_min, info_max = int_range(dtype)
    return const(info_min if combiner == "max" else info_max, dtype)


# The nodes' operators and with_children build through these (see expr_nodes.BUILD).
BUILD.binary, BUILD.compare, BUILD.unary = binary, compare, unary
BUILD.call, BUILD.select, BUILD.cast = call, select, cast
