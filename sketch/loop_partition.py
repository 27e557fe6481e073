"""Loop partitioning for the "peel" tail strategy: full tiles run without their guards.

A split whose parts do not divide its extent leaves guards (``if i < extent``) deep in the loop
nest: a test per point and, inside a vectorized loop, masked loads and stores that keep the
accumulators out of registers. Peeling hoists them. At the top of a loop's body one test decides
whether a guard holds for every iteration nested inside (the guarded index's bound over the inner
loops, computed symbolically from their extents); if it does, a copy of the body without that
guard runs, otherwise the guarded body, whose inner loops are partitioned the same way, so only
the partial tile keeps tests. TVM gets the same effect with ``likely`` conditions and its
LoopPartition pass, by splitting loop ranges; versioning the body instead also works under a
fused parallel loop, whose index reaches the guard through ``//`` and ``%``.

Only the guards lowering marks are hoisted (those of "peel" splits and the region checks of the
stages computed inside a peeling stage). The rewrite keeps the semantics of any guard, so what is
marked decides speed and code size, never correctness. Bodies of vectorized loops are left alone
(their conditions are per lane), and a kernel gets at most ``MAX_VERSIONS`` extra copies.
"""
from __future__ import annotations

from compute import expr as E
from compute import loop_ir as L

from .bound import num_bounds, simplify, sym_bounds

MAX_VERSIONS = 32  # guarded-body copies per kernel: code size and LLVM time stay bounded

Ranges = dict[int, tuple[int, int]]


def partition_guards(body: L.Stmt, marked: set[int]) -> L.Stmt:
    """``body`` with the marked guard atoms (``id`` of each comparison) hoisted out of the loops
    they are invariant over, as far out as a test can still succeed for some iterations."""
    if not marked:
        return body
    return _Partitioner(marked).visit(body, {}, frozenset())


def atoms(cond: E.Expr) -> list[E.Expr]:
    """The comparisons of a conjunction, in order."""
    if isinstance(cond, E.Binary) and cond.op == "and":
        return atoms(cond.a) + atoms(cond.b)
    return [cond]


def _conj(parts: list[E.Expr]) -> E.Expr | None:
    out: E.Expr | None = None
    for p in parts:
        out = p if out is None else E.binary("and", out, p)
    return out


def _drop(stmt: L.Stmt, ids: set[int]) -> L.Stmt:
    """``stmt`` with the guard atoms in ``ids`` taken as true."""

    def fn(s: L.Stmt) -> L.Stmt | None:
        if isinstance(s, L.IfThenElse) and s.else_case is None:
            parts = atoms(s.cond)
            keep = [a for a in parts if id(a) not in ids]
            if len(keep) == len(parts):
                return None
            cond = _conj(keep)
            return s.then_case if cond is None else L.IfThenElse(cond, s.then_case)
        return None

    return L.map_stmt(stmt, fn)


def _hoist(atom: E.Expr, inner: Ranges, outer: Ranges) -> E.Expr | None:
    """A condition on the outer loops only that implies ``atom`` for every value of the inner
    ones: ``E.const(True)`` when it always holds, None when no such test can ever succeed or the
    atom is not a comparison of integer indices this module can bound."""
    if not isinstance(atom, E.Compare) or atom.op not in ("lt", "le", "gt", "ge"):
        return None
    known = {**outer, **inner}
    for n in E.post_order(atom):
        if isinstance(n, E.Var) and id(n) not in known:
            return None
        if isinstance(n, L.BufferLoad) or (n is not atom and n.dtype not in ("int32", "int64")):
            return None
    try:
        alo, ahi = sym_bounds(atom.a, inner, outer)
        blo, bhi = sym_bounds(atom.b, inner, outer)
    except (KeyError, TypeError, ValueError):
        return None
    if atom.op in ("lt", "le"):
        small, big = simplify(ahi), simplify(blo)
    else:
        small, big = simplify(bhi), simplify(alo)
    strict = atom.op in ("lt", "gt")
    try:
        s_lo, s_hi = num_bounds(small, outer)
        b_lo, b_hi = num_bounds(big, outer)
    except (KeyError, TypeError, ValueError):
        return None
    if (s_hi < b_lo) if strict else (s_hi <= b_lo):
        return E.const(True)
    if (s_lo >= b_hi) if strict else (s_lo > b_hi):
        return None  # fails for every outer iteration: only a deeper level can separate tiles
    return E.compare("lt" if strict else "le", small, big)


class _Partitioner:
    def __init__(self, marked: set[int]):
        self.marked = marked
        self.versions = 0

    def visit(self, s: L.Stmt, ranges: Ranges, failed: frozenset[int]) -> L.Stmt:
        """``failed``: tests known false here (an outer version's), not worth repeating."""
        if isinstance(s, L.For):
            if s.kind == "vectorized":
                return s
            body = self._version(s.body, {**ranges, id(s.var): (0, s.extent - 1)}, failed)
            return s if body is s.body else L.For(s.var, s.extent, s.kind, body, s.annotations)
        if isinstance(s, L.Seq):
            new = tuple(self.visit(x, ranges, failed) for x in s.stmts)
            return s if all(a is b for a, b in zip(new, s.stmts)) else L.Seq(new)
        if isinstance(s, L.Allocate):
            b = self.visit(s.body, ranges, failed)
            return s if b is s.body else L.Allocate(s.buffer, b)
        if isinstance(s, L.IfThenElse):
            t = self.visit(s.then_case, ranges, failed)
            e = None if s.else_case is None else self.visit(s.else_case, ranges, failed)
            same = t is s.then_case and e is s.else_case
            return s if same else L.IfThenElse(s.cond, t, e)
        return s

    def _version(self, body: L.Stmt, ranges: Ranges, failed: frozenset[int]) -> L.Stmt:
        """The body of a loop (``ranges`` holds that loop's variable and the outer ones)."""
        if isinstance(body, L.Allocate):  # one buffer for both versions
            b = self._version(body.body, ranges, failed)
            return body if b is body.body else L.Allocate(body.buffer, b)
        if self.versions >= MAX_VERSIONS:
            return self.visit(body, ranges, failed)
        inner = {id(f.var): (0, f.extent - 1) for f in L.walk(body) if isinstance(f, L.For)}
        hoisted: dict[int, E.Expr] = {}
        for g in L.walk(body):
            if not (isinstance(g, L.IfThenElse) and g.else_case is None):
                continue
            for a in atoms(g.cond):
                if id(a) in self.marked and id(a) not in hoisted:
                    h = _hoist(a, inner, ranges)
                    # A test equal to the guard itself (nothing inside varies it) gains nothing.
                    if h is not None and h is not a and id(h) not in failed:
                        hoisted[id(a)] = h
        if not hoisted:
            return self.visit(body, ranges, failed)
        always = {k for k, h in hoisted.items() if isinstance(h, E.Const)}
        tests: dict[int, E.Expr] = {}
        for k, h in hoisted.items():
            if k not in always:
                tests.setdefault(id(h), h)
        clean = self.visit(_drop(body, set(hoisted)), ranges, failed)
        if not tests:
            return clean
        self.versions += 1
        # In the other version some test failed, not necessarily each: only a single one is
        # known false there.
        known = failed | set(tests) if len(tests) == 1 else failed
        rest = self.visit(_drop(body, always) if always else body, ranges, known)
        cond = _conj(list(tests.values()))
        assert cond is not None
        return L.IfThenElse(cond, clean, rest)
