"""Analyses of expressions: variable substitution, the free variables, and conjunctions.

Pure functions over the nodes of ``compute.expr`` (built with its constructors, walked with
``compute.expr_walk``), kept apart from the node classes and constructors, which never need them:
the import goes one way, analyses -> nodes.
"""
from __future__ import annotations

from .expr import Binary, Expr, Reduce, Var, as_expr, binary
from .expr_walk import post_order, rewrite


def substitute(expr: Expr, mapping: dict[Var, Expr]) -> Expr:
    """Replace variables by expressions (keys compared by identity)."""
    if not mapping:
        return expr
    by_id = {id(k): as_expr(v) for k, v in mapping.items()}
    return rewrite(expr, lambda e: by_id.get(id(e)) if isinstance(e, Var) else None)


def conjuncts(cond: Expr) -> list[Expr]:
    """The operands of a conjunction ``a and b and ...``, in order (``[cond]`` for any other)."""
    if isinstance(cond, Binary) and cond.op == "and":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def conjunction(parts: list[Expr]) -> Expr | None:
    """``parts[0] and parts[1] and ...``; None for no parts."""
    out: Expr | None = None
    for p in parts:
        out = p if out is None else binary("and", out, p)
    return out


def free_vars(expr: Expr) -> list[Var]:
    """Variables in ``expr`` (in first-seen order), not counting a Reduce's own axes."""
    bound: set[int] = set()
    for n in post_order(expr):
        if isinstance(n, Reduce):
            bound.update(id(a) for a in n.axes)
    seen: dict[int, Var] = {}
    for n in post_order(expr):
        if isinstance(n, Var) and id(n) not in bound:
            seen.setdefault(id(n), n)
    return list(seen.values())
