"""Readable text for expressions, in the style TVM users know: ``C(i, j) += A[i, k]*B[k, j]``.

The driver here is generic: each node says how it prints (``_pieces``, on the node classes of
``compute.expr`` and ``compute.loop_ir``, using the operator tables below), so this module needs no
node class and ``Expr.__repr__`` can use it without an import cycle.
"""
from __future__ import annotations

from typing import Protocol, Union

PREC = {"or": 1, "and": 2, "cmp": 3, "add": 4, "sub": 4, "mul": 5, "div": 5, "floordiv": 5,
        "floormod": 5}
UNARY_PREC = 6  # binds tighter than every binary operator
SYM = {"add": " + ", "sub": " - ", "mul": "*", "div": "/", "floordiv": " // ", "floormod": " % ",
       "and": " && ", "or": " || "}
CMP = {"lt": " < ", "le": " <= ", "gt": " > ", "ge": " >= ", "eq": " == ", "ne": " != "}


class Printable(Protocol):
    """A node that says how it prints: a string, or a list of strings and ``(child, precedence of
    the child's context)`` pairs to print in turn."""

    def _pieces(self, parent_prec: int) -> "Pieces": ...


Pieces = Union[str, list]


def const_text(value: int | float | bool, dtype: str) -> str:
    """A constant as the user would write it: ``True``, ``1.5f``, ``3``, ``int64(3)``."""
    if dtype == "bool":
        return "True" if value else "False"
    if dtype == "float32":
        return f"{value!r}f"
    if dtype in ("int32",):
        return str(value)
    return f"{dtype}({value!r})"


def join(items: list, sep: str) -> list:
    """``items`` with ``sep`` between them (pieces for a comma-separated list)."""
    res: list = []
    for k, x in enumerate(items):
        if k:
            res.append(sep)
        res.append(x)
    return res


MAX_CHARS = 1_000_000  # a tree of shared sub-expressions prints exponentially long: cut it short


def expr_str(e: Printable, max_chars: int = MAX_CHARS) -> str:
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
        pieces = node._pieces(parent_prec)
        if isinstance(pieces, str):
            work.append(pieces)
        else:
            work.extend(reversed(pieces))
    return "".join(out)
