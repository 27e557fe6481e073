"""The public tensor-expression DSL (``ansor.te``): placeholders, computes, reducers, intrinsics."""
from __future__ import annotations

from typing import Iterable

from . import expr as E
from .expr import Expr, IterVar, Var, cast, const, var
from .tensor import Tensor, compute, placeholder, reduce_axis

__all__ = [
    "Expr", "IterVar", "Tensor", "Var", "abs", "all", "any", "cast", "ceil", "compute", "const",
    "erf", "exp", "floor", "floordiv", "floormod", "if_then_else", "log", "logical_and",
    "logical_not", "logical_or", "max", "max_value", "min", "min_value", "placeholder", "pow",
    "reduce_axis", "round", "rsqrt", "select", "sigmoid", "sqrt", "sum", "tanh", "trunc", "var",
]


def _axes(axis: IterVar | Iterable[IterVar] | None, who: str) -> tuple[IterVar, ...]:
    if axis is None:
        raise TypeError(f"te.{who}: the reduce axis is required (axis=k or axis=[k1, k2])")
    if isinstance(axis, IterVar):
        return (axis,)
    try:
        return tuple(axis)
    except TypeError:
        raise TypeError(f"te.{who}: axis must be a reduce_axis or a list of them, got {axis!r}") from None


def sum(expr: object, axis: IterVar | Iterable[IterVar] | None = None, where: object = None) -> Expr:  # noqa: A001
    """Sum of ``expr`` over the reduce axis (or axes), optionally only where ``where`` holds."""
    return E.reduce("sum", expr, _axes(axis, "sum"), where)


def max(a: object, axis: object = None, where: object = None) -> Expr:  # noqa: A001
    """``te.max(x, axis=k)`` reduces; ``te.max(a, b)`` is the larger of two values."""
    if isinstance(axis, IterVar) or isinstance(axis, (list, tuple)):
        return E.reduce("max", a, _axes(axis, "max"), where)  # type: ignore[arg-type]
    if axis is None:
        raise TypeError("te.max: give two values (te.max(a, b)) or a reduce axis (te.max(x, axis=k))")
    return E.binary("max", a, axis)


def min(a: object, axis: object = None, where: object = None) -> Expr:  # noqa: A001
    """``te.min(x, axis=k)`` reduces; ``te.min(a, b)`` is the smaller of two values."""
    if isinstance(axis, IterVar) or isinstance(axis, (list, tuple)):
        return E.reduce("min", a, _axes(axis, "min"), where)  # type: ignore[arg-type]
    if axis is None:
        raise TypeError("te.min: give two values (te.min(a, b)) or a reduce axis (te.min(x, axis=k))")
    return E.binary("min", a, axis)


def if_then_else(cond: object, t: object, f: object) -> Expr:
    return E.select(cond, t, f)


select = if_then_else


def floordiv(a: object, b: object) -> Expr:
    return E.binary("floordiv", a, b)


def floormod(a: object, b: object) -> Expr:
    return E.binary("floormod", a, b)


def logical_and(*args: object) -> Expr:
    out = E.as_expr(args[0])
    for a in args[1:]:
        out = E.binary("and", out, a)
    return out


def logical_or(*args: object) -> Expr:
    out = E.as_expr(args[0])
    for a in args[1:]:
        out = E.binary("or", out, a)
    return out


def logical_not(a: object) -> Expr:
    return E.unary("not", a)


all = logical_and  # noqa: A001  (TVM spelling)
any = logical_or  # noqa: A001


def exp(x: object) -> Expr: return E.call("exp", x)
def log(x: object) -> Expr: return E.call("log", x)
def sqrt(x: object) -> Expr: return E.call("sqrt", x)
def rsqrt(x: object) -> Expr: return E.call("rsqrt", x)
def tanh(x: object) -> Expr: return E.call("tanh", x)
def sigmoid(x: object) -> Expr: return E.call("sigmoid", x)
def erf(x: object) -> Expr: return E.call("erf", x)
def pow(x: object, y: object) -> Expr: return E.call("pow", x, y)  # noqa: A001
def abs(x: object) -> Expr: return E.call("abs", x)  # noqa: A001
def floor(x: object) -> Expr: return E.call("floor", x)
def ceil(x: object) -> Expr: return E.call("ceil", x)
def trunc(x: object) -> Expr: return E.call("trunc", x)
def round(x: object) -> Expr: return E.call("round", x)  # noqa: A001


def max_value(dtype: str) -> Expr:
    return E.reduce_identity("min", E.dt.canonical(dtype))


def min_value(dtype: str) -> Expr:
    return E.reduce_identity("max", E.dt.canonical(dtype))
