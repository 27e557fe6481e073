"""Floor division and modulo with numpy's semantics (integer and float), which LLVM's
truncating ``sdiv``/``srem``/``frem`` do not have and which must never trap."""
from __future__ import annotations

from compute import expr as E

from .. import intrinsics as I
from .emitter import Emitter
from .values import _Val


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class Arithmetic(Emitter):
    """``//`` and ``%`` on emitted values."""

    def _int_floor(self, op: str, a: _Val, b: _Val, b_expr: E.Expr, signed: bool) -> _Val:
        """Floor division / modulo. Division by zero gives 0 (as numpy) instead of trapping, and
        INT_MIN // -1 wraps instead of trapping."""
        st = a.st
        zero = _Val("0", st)
        if isinstance(b_expr, E.Const):
            c = int(b_expr.value)
            if c == 0:
                return self.splat(zero, a.lanes)
            if not signed:
                return self.binop("udiv" if op == "floordiv" else "urem", a, b)
            if c == -1:
                return self.binop("sub", zero, a) if op == "floordiv" else self.splat(zero, a.lanes)
            if _is_pow2(c):
                k = c.bit_length() - 1
                if op == "floordiv":
                    return self.binop("ashr", a, _Val(str(k), st))
                return self.binop("and", a, _Val(str(c - 1), st))
            q = self.binop("sdiv", a, b)
            r = self.binop("srem", a, b)
            fix = self.cmp("icmp slt" if c > 0 else "icmp sgt", r, zero)
            if op == "floordiv":
                return self.binop("sub", q, self.conv("zext", fix, st))
            return self.select(fix, self.binop("add", r, b), r)
        if not signed:
            dz = self.cmp("icmp eq", b, zero)
            safe = self.select(dz, _Val("1", st), b)
            r = self.binop("udiv" if op == "floordiv" else "urem", a, safe)
            return self.select(dz, zero, r)
        dz = self.cmp("icmp eq", b, zero)
        dm1 = self.cmp("icmp eq", b, _Val("-1", st))
        bad = self.binop("or", dz, dm1)
        safe = self.select(bad, _Val("1", st), b)
        q = self.binop("sdiv", a, safe)
        r = self.binop("srem", a, safe)
        # Truncated -> floor: adjust when the remainder is non-zero and its sign differs from b.
        nz = self.cmp("icmp ne", r, zero)
        sign_diff = self.cmp("icmp slt", self.binop("xor", r, safe), zero)
        fix = self.binop("and", nz, sign_diff)
        if op == "floordiv":
            qf = self.binop("sub", q, self.conv("zext", fix, st))
            return self.select(dz, zero, self.select(dm1, self.binop("sub", zero, a), qf))
        rf = self.select(fix, self.binop("add", r, safe), r)
        return self.select(bad, zero, rf)

    def _float_floor(self, op: str, a: _Val, b: _Val) -> _Val:
        """numpy's float floor_divide / remainder (npy_divmod), step for step."""
        st = a.st
        d = "float32" if st == "float" else "float64"
        z = _Val(I.float_literal(0.0, d), st)
        one = _Val(I.float_literal(1.0, d), st)
        a, b = self.unify(a, b)
        mod = self.binop("frem", a, b)
        b_zero = self.cmp("fcmp oeq", b, z)
        mod_nz = self.cmp("fcmp une", mod, z)
        fix = self.binop("and", mod_nz, self.binop("xor", self.cmp("fcmp olt", b, z), self.cmp("fcmp olt", mod, z)))
        if op == "floormod":
            m = self.select(fix, self.binop("fadd", mod, b), mod)
            m = self.select(mod_nz, m, self.intr("copysign", [z, b]))
            return self.select(b_zero, mod, m)
        div = self.binop("fdiv", self.binop("fsub", a, mod), b)
        div = self.select(fix, self.binop("fsub", div, one), div)
        fl = self.intr("floor", [div])
        half = _Val(I.float_literal(0.5, d), st)
        fl = self.select(self.cmp("fcmp ogt", self.binop("fsub", div, fl), half), self.binop("fadd", fl, one), fl)
        quot = self.binop("fdiv", a, b)
        fl = self.select(self.cmp("fcmp une", div, z), fl, self.intr("copysign", [z, quot]))
        return self.select(b_zero, quot, fl)
