"""The unrolling limit, applied to a function's body before emission: ``unrolled`` loops whose
full unrolling would make too many copies of the body become serial loops."""
from __future__ import annotations

from compute import loop_ir as L

# Full unrolling beyond this many copies of the loop body's statements buys nothing and can make
# LLVM take seconds (a 9 x 209 unrolled nest took 11 s); such loops stay loops.
MAX_UNROLLED_COPIES = 512
SERIAL_LOOP_COPIES = 16  # what a kept loop weighs: LLVM makes vector, remainder and check copies


def limit_unrolling(stmt: L.Stmt) -> L.Stmt:
    """Demote ``unrolled`` loops to serial where unrolling would exceed MAX_UNROLLED_COPIES
    statement copies, deciding innermost first (inner unrolling is the valuable part)."""

    def go(s: L.Stmt) -> tuple[L.Stmt, int]:
        if isinstance(s, L.For):
            body, n = go(s.body)
            kind = s.kind
            if kind == "unrolled":
                if s.extent * n <= MAX_UNROLLED_COPIES:
                    n *= s.extent
                else:
                    kind = "serial"
            if kind in ("serial", "parallel"):
                n += SERIAL_LOOP_COPIES
            if body is s.body and kind == s.kind:
                return s, n
            return L.For(s.var, s.extent, kind, body, s.annotations), n
        if isinstance(s, L.Seq):
            parts = [go(x) for x in s.stmts]
            new = tuple(p for p, _ in parts)
            same = all(a is b for a, b in zip(new, s.stmts))
            return (s if same else L.Seq(new)), sum(n for _, n in parts)
        if isinstance(s, L.IfThenElse):
            t, nt = go(s.then_case)
            e, ne = (None, 0) if s.else_case is None else go(s.else_case)
            same = t is s.then_case and e is s.else_case
            return (s if same else L.IfThenElse(s.cond, t, e)), nt + ne
        if isinstance(s, L.Allocate):
            b, n = go(s.body)
            return (s if b is s.body else L.Allocate(s.buffer, b)), n
        return s, 1

    return go(stmt)[0]
