"""Loop partitioning for the "peel" tail strategy: full tiles run without their guards.

A split whose parts do not divide its extent leaves guards (``if i < extent``) deep in the loop
nest: a test per point and, inside a vectorized loop, masked loads and stores that keep the
accumulators out of registers. Peeling hoists them. At the top of a loop's body one test decides
whether a guard holds for every iteration nested inside (the guarded index's bound over the inner
loops, computed symbolically from their extents); if it does, a copy of the body without that
guard runs, otherwise the guarded body, whose inner loops are partitioned the same way, so only
the partial tile keeps tests; there, a loop whose every store a guard covers is skipped by one
test when no inner iteration can pass it (the register tiles past the extent). A split's own
guard ``X < c`` caps ``X`` for the other guards of the same test (a region check reading the
same index), so the last full tile is not mistaken for a partial one. TVM gets the same effect with ``likely`` conditions and its
LoopPartition pass, by splitting loop ranges; versioning the body instead also works under a
fused parallel loop, whose index reaches the guard through ``//`` and ``%``.

Only the guards lowering marks are hoisted (those of "peel" splits and the region checks of the
stages computed inside a peeling stage). The rewrite keeps the semantics of any guard, so what is
marked decides speed and code size, never correctness. Bodies of vectorized loops are left alone
(their conditions are per lane), and a kernel gets at most ``MAX_VERSIONS`` extra copies.
"""
from __future__ import annotations

from compute import expr as E
from compute import expr_analysis as EA
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


atoms = EA.conjuncts  # the comparisons of a guard
_conj = EA.conjunction


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


def _caps(parts: list[E.Expr]) -> dict[int, int]:
    """``id(X) -> c - 1`` for the atoms ``X < c`` (c a constant) of one guard: its other atoms
    need to hold only where X < c does (a split's guard caps the index a region check reads)."""
    out: dict[int, int] = {}
    for a in parts:
        if isinstance(a, E.Compare) and a.op == "lt" and isinstance(a.b, E.Const) \
                and not isinstance(a.b.value, (bool, float)):
            out[id(a.a)] = int(a.b.value) - 1
    return out


def _capped(atom: E.Expr, caps: dict[int, int], inner: Ranges) -> tuple[E.Expr, Ranges]:
    """``atom`` with each capped sub-index replaced by a fresh variable over its capped range."""
    if not caps:
        return atom, inner
    ranges = dict(inner)

    def fn(x: E.Expr) -> E.Expr | None:
        cap = caps.get(id(x))
        if cap is None:
            return None
        try:
            lo, hi = num_bounds(x, inner)
        except (KeyError, TypeError, ValueError):
            return None
        v = E.var("capped", x.dtype)
        ranges[id(v)] = (lo, min(hi, max(lo, cap)))
        return v

    new = E.rewrite(atom, fn, {})
    return new, ranges


def _normal(atom: E.Expr) -> E.Expr:
    """The form ``_hoist`` gives a comparison no inner loop varies (``<``/``<=``, simplified)."""
    if not isinstance(atom, E.Compare) or atom.op not in ("lt", "le", "gt", "ge"):
        return atom
    a, b = simplify(atom.a), simplify(atom.b)
    if atom.op in ("lt", "le"):
        return E.compare(atom.op, a, b)
    return E.compare("lt" if atom.op == "gt" else "le", b, a)


def _hoist(atom: E.Expr, inner: Ranges, outer: Ranges,
           caps: dict[int, int] | None = None) -> E.Expr | None:
    """A condition on the outer loops only that implies ``atom`` for every value of the inner
    ones (where the guard's other atoms ``caps`` hold): ``E.const(True)`` when it always holds,
    None when no such test can ever succeed or the atom is not a comparison of integer indices
    this module can bound."""
    if not isinstance(atom, E.Compare) or atom.op not in ("lt", "le", "gt", "ge"):
        return None
    atom, inner = _capped(atom, caps or {}, inner)
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


def _live(atom: E.Expr, inner: Ranges, outer: Ranges) -> E.Expr | None:
    """A condition on the outer loops that holds whenever ``atom`` holds for *some* value of the
    inner ones (None when it always does, or cannot be bounded): false means no inner iteration
    passes the guard, so a body every store of which it guards has nothing to do."""
    if not isinstance(atom, E.Compare) or atom.op not in ("lt", "le", "gt", "ge"):
        return None
    try:
        alo, ahi = sym_bounds(atom.a, inner, outer)
        blo, bhi = sym_bounds(atom.b, inner, outer)
        if atom.op in ("lt", "le"):
            small, big = simplify(alo), simplify(bhi)
        else:
            small, big = simplify(blo), simplify(ahi)
        s_lo, s_hi = num_bounds(small, outer)
        b_lo, b_hi = num_bounds(big, outer)
    except (KeyError, TypeError, ValueError):
        return None
    strict = atom.op in ("lt", "gt")
    if (s_hi < b_lo) if strict else (s_hi <= b_lo):
        return None  # some iteration always passes
    return E.compare("lt" if strict else "le", small, big)


def _guarding_every_store(body: L.Stmt) -> set[int]:
    """ids of the guard atoms every store in ``body`` sits under."""
    common: set[int] | None = None

    def go(s: L.Stmt, under: frozenset[int]) -> None:
        nonlocal common
        if isinstance(s, L.Store):
            common = set(under) if common is None else common & under
        elif isinstance(s, (L.For, L.Allocate)):
            go(s.body, under)
        elif isinstance(s, L.Seq):
            for x in s.stmts:
                go(x, under)
        elif isinstance(s, L.IfThenElse):
            if s.else_case is None:
                go(s.then_case, under | {id(a) for a in atoms(s.cond)})
            else:
                go(s.then_case, under)
                go(s.else_case, under)

    go(body, frozenset())
    return common or set()


class _Partitioner:
    def __init__(self, marked: set[int]):
        self.marked = marked
        self.versions = 0

    def visit(self, s: L.Stmt, ranges: Ranges, failed: frozenset[int]) -> L.Stmt:
        """``failed``: tests known false here (an outer version's), not worth repeating."""
        if isinstance(s, L.For):
            if s.kind == "vectorized":
                return s
            inside = {**ranges, id(s.var): (0, s.extent - 1)}
            # A loop of one iteration decides nothing its parent could not: version deeper.
            body = (self.visit(s.body, inside, failed) if s.extent == 1
                    else self._version(s.body, inside, failed))
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
        # Every occurrence of an atom must be implied (the caps differ between guards).
        found: dict[int, list[E.Expr | None]] = {}
        for g in L.walk(body):
            if not (isinstance(g, L.IfThenElse) and g.else_case is None):
                continue
            parts = atoms(g.cond)
            caps = _caps(parts)
            for a in parts:
                if id(a) in self.marked:
                    h = _hoist(a, inner, ranges, {k: v for k, v in caps.items() if k != id(a.a)})
                    # A test equal to the guard itself (nothing inside varies it) gains nothing.
                    ok = h is not None and h is not _normal(a) and id(h) not in failed
                    found.setdefault(id(a), []).append(h if ok else None)
        hoisted: dict[int, E.Expr] = {}
        for aid, hs in found.items():
            if any(h is None for h in hs):
                continue
            distinct = {id(h): h for h in hs if not (isinstance(h, E.Const) and h.value)}
            cond = _conj(list(distinct.values()))
            hoisted[aid] = E.const(True) if cond is None else cond
        live = self._live_test(body, inner, ranges)
        if not hoisted:
            out = self.visit(body, ranges, failed)
            return out if live is None else L.IfThenElse(live, out)
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
        if live is not None:  # a partial tile's iterations past the extent do nothing
            rest = L.IfThenElse(live, rest)
        cond = _conj(list(tests.values()))
        assert cond is not None
        return L.IfThenElse(cond, clean, rest)

    def _live_test(self, body: L.Stmt, inner: Ranges, ranges: Ranges) -> E.Expr | None:
        """A test that some iteration inside does work, from the marked guards every store of
        ``body`` sits under; None when no such guard can fail for all of them."""
        every = _guarding_every_store(body) & self.marked
        if not every:
            return None
        by_id = {id(a): a for g in L.walk(body) if isinstance(g, L.IfThenElse)
                 for a in atoms(g.cond)}
        tests: dict[int, E.Expr] = {}
        for aid in every:
            t = _live(by_id[aid], inner, ranges)
            if t is not None and t is not _normal(by_id[aid]):
                tests.setdefault(id(t), t)
        return _conj(list(tests.values()))
