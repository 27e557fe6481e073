"""Readable text for expressions, in the style TVM users know: ``C(i, j) += A[i, k]*B[k, j]``."""
from __future__ import annotations

from . import expr as E

_PREC = {"or": 1, "and": 2, "cmp": 3, "add": 4, "sub": 4, "mul": 5, "div": 5, "floordiv": 5,
         "floormod": 5}
_SYM = {"add": " + ", "sub": " - ", "mul": "*", "div": "/", "floordiv": " // ", "floormod": " % ",
        "and": " && ", "or": " || "}
_CMP = {"lt": " < ", "le": " <= ", "gt": " > ", "ge": " >= ", "eq": " == ", "ne": " != "}


def _const_str(c: E.Const) -> str:
    v = c.value
    if c.dtype == "bool":
        return "True" if v else "False"
    if c.dtype == "float32":
        return f"{v!r}f"
    if c.dtype in ("int32",):
        return str(v)
    return f"{c.dtype}({v!r})"


def expr_str(e: E.Expr) -> str:
    return _str(e, 0)


def _str(e: E.Expr, parent_prec: int) -> str:
    if isinstance(e, E.Const):
        return _const_str(e)
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.Binary):
        if e.op in ("min", "max"):
            return f"{e.op}({_str(e.a, 0)}, {_str(e.b, 0)})"
        p = _PREC[e.op]
        s = f"{_str(e.a, p)}{_SYM[e.op]}{_str(e.b, p + 1)}"
        return f"({s})" if p < parent_prec else s
    if isinstance(e, E.Compare):
        p = _PREC["cmp"]
        s = f"{_str(e.a, p + 1)}{_CMP[e.op]}{_str(e.b, p + 1)}"
        return f"({s})" if p < parent_prec else s
    if isinstance(e, E.Unary):
        return f"-{_str(e.a, 6)}" if e.op == "neg" else f"!{_str(e.a, 6)}"
    if isinstance(e, E.Call):
        return f"{e.name}({', '.join(_str(a, 0) for a in e.args)})"
    if isinstance(e, E.Select):
        return f"select({_str(e.cond, 0)}, {_str(e.true_value, 0)}, {_str(e.false_value, 0)})"
    if isinstance(e, E.Cast):
        return f"{e.dtype}({_str(e.value, 0)})"
    if isinstance(e, E.TensorLoad):
        return f"{e.tensor.name}[{', '.join(_str(i, 0) for i in e.indices)}]"
    if isinstance(e, E.Reduce):
        axes = ", ".join(a.name for a in e.axes)
        w = "" if e.where is None else f", where={_str(e.where, 0)}"
        return f"{e.combiner}({_str(e.source, 0)}, axis=[{axes}]{w})"
    name = getattr(e, "name", None) or type(e).__name__
    idx = getattr(e, "indices", None)
    if idx is not None:  # loop-IR buffer loads print like tensor loads
        return f"{getattr(e, 'buffer').name}[{', '.join(_str(i, 0) for i in idx)}]"
    return f"<{name}>"
