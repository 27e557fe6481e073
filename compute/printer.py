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


MAX_CHARS = 1_000_000  # a tree of shared sub-expressions prints exponentially long: cut it short


def expr_str(e: E.Expr, max_chars: int = MAX_CHARS) -> str:
    """``e`` as text (at most about ``max_chars`` characters, then " ..."). Iterative: an explicit
    work stack of pieces, so a chain of any depth prints without recursion."""
    out: list[str] = []
    size = 0
    work: list[object] = [(e, 0)]  # items: text to write, or (expr, precedence of its context)
    while work:
        item = work.pop()
        if isinstance(item, str):
            out.append(item)
            size += len(item)
            if size > max_chars:
                out.append(" ...")
                break
            continue
        node, parent_prec = item  # type: ignore[misc]
        pieces = _pieces(node, parent_prec)
        if isinstance(pieces, str):
            work.append(pieces)
        else:
            work.extend(reversed(pieces))
    return "".join(out)


def _join(items: list, sep: str) -> list:
    res: list = []
    for k, x in enumerate(items):
        if k:
            res.append(sep)
        res.append(x)
    return res


def _pieces(e: E.Expr, parent_prec: int) -> str | list:
    """One node's text: a string, or a list of strings and (child, precedence) to print in turn."""
    if isinstance(e, E.Const):
        return _const_str(e)
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.Binary):
        if e.op in ("min", "max"):
            return [f"{e.op}(", (e.a, 0), ", ", (e.b, 0), ")"]
        p = _PREC[e.op]
        s = [(e.a, p), _SYM[e.op], (e.b, p + 1)]
        return ["(", *s, ")"] if p < parent_prec else s
    if isinstance(e, E.Compare):
        p = _PREC["cmp"]
        s = [(e.a, p + 1), _CMP[e.op], (e.b, p + 1)]
        return ["(", *s, ")"] if p < parent_prec else s
    if isinstance(e, E.Unary):
        return ["-" if e.op == "neg" else "!", (e.a, 6)]
    if isinstance(e, E.Call):
        return [f"{e.name}(", *_join([(a, 0) for a in e.args], ", "), ")"]
    if isinstance(e, E.Select):
        return ["select(", (e.cond, 0), ", ", (e.true_value, 0), ", ", (e.false_value, 0), ")"]
    if isinstance(e, E.Cast):
        return [f"{e.dtype}(", (e.value, 0), ")"]
    if isinstance(e, E.TensorLoad):
        return [f"{e.tensor.name}[", *_join([(i, 0) for i in e.indices], ", "), "]"]
    if isinstance(e, E.Reduce):
        axes = ", ".join(a.name for a in e.axes)
        w = [] if e.where is None else [", where=", (e.where, 0)]
        return [f"{e.combiner}(", (e.source, 0), f", axis=[{axes}]", *w, ")"]
    name = getattr(e, "name", None) or type(e).__name__
    idx = getattr(e, "indices", None)
    if idx is not None:  # loop-IR buffer loads print like tensor loads
        return [f"{getattr(e, 'buffer').name}[", *_join([(i, 0) for i in idx], ", "), "]"]
    return f"<{name}>"
