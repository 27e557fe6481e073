"""Floor division and modulo with numpy's semantics (integer and float), which LLVM's
truncating ``sdiv``/``srem``/``frem`` do not have and which must never trap."""
from __future__ import annotations

from compute import expr as E

from .. import intrinsics as I
from .emitter import Emitter
from .values import _Val


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class Arithmetic:
    """``//`` and ``%`` on values already emitted into ``fn``."""

    def __init__(self, fn: Emitter):
        self.fn = fn

    def int_floor(self, op: str, a: _Val, b: _Val, b_expr: E.Expr, signed: bool) -> _Val:
        """Floor division / modulo. Division by zero gives 0 (as numpy) instead of trapping, and
        INT_MIN // -1 wraps instead of trapping."""
        fn = self.fn
        st = a.st
        zero = _Val("0", st)
        if isinstance(b_expr, E.Const):
            c = int(b_expr.value)
            if c == 0:
                return fn.splat(zero, a.lanes)
            if not signed:
                return fn.binop("udiv" if op == "floordiv" else "urem", a, b)
            if c == -1:
                return fn.binop("sub", zero, a) if op == "floordiv" else fn.splat(zero, a.lanes)
            if _is_pow2(c):
                k = c.bit_length() - 1
                if op == "floordiv":
                    return fn.binop("ashr", a, _Val(str(k), st))
                return fn.binop("and", a, _Val(str(c - 1), st))
            q = fn.binop("sdiv", a, b)
            r = fn.binop("srem", a, b)
            fix = fn.cmp("icmp slt" if c > 0 else "icmp sgt", r, zero)
            if op == "floordiv":
                return fn.binop("sub", q, fn.conv("zext", fix, st))
            return fn.select(fix, fn.binop("add", r, b), r)
        if not signed:
            dz = fn.cmp("icmp eq", b, zero)
            safe = fn.select(dz, _Val("1", st), b)
            r = fn.binop("udiv" if op == "floordiv" else "urem", a, safe)
            return fn.select(dz, zero, r)
        dz = fn.cmp("icmp eq", b, zero)
        dm1 = fn.cmp("icmp eq", b, _Val("-1", st))
        bad = fn.binop("or", dz, dm1)
        safe = fn.select(bad, _Val("1", st), b)
        q = fn.binop("sdiv", a, safe)
        r = fn.binop("srem", a, safe)
        # Truncated -> floor: adjust when the remainder is non-zero and its sign differs from b.
        nz = fn.cmp("icmp ne", r, zero)
        sign_diff = fn.cmp("icmp slt", fn.binop("xor", r, safe), zero)
        fix = fn.binop("and", nz, sign_diff)
        if op == "floordiv":
            qf = fn.binop("sub", q, fn.conv("zext", fix, st))
            return fn.select(dz, zero, fn.select(dm1, fn.binop("sub", zero, a), qf))
        rf = fn.select(fix, fn.binop("add", r, safe), r)
        return fn.select(bad, zero, rf)

    def float_floor(self, op: str, a: _Val, b: _Val) -> _Val:
        """numpy's float floor_divide / remainder (npy_divmod), step for step."""
        fn = self.fn
        st = a.st
        d = "float32" if st == "float" else "float64"
        z = _Val(I.float_literal(0.0, d), st)
        one = _Val(I.float_literal(1.0, d), st)
        a, b = fn.unify(a, b)
        mod = fn.binop("frem", a, b)
        b_zero = fn.cmp("fcmp oeq", b, z)
        mod_nz = fn.cmp("fcmp une", mod, z)
        fix = fn.binop("and", mod_nz, fn.binop("xor", fn.cmp("fcmp olt", b, z), fn.cmp("fcmp olt", mod, z)))
        if op == "floormod":
            m = fn.select(fix, fn.binop("fadd", mod, b), mod)
            m = fn.select(mod_nz, m, fn.intr("copysign", [z, b]))
            return fn.select(b_zero, mod, m)
        div = fn.binop("fdiv", fn.binop("fsub", a, mod), b)
        div = fn.select(fix, fn.binop("fsub", div, one), div)
        fl = fn.intr("floor", [div])
        half = _Val(I.float_literal(0.5, d), st)
        fl = fn.select(fn.cmp("fcmp ogt", fn.binop("fsub", div, fl), half), fn.binop("fadd", fl, one), fl)
        quot = fn.binop("fdiv", a, b)
        fl = fn.select(fn.cmp("fcmp une", div, z), fl, fn.intr("copysign", [z, quot]))
        return fn.select(b_zero, quot, fl)
