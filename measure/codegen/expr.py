"""Expression emission: each DSL expression node as LLVM instructions in its own dtype, or
widened to i64 for index arithmetic, memoised and emitted from an explicit stack (no recursion
depth limit). Division and modulo are ``arith``'s, casts ``cast``'s, loads ``memory``'s and
selects whose arms load ``guarded_select``'s: collaborators this emitter is handed; the two that
emit sub-expressions (a load's indices, a select's arms) are handed back this emitter's methods
on each call.
"""
from __future__ import annotations

from compute import dtype as dt
from compute import expr as E
from compute import loop_ir as L

from .. import intrinsics as I
from .affine import IndexAnalysis
from .arith import Arithmetic
from .cast import cast
from .emitter import Emitter
from .guarded_select import GuardedSelect
from .memory import MemoryAccess
from .values import _INDEX_DTYPES, _SCALAR_TY, _Val


def reduction_update(s: L.Store) -> E.Expr | None:
    """The combining operation of a float reduction update ``buf[i] = buf[i] (+|max|min) x``
    (possibly under ``select(where, update, buf[i])``), or None."""
    if not dt.is_float(s.buffer.dtype):
        return None
    e = s.value
    if isinstance(e, E.Select):
        e = e.true_value
    if not (isinstance(e, E.Binary) and e.op in ("add", "max", "min")):
        return None
    acc = e.a
    if isinstance(acc, L.BufferLoad) and acc.buffer is s.buffer and len(acc.indices) == len(
            s.indices) and all(x is y for x, y in zip(acc.indices, s.indices)):
        return e
    return None


class Expressions:
    """``value``/``wide`` of expressions in ``fn``: the walk, the memo, and the per-node emission
    of variables, arithmetic, comparisons and math calls."""

    def __init__(self, fn: Emitter, index: IndexAnalysis, arith: Arithmetic, memory: MemoryAccess,
                 selects: GuardedSelect):
        self.fn = fn
        self.index = index
        self.arith = arith
        self.memory = memory
        self.selects = selects
        # (id, wide, lane mask) -> (node, value): the values emitted so far that are still
        # available (dominate the current point); forgotten at statement, loop and block
        # boundaries by the emitters that make them.
        self.memo: dict[tuple, tuple[E.Expr, _Val]] = {}
        self._reduce_update: E.Expr | None = None  # the combining op of the store being emitted

    def forget(self) -> None:
        """Forget every emitted value (a new statement, or a block they may not dominate)."""
        self.memo = {}

    def snapshot(self) -> dict:
        """The emitted values available now, for ``restore`` (``guarded_select.Arms``)."""
        return dict(self.memo)

    def restore(self, saved: dict) -> None:
        """Back to the values of ``snapshot``: those emitted since were in another block."""
        self.memo = dict(saved)

    def stored(self, s: L.Store) -> _Val:
        """The value ``s`` writes; its combining operation reassociable if ``s`` is a reduction
        update (``reassoc``: see the package docstring)."""
        self._reduce_update = reduction_update(s)
        try:
            return self.value(s.value)
        finally:
            self._reduce_update = None

    def value(self, e: E.Expr) -> _Val:
        """``e`` in its own dtype (vector if it depends on the lane variable)."""
        return self._emit(e, wide=False)

    def wide(self, e: E.Expr) -> _Val:
        """Integer ``e`` as i64 (index arithmetic in i64; other integers sign/zero-extended)."""
        return self._emit(e, wide=True)

    def _emit(self, e: E.Expr, wide: bool) -> _Val:
        mask = self.fn.vec.mask if self.fn.vec else None
        hit = self.memo.get((id(e), wide, mask))
        if hit is not None and hit[0] is e:
            return hit[1]
        # Emit the operands first, children before parents, from an explicit stack: each node's
        # own emission then finds its operands memoised, so no depth of expression recurses. The
        # order is the one plain recursion would give, so the IR is the same.
        stack = [(e, wide)]
        while stack:
            n, w = stack[-1]
            key = (id(n), w, mask)
            hit = self.memo.get(key)
            if hit is not None and hit[0] is n:
                stack.pop()
                continue
            pending = []
            for c, cw in self._operands(n, w):
                h = self.memo.get((id(c), cw, mask))
                if h is None or h[0] is not c:
                    pending.append((c, cw))
            if pending:
                stack.extend(reversed(pending))
                continue
            stack.pop()
            self.memo[key] = (n, self._emit_node(n, w))
        return self.memo[(id(e), wide, mask)][1]

    def _operands(self, e: E.Expr, wide: bool) -> list[tuple[E.Expr, bool]]:
        """What ``_emit_node(e, wide)`` will ask for, in order, as (operand, wide) pairs. Operands
        emitted under another mask or in their own blocks (a select's arms that contain loads, a
        load's addresses) are left to the node itself."""
        if wide:
            if not self.index.is_index(e):
                return [(e, False)]
            if isinstance(e, E.Cast):
                return [(e.value, True)]
            if isinstance(e, E.Binary):
                return [(e.a, True), (e.b, True)]
            return []
        if isinstance(e, E.Binary):
            return [(e.a, False), (e.b, False)]
        if isinstance(e, E.Compare):
            w = e.a.dtype in _INDEX_DTYPES and self.index.is_index(e.a) and self.index.is_index(e.b)
            return [(e.a, w), (e.b, w)]
        if isinstance(e, (E.Unary, E.Cast)):
            return [(e.children()[0], False)]
        if isinstance(e, E.Call):
            return [(a, False) for a in e.args]
        if isinstance(e, E.Select):
            if self.index.contains_load(e.true_value) or self.index.contains_load(e.false_value):
                return [(e.cond, False)]
            return [(e.cond, False), (e.true_value, False), (e.false_value, False)]
        return []

    def _emit_node(self, e: E.Expr, wide: bool) -> _Val:
        if wide:
            if self.index.is_index(e):
                return self._emit_index(e)
            v = self._emit(e, wide=False)
            if v.st != "i64":
                op = "zext" if e.dtype in ("uint8", "bool") else "sext"
                v = self.fn.conv(op, v, "i64")
            return v
        return self._emit_value(e)

    def _var(self, v: E.Var) -> _Val:
        fn = self.fn
        if fn.vec is not None and v is fn.vec.var:
            n = fn.vec.lanes
            base = self.wide(fn.vec.base_var)
            iota = "<" + ", ".join(f"i64 {k}" for k in range(n)) + ">"
            if base.ref.lstrip("-").isdigit():
                b = int(base.ref)
                return _Val("<" + ", ".join(f"i64 {b + k}" for k in range(n)) + ">", "i64", n)
            return fn.binop("add nuw nsw", fn.splat(base, n), _Val(iota, "i64", n))
        hit = fn.env.get(id(v))
        if hit is None:
            raise ValueError(f"variable {v.name} is used outside the loop that defines it")
        return _Val(hit[1], "i64")

    def _emit_index(self, e: E.Expr) -> _Val:
        if isinstance(e, E.Var):
            return self._var(e)
        if isinstance(e, E.Const):
            return _Val(str(int(e.value)), "i64")
        if isinstance(e, E.Cast):
            return self.wide(e.value)
        assert isinstance(e, E.Binary)
        a, b = self.wide(e.a), self.wide(e.b)
        if e.op == "add":
            return self.fn.binop("add nsw", a, b)
        if e.op == "sub":
            return self.fn.binop("sub nsw", a, b)
        if e.op == "mul":
            return self.fn.binop("mul nsw", a, b)
        if e.op in ("floordiv", "floormod"):
            return self.arith.int_floor(e.op, a, b, e.b, signed=True)
        if e.op in ("min", "max"):
            return self.fn.intr("smin" if e.op == "min" else "smax", [a, b])
        raise ValueError(f"unsupported index operator {e.op}")

    def _emit_value(self, e: E.Expr) -> _Val:
        if isinstance(e, E.Const):
            return self.fn.const(e.value, e.dtype)
        if isinstance(e, E.Var):
            v = self._var(e)
            st = _SCALAR_TY[e.dtype]
            return v if st == "i64" else self.fn.conv("trunc", v, st)
        if isinstance(e, L.BufferLoad):
            return self.memory.load(e, self.wide)
        if isinstance(e, E.Binary):
            return self._binary(e)
        if isinstance(e, E.Compare):
            return self._compare(e)
        if isinstance(e, E.Unary):
            a = self.value(e.a)
            if e.op == "not":
                return self.fn.binop("xor", a, _Val("true", "i1"))
            if dt.is_float(e.dtype):
                r = self.fn.ins(f"fneg {a.ty} {a.ref}")
                return _Val(r, a.st, a.lanes)
            return self.fn.binop("sub", _Val("0", a.st), a)
        if isinstance(e, E.Call):
            return self._call(e)
        if isinstance(e, E.Select):
            return self.selects.emit(e, self)
        if isinstance(e, E.Cast):
            return cast(self.fn, self.value(e.value), e.value.dtype, e.dtype)
        raise TypeError(f"the backend cannot compile {type(e).__name__} nodes (`{e}`); "
                        "TensorLoad and Reduce must be lowered first")

    def _binary(self, e: E.Binary) -> _Val:
        d = e.dtype
        if e.op in ("and", "or"):
            return self.fn.binop(e.op, self.value(e.a), self.value(e.b))
        a, b = self.value(e.a), self.value(e.b)
        if dt.is_float(d):
            re_ = " reassoc" if e is self._reduce_update else ""
            if e.op in ("add", "sub", "mul"):
                return self.fn.binop(f"f{e.op}{re_} contract", a, b)
            if e.op == "div":
                return self.fn.binop("fdiv", a, b)
            if e.op in ("min", "max"):
                # NaN-propagating like np.minimum/np.maximum; the sign of a zero result is free.
                return self.fn.intr("minimum" if e.op == "min" else "maximum", [a, b],
                                 flags="nsz" + re_)
            return self.arith.float_floor(e.op, a, b)
        signed = dt.is_signed(d)
        if e.op in ("add", "sub", "mul"):
            return self.fn.binop(e.op, a, b)  # wraps: no nsw/nuw
        if e.op in ("min", "max"):
            name = ("s" if signed else "u") + e.op
            return self.fn.intr(name, [a, b])
        if e.op in ("floordiv", "floormod"):
            return self.arith.int_floor(e.op, a, b, e.b, signed)
        raise ValueError(f"operator {e.op} is not defined on {d}")

    def _compare(self, e: E.Compare) -> _Val:
        d = e.a.dtype
        if d in _INDEX_DTYPES and self.index.is_index(e.a) and self.index.is_index(e.b):
            a, b = self.wide(e.a), self.wide(e.b)
            signed = True
        else:
            a, b = self.value(e.a), self.value(e.b)
            signed = dt.is_signed(d)
        if dt.is_float(d):
            pred = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}[e.op]
            return self.fn.cmp(f"fcmp {pred}", a, b)
        if e.op in ("eq", "ne"):
            return self.fn.cmp(f"icmp {e.op}", a, b)
        pred = ("s" if signed else "u") + e.op
        return self.fn.cmp(f"icmp {pred}", a, b)

    def _call(self, e: E.Call) -> _Val:
        d = e.dtype
        n = e.name
        if n not in E.MATH_FUNCS:  # the name becomes part of a symbol: only known functions
            raise ValueError(f"unknown math function {n!r}")
        args = [self.value(a) for a in e.args]
        if n == "abs":
            if dt.is_float(d):
                return self.fn.intr("fabs", args)
            if d == "uint8":
                return args[0]
            return self.fn.intr("abs", args, extra=", i1 false")
        if n in ("sqrt", "floor", "ceil", "trunc", "round"):
            return self.fn.intr(n, args)
        if n == "rsqrt":
            s = self.fn.intr("sqrt", args)
            return self.fn.binop("fdiv", _Val(I.float_literal(1.0, d), s.st), s)
        lanes = args[0].lanes
        if len(args) == 2:
            args = self.fn.unify(*args)
            lanes = args[0].lanes
        sym = self.fn.mod.math.call(n, d, lanes)
        ty = args[0].ty
        r = self.fn.ins(f"call {ty} {sym}({', '.join(f'{ty} {a.ref}' for a in args)})")
        return _Val(r, args[0].st, lanes)
