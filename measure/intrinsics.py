"""Vectorisable math functions (exp, log, tanh, sigmoid, erf, pow) emitted as LLVM IR.

LLVM does not vectorise calls to libm's ``expf`` and friends, and an elementwise kernel whose
inner loop calls libm runs an order of magnitude slower than one using SIMD polynomials. So each
function is generated here as textual IR over a type that is either a scalar or an ``<N x T>``
vector: every operation is elementwise, so one generator serves both. The codegen asks a
``MathLibrary`` for ``(name, dtype, lanes)`` and gets an internal ``alwaysinline`` function that is
defined once per module.

Algorithms (all written for this project; the float32 coefficients were fitted offline with a
Lawson-iterated weighted least-squares fit in float64 against scipy's erf/erfcx/tanh/expm1 and
rounded to float32; tests/measure/test_intrinsics.py measures the resulting errors):

- exp: ``x = n ln2 + r`` (Cody-Waite split, exact with FMA), ``e^r`` by a degree-6 polynomial,
  ``2^n`` applied in two halves so that results in the subnormal range and overflow to inf come
  out of ordinary multiplications.
- log: ``x = m 2^e`` with ``m`` in [sqrt(1/2), sqrt(2)) from the bit pattern; ``log(m)`` via
  ``s = f/(2+f)``, ``log1p(f) = f - s (f - R(s^2))`` with the atanh series ``R``.
- tanh: odd polynomial below 0.5625 (where tanh < 1/2), else ``1 - 2/(e^{2|x|}+1)``.
- sigmoid: ``t = e^{-|x|}``; ``1/(1+t)`` or ``t/(1+t)``, which neither overflows nor cancels.
- erf: odd polynomial below 1; ``1 - e^{-x^2} erfcx(x)`` with ``erfcx`` a polynomial in ``1/x``
  and ``x^2`` split exactly (hi + lo) so that ``e^{-x^2}`` does not amplify its rounding; 1 above
  3.92 (where erf rounds to 1 in float32).
- pow (float32): ``|x|^y = exp(y log|x|)`` evaluated in float64 (vectorised exp/log below),
  which keeps the result accurate near overflow where a float32 ``y log x`` would lose ~7 bits;
  then the C ``powf`` special cases (zero, negative base with integer exponent, infinities, nan,
  ``pow(1, y) = pow(x, 0) = 1``) via selects.
- float64: exp and log use the same algorithms with Taylor polynomials of higher degree
  (vectorised); sigmoid builds on that exp; tanh, erf and pow call libm per lane, as float64
  speed is secondary.
"""
from __future__ import annotations

import math
import struct

FLOAT_TYPES = {"float32": "float", "float64": "double"}

# Fitted (see module docstring); each value is exactly a float32.
_EXP_F32 = [0.5, 0.16666577756404877, 0.04166685417294502, 0.008363140746951103,
            0.0013901280472055078]  # e^r = 1 + r + r^2 P(r), |r| <= ln2/2
_TANH_F32 = [-0.3333333134651184, 0.13333073258399963, -0.053901780396699905,
             0.021263476461172104, -0.006525762844830751]  # tanh x = x + x^3 P(x^2), |x| < 0.5625
_ERF_SMALL_F32 = [1.1283791065216064, -0.3761262595653534, 0.1128358542919159,
                  -0.026853810995817184, 0.005188327748328447, -0.0008010192541405559,
                  7.853857823647559e-05]  # erf x = x P(x^2), |x| < 1
_ERFCX_F32 = [0.0002649816160555929, 0.5591317415237427, 0.041366711258888245,
              -0.46904808282852173, 0.49057695269584656, -0.23224681615829468,
              0.014981592074036598, 0.03292861208319664,
              -0.01037212461233139]  # erfc(x) e^{x^2} = P(1/x), 1 <= x <= 3.92

_LN2 = "0.69314718055994530941723212145817656807550013436026"
_LOG2E = 1.4426950408889634


def _split_ln2(dtype: str) -> tuple[float, float]:
    """ln2 as hi + lo in ``dtype``; with FMA ``x - n*hi`` is exact for the reduced range."""
    from decimal import Decimal, getcontext

    getcontext().prec = 50
    ln2 = Decimal(_LN2)
    hi = _round(float(ln2), dtype)
    lo = _round(float(ln2 - Decimal(hi)), dtype)
    return hi, lo


def _round(v: float, dtype: str) -> float:
    if dtype == "float32":
        return struct.unpack("<f", struct.pack("<f", v))[0]
    return float(v)


def float_literal(value: float, dtype: str) -> str:
    """An LLVM float/double literal (hex form: exact, and valid for inf and nan)."""
    v = float(value)
    if math.isnan(v):
        return "0x7FF8000000000000"
    if dtype == "float32":
        v = _round(v, dtype)
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]


def vec_type(scalar: str, lanes: int | None) -> str:
    return scalar if not lanes else f"<{lanes} x {scalar}>"


def intrinsic_suffix(scalar: str, lanes: int | None) -> str:
    short = {"float": "f32", "double": "f64", "i1": "i1", "i8": "i8", "i32": "i32", "i64": "i64"}[scalar]
    return short if not lanes else f"v{lanes}{short}"


class _Gen:
    """Straight-line SSA emitter for one function body over a (possibly vector) float type."""

    def __init__(self, dtype: str, lanes: int | None, share: "_Gen | None" = None):
        self.dtype = dtype
        self.lanes = lanes
        self.fs = FLOAT_TYPES[dtype]
        self.is_ = "i32" if dtype == "float32" else "i64"
        self.T = vec_type(self.fs, lanes)
        self.I = vec_type(self.is_, lanes)
        self.B = vec_type("i1", lanes)
        # A generator over another type can emit into the same body (pow computes in float64).
        self.lines: list[str] = share.lines if share else []
        self._counter: list[int] = share._counter if share else [0]

    # -- plumbing
    def _v(self, text: str) -> str:
        self._counter[0] += 1
        name = f"%v{self._counter[0]}"
        self.lines.append(f"  {name} = {text}")
        return name

    def _splat(self, lit: str, scalar: str) -> str:
        return lit if not self.lanes else f"splat ({scalar} {lit})"

    def f(self, value: float) -> str:
        return self._splat(float_literal(value, self.dtype), self.fs)

    def i(self, value: int) -> str:
        return self._splat(str(int(value)), self.is_)

    def b(self, value: bool) -> str:
        return self._splat("true" if value else "false", "i1")

    def _intr(self, name: str, ty: str, scalar: str, *args: str) -> str:
        sfx = intrinsic_suffix(scalar, self.lanes)
        return self._v(f"call {ty} @llvm.{name}.{sfx}({', '.join(f'{ty} {a}' for a in args)})")

    # -- float arithmetic (no fast-math flags: error bounds below assume IEEE rounding per op)
    def add(self, a: str, b: str) -> str: return self._v(f"fadd {self.T} {a}, {b}")
    def sub(self, a: str, b: str) -> str: return self._v(f"fsub {self.T} {a}, {b}")
    def mul(self, a: str, b: str) -> str: return self._v(f"fmul {self.T} {a}, {b}")
    def div(self, a: str, b: str) -> str: return self._v(f"fdiv {self.T} {a}, {b}")
    def neg(self, a: str) -> str: return self._v(f"fneg {self.T} {a}")
    def fma(self, a: str, b: str, c: str) -> str: return self._intr("fma", self.T, self.fs, a, b, c)
    def fabs(self, a: str) -> str: return self._intr("fabs", self.T, self.fs, a)
    def trunc(self, a: str) -> str: return self._intr("trunc", self.T, self.fs, a)
    def roundeven(self, a: str) -> str: return self._intr("roundeven", self.T, self.fs, a)
    def minnum(self, a: str, b: str) -> str: return self._intr("minnum", self.T, self.fs, a, b)
    def maxnum(self, a: str, b: str) -> str: return self._intr("maxnum", self.T, self.fs, a, b)
    def copysign(self, a: str, b: str) -> str: return self._intr("copysign", self.T, self.fs, a, b)

    def horner(self, coeffs: list[float], x: str) -> str:
        acc = self.f(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.f(c))
        return acc

    def fcmp(self, pred: str, a: str, b: str) -> str: return self._v(f"fcmp {pred} {self.T} {a}, {b}")
    def sel(self, c: str, a: str, b: str) -> str: return self._v(f"select {self.B} {c}, {self.T} {a}, {self.T} {b}")
    def band(self, a: str, b: str) -> str: return self._v(f"and {self.B} {a}, {b}")
    def bor(self, a: str, b: str) -> str: return self._v(f"or {self.B} {a}, {b}")
    def bnot(self, a: str) -> str: return self._v(f"xor {self.B} {a}, {self.b(True)}")

    # -- integer views of the float bits
    def as_int(self, a: str) -> str: return self._v(f"bitcast {self.T} {a} to {self.I}")
    def as_float(self, a: str) -> str: return self._v(f"bitcast {self.I} {a} to {self.T}")
    def iop(self, op: str, a: str, b: str) -> str: return self._v(f"{op} {self.I} {a}, {b}")
    def ftoi(self, a: str) -> str: return self._v(f"fptosi {self.T} {a} to {self.I}")
    def itof(self, a: str) -> str: return self._v(f"sitofp {self.I} {a} to {self.T}")

    def call(self, fn: str, *args: str) -> str:
        return self._v(f"call {self.T} {fn}({', '.join(f'{self.T} {a}' for a in args)})")


class MathLibrary:
    """Collects the math functions one module needs and emits their definitions.

    ``fn_attrs`` is the attribute-group text (target-cpu/features) shared with the caller so the
    inliner sees compatible targets.
    """

    def __init__(self, fn_attrs: str = "nounwind"):
        self.fn_attrs = fn_attrs
        self._defs: dict[str, str] = {}
        self._decls: dict[str, str] = {}

    @staticmethod
    def symbol(name: str, dtype: str, lanes: int | None) -> str:
        return f"@__ansor_{name}_{'f32' if dtype == 'float32' else 'f64'}_{'v%d' % lanes if lanes else 's'}"

    def call(self, name: str, dtype: str, lanes: int | None) -> str:
        """Symbol of ``name`` over ``dtype`` (``lanes``=None: scalar); defines it on first use."""
        if dtype not in FLOAT_TYPES:
            raise TypeError(f"math function {name} needs a float type, got {dtype}")
        sym = self.symbol(name, dtype, lanes)
        if sym in self._defs:
            return sym
        self._defs[sym] = ""  # reserve first: generators call each other
        g = _Gen(dtype, lanes)
        builder = getattr(self, f"_build_{name}", None)
        if builder is None:
            raise ValueError(f"no vectorisable implementation of {name!r}")
        nargs = 2 if name == "pow" else 1
        args = ["%x", "%y"][:nargs]
        res = builder(g, *args)
        params = ", ".join(f"{g.T} {a}" for a in args)
        body = "\n".join(g.lines)
        self._defs[sym] = (f"define internal {g.T} {sym}({params}) alwaysinline {self.fn_attrs} {{\n"
                           f"{body}\n  ret {g.T} {res}\n}}\n")
        return sym

    def definitions(self) -> str:
        return "\n".join(list(self._decls.values()) + [d for d in self._defs.values() if d])

    # ---- generators ------------------------------------------------------------------------
    def _build_exp(self, g: _Gen, x: str) -> str:
        f32 = g.dtype == "float32"
        hi_clamp, lo_clamp = (89.0, -104.0) if f32 else (710.0, -746.0)
        # minnum/maxnum drop a NaN operand: the clamp is NaN-free, so fptosi below is defined.
        xc = g.maxnum(g.minnum(x, g.f(hi_clamp)), g.f(lo_clamp))
        nf = g.roundeven(g.mul(xc, g.f(_LOG2E)))
        ln2_hi, ln2_lo = _split_ln2(g.dtype)
        r = g.fma(nf, g.f(-ln2_hi), xc)
        r = g.fma(nf, g.f(-ln2_lo), r)
        if f32:
            q = g.horner(_EXP_F32, r)
        else:
            q = g.horner([1.0 / math.factorial(k) for k in range(2, 14)], r)
        p = g.add(g.fma(g.mul(r, r), q, r), g.f(1.0))
        # 2^n in two halves: each half stays a normal number for every n in the clamped range.
        n = g.ftoi(nf)
        n1 = g.iop("ashr", n, g.i(1))
        n2 = g.iop("sub", n, n1)
        bias, shift = (127, 23) if f32 else (1023, 52)
        s1 = g.as_float(g.iop("shl", g.iop("add", n1, g.i(bias)), g.i(shift)))
        s2 = g.as_float(g.iop("shl", g.iop("add", n2, g.i(bias)), g.i(shift)))
        res = g.mul(g.mul(p, s1), s2)
        return g.sel(g.fcmp("uno", x, x), x, res)

    def _build_log(self, g: _Gen, x: str) -> str:
        f32 = g.dtype == "float32"
        if f32:
            tiny, scale, scale_bits, sqrt_half_bits, shift = 2.0 ** -126, 2.0 ** 23, 23, 0x3F3504F3, 23
        else:
            tiny, scale, scale_bits, sqrt_half_bits, shift = 2.0 ** -1022, 2.0 ** 54, 54, 0x3FE6A09E667F3BCD, 52
        is_tiny = g.fcmp("olt", x, g.f(tiny))
        xs = g.sel(is_tiny, g.mul(x, g.f(scale)), x)
        ix = g.as_int(xs)
        # Subtracting the bits of sqrt(1/2) puts the mantissa m in [sqrt(1/2), sqrt(2)), so
        # log(m) is small and of either sign, and f = m - 1 is exact.
        e = g.iop("ashr", g.iop("sub", ix, g.i(sqrt_half_bits)), g.i(shift))
        m = g.as_float(g.iop("sub", ix, g.iop("shl", e, g.i(shift))))
        f = g.sub(m, g.f(1.0))
        s = g.div(f, g.add(f, g.f(2.0)))
        z = g.mul(s, s)
        terms = 4 if f32 else 10
        R = g.mul(z, g.horner([2.0 / (2 * k + 1) for k in range(1, terms + 1)], z))
        l1p = g.fma(g.neg(s), g.sub(f, R), f)
        adj = g._v(f"select {g.B} {is_tiny}, {g.I} {g.i(-scale_bits)}, {g.I} {g.i(0)}")
        ef = g.itof(g.iop("add", e, adj))
        ln2_hi, ln2_lo = _split_ln2(g.dtype)
        res = g.fma(ef, g.f(ln2_hi), g.fma(ef, g.f(ln2_lo), l1p))
        res = g.sel(g.fcmp("oeq", x, g.f(math.inf)), x, res)
        res = g.sel(g.fcmp("oeq", x, g.f(0.0)), g.f(-math.inf), res)
        # x < 0 or nan: nan ('ult' is true for unordered operands).
        return g.sel(g.fcmp("ult", x, g.f(0.0)), g.f(math.nan), res)

    def _build_tanh(self, g: _Gen, x: str) -> str:
        if g.dtype == "float64":
            return self._libm_lanes(g, "tanh", x)
        a = g.fabs(x)
        z = g.mul(a, a)
        small = g.fma(g.mul(a, z), g.horner(_TANH_F32, z), a)
        e = g.call(self.call("exp", g.dtype, g.lanes), g.add(a, a))
        large = g.sub(g.f(1.0), g.div(g.f(2.0), g.add(e, g.f(1.0))))
        res = g.sel(g.fcmp("olt", a, g.f(0.5625)), small, large)
        return g.copysign(res, x)  # odd function; also gives tanh(-0) = -0

    def _build_sigmoid(self, g: _Gen, x: str) -> str:
        t = g.call(self.call("exp", g.dtype, g.lanes), g.neg(g.fabs(x)))
        num = g.sel(g.fcmp("oge", x, g.f(0.0)), g.f(1.0), t)
        return g.div(num, g.add(g.f(1.0), t))

    def _build_erf(self, g: _Gen, x: str) -> str:
        if g.dtype == "float64":
            return self._libm_lanes(g, "erf", x)
        a = g.fabs(x)
        # a*c0 + a*z*Q(z) with c0 = 2/sqrt(pi) split hi+lo: the leading term is rounded once.
        z = g.mul(a, a)
        c0_lo = _round(2.0 / math.sqrt(math.pi) - _ERF_SMALL_F32[0], "float32")
        corr = g.fma(z, g.horner(_ERF_SMALL_F32[1:], z), g.f(c0_lo))
        small = g.fma(a, g.f(_ERF_SMALL_F32[0]), g.mul(a, corr))
        hi = g.mul(a, a)
        lo = g.fma(a, a, g.neg(hi))  # a*a == hi + lo exactly
        poly = g.horner(_ERFCX_F32, g.div(g.f(1.0), a))
        eg = g.mul(g.call(self.call("exp", g.dtype, g.lanes), g.neg(hi)), poly)
        erfc = g.fma(g.neg(eg), lo, eg)  # e^{-hi-lo} ~= e^{-hi} (1 - lo)
        large = g.sub(g.f(1.0), erfc)
        res = g.sel(g.fcmp("olt", a, g.f(1.0)), small, large)
        res = g.sel(g.fcmp("oge", a, g.f(3.92)), g.f(1.0), res)
        return g.copysign(res, x)

    def _build_pow(self, g: _Gen, x: str, y: str) -> str:
        if g.dtype == "float64":
            return self._libm_lanes(g, "pow", x, y)
        d = _Gen("float64", g.lanes, share=g)
        xd = d._v(f"fpext {g.T} {x} to {d.T}")
        yd = d._v(f"fpext {g.T} {y} to {d.T}")
        lg = d.call(self.call("log", "float64", g.lanes), d.fabs(xd))
        mag = d.call(self.call("exp", "float64", g.lanes), d.mul(yd, lg))
        r = g._v(f"fptrunc {d.T} {mag} to {g.T}")
        y_int = g.fcmp("oeq", g.trunc(y), y)
        half = g.mul(y, g.f(0.5))
        y_odd = g.band(y_int, g.fcmp("une", g.trunc(half), half))
        x_signbit = g._v(f"icmp slt {g.I} {g.as_int(x)}, {g.i(0)}")  # also -0 and -inf
        r = g.sel(g.band(x_signbit, y_odd), g.neg(r), r)
        finite_neg = g.band(g.fcmp("olt", x, g.f(0.0)), g.fcmp("ogt", x, g.f(-math.inf)))
        y_finite = g.fcmp("olt", g.fabs(y), g.f(math.inf))
        r = g.sel(g.band(finite_neg, g.band(g.bnot(y_int), y_finite)), g.f(math.nan), r)
        one = g.bor(g.fcmp("oeq", x, g.f(1.0)), g.fcmp("oeq", y, g.f(0.0)))
        one = g.bor(one, g.band(g.fcmp("oeq", x, g.f(-1.0)), g.fcmp("oeq", g.fabs(y), g.f(math.inf))))
        return g.sel(one, g.f(1.0), r)

    def _libm_lanes(self, g: _Gen, fname: str, *args: str) -> str:
        """Call libm's double ``fname`` on each lane (float64 only, where speed is secondary)."""
        sig = ", ".join(["double"] * len(args))
        self._decls[fname] = f"declare double @{fname}({sig}) nounwind\n"
        if not g.lanes:
            return g._v(f"call double @{fname}({', '.join(f'double {a}' for a in args)})")
        acc = "poison"
        for lane in range(g.lanes):
            elems = [g._v(f"extractelement {g.T} {a}, i64 {lane}") for a in args]
            r = g._v(f"call double @{fname}({', '.join(f'double {e}' for e in elems)})")
            acc = g._v(f"insertelement {g.T} {acc}, double {r}, i64 {lane}")
        return acc
