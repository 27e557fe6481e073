"""Selects whose arms load: ``select(i >= 1, A[i-1], 0)`` must not execute the load of the arm it
does not take (it may be out of bounds). A lane-dependent condition runs each arm under the mask
of the lanes that pick it (masked loads); a scalar one branches, each arm in its own block.

The arms are expressions: the expression emitter calls ``emit`` and hands itself over as the
``Arms`` it needs (emit an arm, forget what an arm's block computed), so there is no cycle
between the two objects."""
from __future__ import annotations

from typing import Protocol

from compute import expr as E

from .affine import IndexAnalysis
from .emitter import Emitter
from .values import _Val


class Arms(Protocol):
    """What a guarded select needs of the expression emitter."""

    def value(self, e: E.Expr) -> _Val: ...

    def snapshot(self) -> dict:
        """The memo of emitted values, to restore when leaving a block."""

    def restore(self, saved: dict) -> None:
        """Forget every value emitted since ``saved`` was taken (it is not available here)."""


class GuardedSelect:
    """``select`` nodes in ``fn``: plain, lane-masked or branching, by where loads are."""

    def __init__(self, fn: Emitter, index: IndexAnalysis):
        self.fn = fn
        self.index = index

    def emit(self, e: E.Select, arms: Arms) -> _Val:
        fn = self.fn
        c = arms.value(e.cond)
        risky = self.index.contains_load(e.true_value) or self.index.contains_load(e.false_value)
        if not risky:
            return fn.select(c, arms.value(e.true_value), arms.value(e.false_value))
        if c.lanes is None:
            return self._branch(c, e.true_value, e.false_value, arms)
        # Lane-dependent choice: each side's loads run only on the lanes that pick it.
        vec = fn.vec
        assert vec is not None
        outer = vec.mask
        not_c = fn.binop("xor", c, _Val("true", "i1"))
        t_mask = c if outer is None else fn.binop("and", c, _Val(outer, "i1", c.lanes))
        f_mask = not_c if outer is None else fn.binop("and", not_c, _Val(outer, "i1", c.lanes))
        vec.mask = t_mask.ref
        t = arms.value(e.true_value)
        vec.mask = f_mask.ref
        f = arms.value(e.false_value)
        vec.mask = outer
        return fn.select(c, t, f)

    def _branch(self, c: _Val, te: E.Expr, fe: E.Expr, arms: Arms) -> _Val:
        """Scalar condition with loads on a side: real control flow, so the untaken side's
        (possibly out-of-bounds) loads never execute."""
        fn = self.fn
        lt, lf, lm = fn.label("sel_t"), fn.label("sel_f"), fn.label("sel_m")
        fn.do(f"br i1 {c.ref}, label %{lt}, label %{lf}")
        saved = arms.snapshot()
        fn.block(lt)
        # In vector code both arms are made vectors: the phi needs one type.
        lanes = fn.vec.lanes if fn.vec else None
        t = fn.splat(arms.value(te), lanes)
        t_end = fn.cur
        fn.br(lm)
        arms.restore(saved)
        fn.block(lf)
        f = fn.splat(arms.value(fe), lanes)
        f_end = fn.cur
        fn.br(lm)
        arms.restore(saved)
        fn.block(lm)
        r = fn.ins(f"phi {t.ty} [ {t.ref}, %{t_end} ], [ {f.ref}, %{f_end} ]")
        return _Val(r, t.st, t.lanes)
