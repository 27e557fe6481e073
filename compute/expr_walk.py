"""Generic iterative walks over expression trees: post-order listing, fold and rewrite.

They rely only on a node's ``children()`` and ``with_children()``, so they live apart from the node
classes and constructors of ``compute.expr`` (which re-exports them, as ``E.fold`` etc.) and do not
import that module. The walks use an explicit stack, so any expression depth works, and visit each
distinct (interned) node once.
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence


class Expr(Protocol):
    """What the walks need of a ``compute.expr.Expr`` node (structural, so no import is needed)."""

    def children(self) -> tuple["Expr", ...]: ...

    def with_children(self, children: Sequence["Expr"]) -> "Expr": ...


def post_order(expr: Expr) -> list[Expr]:
    """Every distinct node of ``expr``, children before parents (shared nodes once)."""
    out: list[Expr] = []
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, done = stack.pop()
        if done:
            out.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for c in reversed(node.children()):
            if id(c) not in seen:
                stack.append((c, False))
    return out


def fold(expr: Expr, fn: Callable[[Expr, list], object], memo: dict[int, object] | None = None) -> object:
    """``fn(node, child_values)`` for every distinct node of ``expr``, children first; the root's value.

    Iterative (an explicit stack, so any depth works) and memoised per node (shared sub-expressions
    are computed once, so walks stay linear in the distinct nodes). Every analysis that maps a node
    to a value from its children's values is a fold.
    """
    memo = {} if memo is None else memo
    stack = [expr]
    while stack:
        e = stack[-1]
        if id(e) in memo:
            stack.pop()
            continue
        kids = e.children()
        pending = [c for c in kids if id(c) not in memo]
        if pending:
            stack.extend(reversed(pending))  # leftmost child computed first
            continue
        stack.pop()
        memo[id(e)] = fn(e, [memo[id(c)] for c in kids])
    return memo[id(expr)]


def rewrite(expr: Expr, fn: Callable[[Expr], Expr | None], memo: dict[int, Expr] | None = None) -> Expr:
    """Rebuild ``expr`` bottom-up; ``fn(node)`` may return a replacement (tried before descending).

    Iterative, so any depth works; each distinct node is rebuilt once.
    """
    memo = {} if memo is None else memo
    expanded: set[int] = set()  # nodes fn declined, whose children are being rebuilt
    stack = [expr]
    while stack:
        e = stack[-1]
        if id(e) in memo:
            stack.pop()
            continue
        kids = e.children()
        if id(e) not in expanded:
            rep = fn(e)
            if rep is not None or not kids:
                memo[id(e)] = e if rep is None else rep
                stack.pop()
                continue
            expanded.add(id(e))
            stack.extend(c for c in reversed(kids) if id(c) not in memo)
            continue
        stack.pop()
        expanded.discard(id(e))
        new = tuple(memo[id(c)] for c in kids)
        memo[id(e)] = e if all(n is o for n, o in zip(new, kids)) else e.with_children(new)
    return memo[id(expr)]
