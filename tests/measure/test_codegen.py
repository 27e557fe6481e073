"""The LLVM backend against numpy: every expression kind and dtype, the loop kinds (serial,
vectorized with its fallback, unrolled, parallel), allocation, guards, and checks on the
generated code itself (FMA, vector instructions, no libm calls in vector loops)."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compute import expr as E
from compute import loop_ir as L
from measure.codegen import codegen
from measure.kernel import build_func

from .helpers import elementwise, run, tiled_elementwise, two_pass

RNG = np.random.default_rng(1234)
NUMERIC = ["float32", "float64", "int8", "uint8", "int32", "int64"]
KINDS = ["serial", "vectorized"]


def rand(dtype: str, n: int, lo: float = -50, hi: float = 50) -> np.ndarray:
    if dtype == "bool":
        return RNG.integers(0, 2, n).astype(bool)
    if dtype in ("float32", "float64"):
        return RNG.uniform(lo, hi, n).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, n, dtype=np.int64).astype(dtype)


# ---- arithmetic over every dtype ------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", NUMERIC)
def test_arithmetic_all_dtypes(dtype, kind):
    n = 17
    a, b = rand(dtype, n), rand(dtype, n)
    cases = {
        "add": (lambda x, y: x + y, lambda x, y: x + y),
        "sub": (lambda x, y: x - y, lambda x, y: x - y),
        "mul": (lambda x, y: x * y, lambda x, y: x * y),
        "min": (lambda x, y: E.binary("min", x, y), np.minimum),
        "max": (lambda x, y: E.binary("max", x, y), np.maximum),
    }
    with np.errstate(all="ignore"):
        for name, (build, ref) in cases.items():
            k = elementwise(build, [dtype, dtype], dtype, n, kind)
            np.testing.assert_array_equal(run(k, a, b), ref(a, b), err_msg=f"{name} {dtype} {kind}")
        k = elementwise(lambda x: -x, [dtype], dtype, n, kind)
        np.testing.assert_array_equal(run(k, a), -a)
        k = elementwise(lambda x: abs(x), [dtype], dtype, n, kind)
        np.testing.assert_array_equal(run(k, a), np.abs(a))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_unary_and_div(dtype, kind):
    n = 33
    a = rand(dtype, n)
    a[:6] = [0.5, -0.5, 1.5, -2.5, 0.0, -0.0]
    b = rand(dtype, n)
    pos = np.abs(a) + dtype_cast(0.25, dtype)
    k = elementwise(lambda x, y: x / y, [dtype, dtype], dtype, n, kind)
    np.testing.assert_array_equal(run(k, a, b), a / b)
    for fname, ref in [("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc)]:
        k = elementwise(lambda x, f=fname: E.call(f, x), [dtype], dtype, n, kind)
        np.testing.assert_array_equal(run(k, a), ref(a), err_msg=fname)
    k = elementwise(lambda x: E.call("sqrt", x), [dtype], dtype, n, kind)
    np.testing.assert_array_equal(run(k, pos), np.sqrt(pos))
    k = elementwise(lambda x: E.call("rsqrt", x), [dtype], dtype, n, kind)
    one = np.array(1, dtype)
    np.testing.assert_array_equal(run(k, pos), one / np.sqrt(pos))  # exact division, no rcp approx


def dtype_cast(v: float, dtype: str):
    return np.array(v, dtype)[()]


@pytest.mark.parametrize("kind", KINDS)
def test_round_half_away_from_zero(kind):
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 3.7, -3.7, 8388609.0,
                  -0.0, 1e30, np.inf, -np.inf, np.nan, 2.4999998], np.float32)
    k = elementwise(lambda v: E.call("round", v), ["float32"], "float32", len(x), kind)
    ref = np.copysign(np.floor(np.abs(x.astype(np.float64)) + 0.5), x).astype(np.float32)
    np.testing.assert_array_equal(run(k, x), ref)


def test_float_min_max_propagate_nan():
    x = np.array([np.nan, 1.0, -np.inf, 2.0], np.float32)
    y = np.array([0.0, np.nan, 5.0, 2.0], np.float32)
    for kind in KINDS:
        k = elementwise(lambda a, b: E.binary("max", a, b), ["float32"] * 2, "float32", 4, kind)
        np.testing.assert_array_equal(run(k, x, y), np.maximum(x, y))
        k = elementwise(lambda a, b: E.binary("min", a, b), ["float32"] * 2, "float32", 4, kind)
        np.testing.assert_array_equal(run(k, x, y), np.minimum(x, y))


# ---- integer semantics ---------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_integer_wraparound(kind):
    a8 = np.array([100, -128, 127, -1] * 4, np.int8)
    k = elementwise(lambda x: x + x, ["int8"], "int8", 16, kind)
    np.testing.assert_array_equal(run(k, a8), a8 + a8)
    k = elementwise(lambda x: x * E.const(3, "int8"), ["int8"], "int8", 16, kind)
    np.testing.assert_array_equal(run(k, a8), a8 * np.int8(3))
    u8 = np.array([0, 1, 200, 255] * 4, np.uint8)
    k = elementwise(lambda x: x - E.const(2, "uint8"), ["uint8"], "uint8", 16, kind)
    np.testing.assert_array_equal(run(k, u8), u8 - np.uint8(2))
    i32 = np.array([2**31 - 1, -2**31, 65536, -7] * 4, np.int32)
    k = elementwise(lambda x: x * x + x, ["int32"], "int32", 16, kind)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(run(k, i32), i32 * i32 + i32)
    k = elementwise(lambda x: -x, ["int32"], "int32", 16, kind)
    np.testing.assert_array_equal(run(k, i32), -i32)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_floordiv_floormod_signed_variable(dtype, kind):
    n = 64
    a = RNG.integers(-100, 101, n).astype(dtype)
    b = RNG.integers(-9, 10, n).astype(dtype)
    b[b == 0] = 3
    b[:4] = [0, 0, -1, -1]  # numpy: x // 0 == x % 0 == 0
    a[:4] = [7, -7, 5, np.iinfo(dtype).min]
    fd = elementwise(lambda x, y: x // y, [dtype, dtype], dtype, n, kind)
    fm = elementwise(lambda x, y: x % y, [dtype, dtype], dtype, n, kind)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run(fd, a, b), np.floor_divide(a, b))
        np.testing.assert_array_equal(run(fm, a, b), np.remainder(a, b))
    # and against Python's own // and % on the non-degenerate part
    py_fd = [int(x) // int(y) for x, y in zip(a[4:], b[4:])]
    py_fm = [int(x) % int(y) for x, y in zip(a[4:], b[4:])]
    assert run(fd, a, b)[4:].tolist() == py_fd
    assert run(fm, a, b)[4:].tolist() == py_fm


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("divisor", [1, 2, 3, 4, 7, 16, -1, -3, -4, 0])
def test_floordiv_floormod_constant_divisors(divisor, kind):
    a = np.arange(-24, 24, dtype=np.int32)
    fd = elementwise(lambda x: x // divisor, ["int32"], "int32", len(a), kind)
    fm = elementwise(lambda x: x % divisor, ["int32"], "int32", len(a), kind)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run(fd, a), np.floor_divide(a, np.int32(divisor)))
        np.testing.assert_array_equal(run(fm, a), np.remainder(a, np.int32(divisor)))


def test_floordiv_unsigned():
    a = np.arange(0, 256, dtype=np.uint8)
    b = np.array(list(range(0, 16)) * 16, np.uint8)
    for kind in KINDS:
        fd = elementwise(lambda x, y: x // y, ["uint8"] * 2, "uint8", 256, kind)
        fm = elementwise(lambda x, y: x % y, ["uint8"] * 2, "uint8", 256, kind)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(run(fd, a, b), np.floor_divide(a, b))
            np.testing.assert_array_equal(run(fm, a, b), np.remainder(a, b))


@pytest.mark.parametrize("kind", KINDS)
def test_floordiv_floormod_in_index_expressions(kind):
    # Loop-variable arithmetic is evaluated in i64 for addressing: floor semantics must hold
    # for the negative intermediate values.
    n = 16
    A = L.Buffer("A", (8,), "float32")
    Out = L.Buffer("Out", (n,), "float32")
    i = E.var("i")
    val = A.load(E.binary("floormod", i - 7, 5)) + A.load(E.binary("floordiv", i - 7, 3) + 3)
    cond = E.binary("floordiv", i - 7, 2) < 0  # guard computed with floor semantics too
    body = L.For(i, n, kind, L.Store(Out, (i,), E.select(cond, val, -val)))
    k = build_func(L.PrimFunc("idx", (A, Out), body))
    a = RNG.standard_normal(8).astype(np.float32)
    exp = np.array([(a[(j - 7) % 5] + a[(j - 7) // 3 + 3]) * (1 if (j - 7) // 2 < 0 else -1)
                    for j in range(n)], np.float32)
    np.testing.assert_array_equal(run(k, a), exp)


@pytest.mark.parametrize("kind", KINDS)
def test_float_floordiv_floormod_like_numpy(kind):
    a = np.array([7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 3.0, 1.0, np.inf, 5.0, np.nan, 1e-30] * 2, np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, -3.0, 0.0, 0.1, 2.0, np.inf, 1.0, 3.0] * 2, np.float32)
    fd = elementwise(lambda x, y: x // y, ["float32"] * 2, "float32", len(a), kind)
    fm = elementwise(lambda x, y: x % y, ["float32"] * 2, "float32", len(a), kind)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run(fd, a, b), np.floor_divide(a, b))
        got, exp = run(fm, a, b), np.remainder(a, b)
    np.testing.assert_array_equal(got, exp)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(exp))


# ---- casts -------------------------------------------------------------------------------------

CAST_VALUES = {
    "float32": np.array([-2.7, -0.5, 0.0, -0.0, 0.5, 2.7, 100.9, -100.9, 255.0, 127.0, 3.0, np.nan,
                         1e6, -1e6, 42.0, 1.0], np.float32),
    "float64": np.array([-2.7, -0.5, 0.0, -0.0, 0.5, 2.7, 100.9, -100.9, 255.0, 127.0, 3.0, np.nan,
                         1e6, -1e6, 42.0, 1.0], np.float64),
    "int8": np.array([-128, -5, 0, 5, 127, 1, -1, 2] * 2, np.int8),
    "uint8": np.array([0, 1, 127, 128, 200, 255, 2, 3] * 2, np.uint8),
    "int32": np.array([-2**31, -300, -1, 0, 1, 300, 2**31 - 1, 70000] * 2, np.int32),
    "int64": np.array([-2**63, -2**40, -1, 0, 1, 2**40 + 7, 2**63 - 1, 300] * 2, np.int64),
    "bool": np.array([True, False] * 8),
}
ALL = NUMERIC + ["bool"]


def _numpy_cast(x: np.ndarray, dst: str) -> np.ndarray | None:
    """numpy's astype where it is defined: float -> int only for values representable in the
    target (elsewhere C leaves it undefined), nan -> int undefined."""
    if x.dtype.kind == "f" and dst not in ("float32", "float64", "bool"):
        info = np.iinfo(dst)
        ok = np.isfinite(x) & (np.trunc(x) >= info.min) & (np.trunc(x) <= info.max)
        return np.where(ok, np.trunc(np.where(ok, x, 0)).astype(dst), 0), ok
    with np.errstate(all="ignore"):
        return x.astype(dst), np.ones(len(x), bool)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("src", ALL)
def test_casts(src, kind):
    x = CAST_VALUES[src]
    for dst in ALL:
        if dst == src:
            continue
        k = elementwise(lambda v: E.cast(v, dst), [src], dst, len(x), kind)
        got = run(k, x)
        exp, ok = _numpy_cast(x, dst)
        np.testing.assert_array_equal(got[ok], exp[ok], err_msg=f"{src}->{dst}")


def test_float_to_int_truncates_toward_zero_and_small_ints_wrap():
    x = np.array([-2.9, -1.5, -0.9, 0.9, 1.5, 2.9, -1.0, 300.0], np.float32)
    k = elementwise(lambda v: E.cast(v, "int32"), ["float32"], "int32", 8)
    assert run(k, x).tolist() == [-2, -1, 0, 0, 1, 2, -1, 300]
    k = elementwise(lambda v: E.cast(v, "uint8"), ["float32"], "uint8", 8)
    assert run(k, x).tolist() == [254, 255, 0, 0, 1, 2, 255, 44]  # via int32, as numpy on x86
    k = elementwise(lambda v: E.cast(v, "bool"), ["float32"], "bool", 4)
    assert run(k, np.array([0.0, -0.0, np.nan, 1e-40], np.float32)).tolist() == [False, False, True, True]


# ---- comparisons, logic, select -----------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", NUMERIC + ["bool"])
def test_comparisons(dtype, kind):
    n = 24
    a, b = rand(dtype, n), rand(dtype, n)
    b[:8] = a[:8]
    if dtype.startswith("float"):
        a[8], b[9] = np.nan, np.nan
    for op, ref in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                    ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)]:
        k = elementwise(lambda x, y, o=op: E.compare(o, x, y), [dtype, dtype], "bool", n, kind)
        np.testing.assert_array_equal(run(k, a, b), ref(a, b), err_msg=op)


@pytest.mark.parametrize("kind", KINDS)
def test_logic_and_select(kind):
    n = 19
    p, q = rand("bool", n), rand("bool", n)
    x, y = rand("float32", n), rand("float32", n)
    k = elementwise(lambda a, b: (a & b) | ~a, ["bool", "bool"], "bool", n, kind)
    np.testing.assert_array_equal(run(k, p, q), (p & q) | ~p)
    k = elementwise(lambda c, a, b: E.select(c, a, b), ["bool", "float32", "float32"], "float32", n, kind)
    np.testing.assert_array_equal(run(k, p, x, y), np.where(p, x, y))
    k = elementwise(lambda a, b: E.select(a > b, a - b, b * 2.0), ["float32"] * 2, "float32", n, kind)
    np.testing.assert_array_equal(run(k, x, y), np.where(x > y, x - y, y * np.float32(2)))


@pytest.mark.parametrize("lanes", [1, 3, 8, 17, 64])
def test_select_padding_never_loads_out_of_bounds(lanes):
    """``select(1 <= i <= N, A[i-1], 0)`` with i vectorized: the untaken side's address lies
    outside A; the far variant points ~1.6 GB away and would fault if it were loaded."""
    n = lanes + 2
    A = L.Buffer("A", (lanes,), "float32")
    Out = L.Buffer("Out", (n,), "float32")
    Far = L.Buffer("Far", (n,), "float32")
    for kind in ("serial", "vectorized"):
        i = E.var("i")
        pad = E.select((i >= 1) & (i <= lanes), A.load(i - 1), E.const(0.0))
        far = E.select(i < 0, A.load(i - 400_000_000), A.load(E.binary("min", i, lanes - 1)))
        body = L.Seq((L.Store(Out, (i,), pad), L.Store(Far, (i,), far)))
        k = build_func(L.PrimFunc("pad", (A, Out, Far), L.For(i, n, kind, body)))
        a = RNG.standard_normal(lanes).astype(np.float32)
        out, fr = np.zeros(n, np.float32), np.zeros(n, np.float32)
        k(a, out, fr)
        np.testing.assert_array_equal(out, np.concatenate([[0], a, [0]]).astype(np.float32))
        np.testing.assert_array_equal(fr, a[np.minimum(np.arange(n), lanes - 1)])


def test_padding_uniform_condition_in_vector_loop():
    """conv-style padding vectorized over channels: the guard is lane-invariant -> a branch."""
    H, C = 6, 16
    A = L.Buffer("A", (H, C), "float32")
    P = L.Buffer("P", (H + 2, C), "float32")
    h, c = E.var("h"), E.var("c")
    val = E.select((h >= 1) & (h <= H), A.load(h - 1, c), E.const(0.0))
    k = build_func(L.PrimFunc("padc", (A, P), L.For(h, H + 2, "serial", L.For(c, C, "vectorized",
                                                                             L.Store(P, (h, c), val)))))
    assert "load <16 x float>" in k.llvm_ir
    a = RNG.standard_normal((H, C)).astype(np.float32)
    p = np.zeros((H + 2, C), np.float32)
    k(a, p)
    np.testing.assert_array_equal(p, np.pad(a, ((1, 1), (0, 0))))


def test_nested_masked_select_and_uniform_load_under_mask():
    n = 16
    A = L.Buffer("A", (n,), "float32")
    S = L.Buffer("S", (4,), "float32")
    Out = L.Buffer("Out", (n,), "float32")
    i = E.var("i")
    inner = E.select(i < 12, A.load(i + 4) + S.load(E.const(3)), S.load(E.const(0)))
    val = E.select(i >= 2, inner, A.load(i) * 2.0)
    k = build_func(L.PrimFunc("nest", (A, S, Out), L.For(i, n, "vectorized", L.Store(Out, (i,), val))))
    a = RNG.standard_normal(n).astype(np.float32)
    s = RNG.standard_normal(4).astype(np.float32)
    exp = np.array([(a[j + 4] + s[3] if j < 12 else s[0]) if j >= 2 else a[j] * 2 for j in range(n)],
                   np.float32)
    np.testing.assert_array_equal(run(k, a, s), exp)


# ---- statements -------------------------------------------------------------------------------

def test_if_then_else_guards():
    n, m = 20, 13
    A = L.Buffer("A", (n,), "float32")
    Out = L.Buffer("Out", (n,), "float32")
    i = E.var("i")
    body = L.For(i, n, "serial", L.IfThenElse(i < m, L.Store(Out, (i,), A.load(i) + 1.0),
                                             L.Store(Out, (i,), E.const(-1.0))))
    k = build_func(L.PrimFunc("guard", (A, Out), body))
    a = RNG.standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(run(k, a), np.where(np.arange(n) < m, a + 1, -1).astype(np.float32))


@pytest.mark.parametrize("with_else", [False, True])
def test_lane_dependent_guard_for_split_tail(with_else):
    """for o in 0..3, for v in 0..8 vectorized: if o*8+v < 21: B[o*8+v] = A[o*8+v]*3 (the tail
    guard of a non-divisible split). Runs as masked vector code: the last chunk's inactive
    lanes would read and write past the end of A and B."""
    n = 21
    A = L.Buffer("A", (n,), "float32")
    B = L.Buffer("B", (n,), "float32")
    S = L.Buffer("S", (1,), "float32")
    o, v = E.var("o"), E.var("v")
    idx = o * 8 + v
    then = L.Store(B, (idx,), A.load(idx) * 3.0 + S.load(E.const(0)))
    if with_else:  # if idx < 16: ... else: (if idx < n: B[idx] = -1)
        guard, other = idx < 16, L.IfThenElse(idx < n, L.Store(B, (idx,), E.const(-1.0)))
    else:
        guard, other = idx < n, None
    body = L.For(o, 3, "serial", L.For(v, 8, "vectorized", L.IfThenElse(guard, then, other)))
    k = build_func(L.PrimFunc("tail", (A, S, B), body))
    assert "scalar fallback" not in k.llvm_ir and "masked.store" in k.llvm_ir
    a = RNG.standard_normal(n).astype(np.float32)
    s = np.array([0.5], np.float32)
    exp = a * np.float32(3) + s[0]
    if with_else:
        exp[16:] = -1
    np.testing.assert_allclose(run(k, a, s), exp, rtol=1e-6, atol=1e-6)  # a*3+s may be one FMA


def test_lane_dependent_guard_never_touches_masked_lanes():
    n = 16
    A = L.Buffer("A", (n,), "float32")
    B = L.Buffer("B", (n,), "float32")
    v = E.var("v")
    # lanes with v < 8 are inactive; their would-be addresses lie ~1.6 GB before the buffers
    far = v * 100_000_000 - 700_000_000
    body = L.For(v, n, "vectorized", L.IfThenElse(
        v >= 8, L.Store(B, (v,), A.load(v)),
        L.IfThenElse(v < 0, L.Store(B, (far,), A.load(far)))))
    k = build_func(L.PrimFunc("farguard", (A, B), body))
    a = RNG.standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(run(k, a), np.where(np.arange(n) >= 8, a, 0).astype(np.float32))


def test_vectorized_with_uniform_guard_stays_vector():
    n, lanes = 4, 16
    A = L.Buffer("A", (n, lanes), "float32")
    B = L.Buffer("B", (n, lanes), "float32")
    o, v = E.var("o"), E.var("v")
    body = L.For(o, n, "serial", L.For(v, lanes, "vectorized",
                                       L.IfThenElse(o < 3, L.Store(B, (o, v), A.load(o, v) + 1.0),
                                                    L.Store(B, (o, v), E.const(7.0)))))
    k = build_func(L.PrimFunc("uguard", (A, B), body))
    assert "scalar fallback" not in k.llvm_ir and "store <16 x float>" in k.llvm_ir
    a = RNG.standard_normal((n, lanes)).astype(np.float32)
    exp = a + 1
    exp[3] = 7
    np.testing.assert_array_equal(run(k, a), exp)


def test_allocate_local_accumulator():
    # Out[i] = sum_k A[i, k] via a local accumulator, as cache_write produces.
    n, K = 12, 9
    A = L.Buffer("A", (n, K), "float32")
    Out = L.Buffer("Out", (n,), "float32")
    acc = L.Buffer("acc", (1,), "float32", scope="local")
    i, k = E.var("i"), E.var("k")
    zero = E.const(0)
    body = L.For(i, n, "serial", L.Allocate(acc, L.seq(
        L.Store(acc, (zero,), E.const(0.0)),
        L.For(k, K, "serial", L.Store(acc, (zero,), acc.load(zero) + A.load(i, k))),
        L.Store(Out, (i,), acc.load(zero)))))
    kern = build_func(L.PrimFunc("rowsum", (A, Out), body))
    assert "alloca float" in kern.llvm_ir
    a = RNG.standard_normal((n, K)).astype(np.float32)
    exp = np.zeros(n, np.float32)
    for kk in range(K):
        exp += a[:, kk]
    np.testing.assert_allclose(run(kern, a), exp, rtol=1e-6)


@pytest.mark.parametrize("par", [False, True])
def test_allocate_large_global_temporary(par):
    # 128 x 256 float32 = 128 KiB > 64 KiB: heap, not stack (also inside a parallel worker).
    R, C = 128, 256
    k = build_func(two_pass(R, C, par))
    assert "call noalias ptr @__ansor_ws_take" in k.llvm_ir  # cached across calls
    a = RNG.standard_normal((R, C)).astype(np.float32)
    np.testing.assert_array_equal(run(k, a), a[::-1] * 2 + 1)


# ---- vectorized loops -------------------------------------------------------------------------

@pytest.mark.parametrize("lanes", [1, 3, 8, 16, 17, 64, 100])
def test_vectorized_extents_and_access_patterns(lanes):
    rows = 3
    A = L.Buffer("A", (rows, lanes), "float32")  # stride 1
    S = L.Buffer("S", (rows,), "float32")  # stride 0 (broadcast)
    G = L.Buffer("G", (rows, 3 * lanes), "float32")  # stride 3 (gather)
    H = L.Buffer("H", (lanes,), "float32")  # non-affine: v // 2 (gather)
    Out = L.Buffer("Out", (rows, lanes), "float32")
    Out2 = L.Buffer("Out2", (rows, 2 * lanes), "float32")  # strided store (scatter)
    r, v = E.var("r"), E.var("v")
    val = A.load(r, v) * S.load(r) + G.load(r, v * 3 + 1) - H.load(E.binary("floordiv", v, 2))
    body = L.For(r, rows, "serial", L.For(v, lanes, "vectorized", L.seq(
        L.Store(Out, (r, v), val), L.Store(Out2, (r, v * 2), A.load(r, v) + 1.0))))
    k = build_func(L.PrimFunc(f"pat{lanes}", (A, S, G, H, Out, Out2), body))
    ir = k.llvm_ir
    vl = min(lanes, 64)
    if lanes > 1:
        assert f"load <{vl} x float>" in ir
        assert "masked.gather" in ir and "masked.scatter" in ir
    assert "scalar fallback" not in ir
    a = RNG.standard_normal((rows, lanes)).astype(np.float32)
    s = RNG.standard_normal(rows).astype(np.float32)
    g = RNG.standard_normal((rows, 3 * lanes)).astype(np.float32)
    h = RNG.standard_normal(lanes).astype(np.float32)
    out = np.zeros((rows, lanes), np.float32)
    out2 = np.full((rows, 2 * lanes), -5, np.float32)
    k(a, s, g, h, out, out2)
    vi = np.arange(lanes)
    exp = (a * s[:, None]).astype(np.float32) + g[:, 3 * vi + 1] - h[vi // 2]
    np.testing.assert_allclose(out, exp, rtol=1e-6, atol=1e-6)
    exp2 = np.full((rows, 2 * lanes), -5, np.float32)
    exp2[:, ::2] = a + 1
    np.testing.assert_array_equal(out2, exp2)


def test_vectorized_int_and_bool_and_lane_values():
    n = 16
    A = L.Buffer("A", (n,), "int32")
    M = L.Buffer("M", (n,), "bool")
    Out = L.Buffer("Out", (n,), "int32")
    Mo = L.Buffer("Mo", (n,), "bool")
    v = E.var("v")
    body = L.For(v, n, "vectorized", L.seq(
        L.Store(Out, (v,), E.select(M.load(v), A.load(v) * v, E.binary("floormod", v - 5, 3))),
        L.Store(Mo, (v,), ~M.load(v) | (v > 10))))
    k = build_func(L.PrimFunc("vint", (A, M, Out, Mo), body))
    a = RNG.integers(-50, 50, n).astype(np.int32)
    m = RNG.integers(0, 2, n).astype(bool)
    out, mo = np.zeros(n, np.int32), np.zeros(n, bool)
    k(a, m, out, mo)
    vi = np.arange(n)
    np.testing.assert_array_equal(out, np.where(m, a * vi, (vi - 5) % 3))
    np.testing.assert_array_equal(mo, ~m | (vi > 10))


def test_vectorized_fallbacks_keep_sequential_semantics():
    n = 16
    A = L.Buffer("A", (n + 1,), "float32")
    Acc = L.Buffer("Acc", (1,), "float32")
    v = E.var("v")
    # 1) a loop-carried dependence through A: A[v+1] = A[v] * 2 (prefix doubling)
    k = build_func(L.PrimFunc("carry", (A,), L.For(v, n, "vectorized",
                                                   L.Store(A, (v + 1,), A.load(v) * 2.0))))
    assert "scalar fallback" in k.llvm_ir
    a = np.zeros(n + 1, np.float32)
    a[0] = 1
    k(a)
    np.testing.assert_array_equal(a, 2.0 ** np.arange(n + 1))
    # 2) a lane-invariant store (a reduction into one element)
    v2 = E.var("v2")
    B = L.Buffer("B", (n,), "float32")
    k = build_func(L.PrimFunc("red", (B, Acc), L.For(v2, n, "vectorized", L.Store(
        Acc, (E.const(0),), Acc.load(E.const(0)) + B.load(v2)))))
    assert "scalar fallback" in k.llvm_ir
    b = np.arange(n, dtype=np.float32)
    acc = np.zeros(1, np.float32)
    k(b, acc)
    assert acc[0] == b.sum()
    # 3) a nested loop inside the vectorized loop
    v3, j = E.var("v3"), E.var("j")
    C = L.Buffer("C", (4, 3), "float32")
    D = L.Buffer("D", (4,), "float32")
    k = build_func(L.PrimFunc("nested", (C, D), L.For(v3, 4, "vectorized", L.seq(
        L.Store(D, (v3,), E.const(0.0)),
        L.For(j, 3, "serial", L.Store(D, (v3,), D.load(v3) + C.load(v3, j)))))))
    c = RNG.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(run(k, c), c.sum(1), rtol=1e-6)


def test_unrolled_loops():
    n = 6
    A = L.Buffer("A", (n, 4), "float32")
    Out = L.Buffer("Out", (n, 4), "float32")
    i, j = E.var("i"), E.var("j")
    body = L.For(i, n, "serial", L.For(j, 4, "unrolled", L.Store(Out, (i, j), A.load(i, 3 - j) + A.load(i, j))))
    k = build_func(L.PrimFunc("unr", (A, Out), body))
    assert "llvm.loop.unroll.full" in k.llvm_ir
    a = RNG.standard_normal((n, 4)).astype(np.float32)
    np.testing.assert_array_equal(run(k, a), a[:, ::-1] + a)
    # the unrolled loop is gone from the optimised code (no back edge left for j)
    assert "llvm.loop.unroll.full" not in k.optimized_ir


# ---- parallel loops ---------------------------------------------------------------------------

def _par_gemm(M: int, N: int, K: int):
    A = L.Buffer("A", (M, K), "float32")
    B = L.Buffer("B", (K, N), "float32")
    C = L.Buffer("C", (M, N), "float32")
    i, j, k = E.var("i"), E.var("j"), E.var("k")
    body = L.For(i, M, "parallel", L.seq(
        L.For(j, N, "vectorized", L.Store(C, (i, j), E.const(0.0))),
        L.For(k, K, "serial", L.For(j, N, "vectorized",
                                    L.Store(C, (i, j), C.load(i, j) + A.load(i, k) * B.load(k, j))))))
    return build_func(L.PrimFunc("pgemm", (A, B, C), body))


def test_parallel_loop_matches_numpy_and_is_thread_count_independent():
    M, N, K = 37, 32, 24
    kern = _par_gemm(M, N, K)
    assert "@ansor_parallel_for(" in kern.llvm_ir and "GOMP" not in kern.llvm_ir
    a = RNG.standard_normal((M, K)).astype(np.float32)
    b = RNG.standard_normal((K, N)).astype(np.float32)
    outs = []
    for nt in (1, 2, 3):
        kern.num_threads = nt
        c = np.zeros((M, N), np.float32)
        kern(a, b, c)
        outs.append(c)
    np.testing.assert_allclose(outs[0], a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


def test_parallel_inside_serial_with_outer_vars_and_buffers():
    O, P, n = 3, 5, 8
    A = L.Buffer("A", (O, P, n), "float32")
    Out = L.Buffer("Out", (O, P, n), "float32")
    T = L.Buffer("T", (P, n), "float32")
    o, p, v, p2, v2 = (E.var(x) for x in ("o", "p", "v", "p2", "v2"))
    body = L.For(o, O, "serial", L.Allocate(T, L.seq(
        L.For(p, P, "parallel", L.For(v, n, "vectorized",
                                      L.Store(T, (p, v), A.load(o, p, v) * E.cast(o + 1, "float32")))),
        L.For(p2, P, "parallel", L.For(v2, n, "serial",
                                       L.Store(Out, (o, p2, v2), T.load(P - 1 - p2, v2)))))))
    k = build_func(L.PrimFunc("pserial", (A, Out), body))
    a = RNG.standard_normal((O, P, n)).astype(np.float32)
    exp = a * (np.arange(O, dtype=np.float32)[:, None, None] + 1)
    np.testing.assert_array_equal(run(k, a), exp[:, ::-1, :])


def test_nested_parallel_raises():
    A = L.Buffer("A", (4, 4), "float32")
    i, j = E.var("i"), E.var("j")
    f = L.PrimFunc("np", (A,), L.For(i, 4, "parallel", L.For(j, 4, "parallel",
                                                             L.Store(A, (i, j), E.const(1.0)))))
    with pytest.raises(ValueError, match="nested parallel"):
        codegen(f)


def test_num_threads_env_and_kernel_setting(monkeypatch):
    from measure import runtime

    monkeypatch.setenv("ANSOR_NUM_THREADS", "1")
    assert runtime.num_threads() == 1
    k = _par_gemm(4, 8, 2)
    assert k.num_threads == 1
    k.num_threads = 2
    assert k.num_threads == 2
    with pytest.raises(ValueError):
        k.num_threads = 0
    for bad in ("0", "-3", "two"):
        monkeypatch.setenv("ANSOR_NUM_THREADS", bad)
        with pytest.raises(ValueError, match="ANSOR_NUM_THREADS"):
            runtime.num_threads()
    monkeypatch.delenv("ANSOR_NUM_THREADS")
    import os

    assert runtime.num_threads() == len(os.sched_getaffinity(0))


# ---- generated code ---------------------------------------------------------------------------

def test_vector_fma_in_optimized_ir_and_assembly():
    n = 16
    A = L.Buffer("A", (64, n), "float32")
    B = L.Buffer("B", (n,), "float32")
    C = L.Buffer("C", (64, n), "float32")
    i, v = E.var("i"), E.var("v")
    body = L.For(i, 64, "serial", L.For(v, n, "vectorized",
                                        L.Store(C, (i, v), C.load(i, v) + A.load(i, v) * B.load(v))))
    k = build_func(L.PrimFunc("fma16", (A, B, C), body))
    opt = k.optimized_ir
    assert ("fmul contract" in opt and re.search(r"fadd (reassoc )?contract", opt)) \
        or "@llvm.fma" in opt or "fmuladd" in opt
    assert re.search(r"vfmadd\d+ps\s+[^\n]*%[yz]mm", k.assembly), k.assembly
    a = RNG.standard_normal((64, n)).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    c = RNG.standard_normal((64, n)).astype(np.float32)
    exp = c.astype(np.float64) + a.astype(np.float64) * b
    k(a, b, c)
    np.testing.assert_allclose(c, exp, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", ["exp", "log", "tanh", "sigmoid", "erf"])
def test_vectorized_math_has_no_libm_calls(fn):
    k = tiled_elementwise(lambda x: E.call(fn, x), ["float32"], "float32", 8, 16, name=f"v{fn}")
    asm = k.assembly
    # With the JIT's large code model a libm call would be `movabsq $expf, %rax; callq *%rax`:
    # look for the symbol and for any call at all.
    assert not re.search(r"\b(expf|logf|tanhf|erff|exp|log|tanh|erf)(@PLT)?\b", asm), fn
    assert not re.search(r"^\s*call", asm, re.M), fn
    assert re.search(r"%[yz]mm", asm)


def test_codegen_text_shape():
    A = L.Buffer("in put", (4,), "float32")
    A2 = L.Buffer("in put", (4,), "float32")  # same name, different buffer
    i = E.var("i")
    f = L.PrimFunc("my-kernel 1", (A, A2), L.For(i, 4, "serial", L.Store(A2, (i,), A.load(i))))
    ir = codegen(f)
    assert "define void @my-kernel_1" not in ir and "define void @my_kernel_1(" in ir
    assert "ptr noalias nocapture %arg0, ptr noalias nocapture %arg1" in ir
    assert '"target-cpu"=' in ir and "nounwind" in ir
    k = build_func(f)
    x = np.arange(4, dtype=np.float32)
    y = np.zeros(4, np.float32)
    k(x, y)
    np.testing.assert_array_equal(x, y)


def test_math_in_float64_and_pow_scalar_vector():
    n = 32
    x = np.abs(rand("float64", n, -5, 5)) + 0.1
    y = rand("float64", n, -3, 3)
    for kind in KINDS:
        k = elementwise(lambda a, b: E.call("pow", a, b), ["float64"] * 2, "float64", n, kind)
        np.testing.assert_allclose(run(k, x, y), np.power(x, y), rtol=1e-15)
        k = elementwise(lambda a: E.call("exp", a) + E.call("log", a) + E.call("tanh", a)
                        + E.call("sigmoid", a) + E.call("erf", a), ["float64"], "float64", n, kind)
        erf = np.vectorize(math.erf)
        exp = np.exp(x) + np.log(x) + np.tanh(x) + 1 / (1 + np.exp(-x)) + erf(x)
        np.testing.assert_allclose(run(k, x), exp, rtol=1e-14)


@pytest.mark.parametrize("W,lanes,contiguous", [(64, 16, True), (48, 16, True), (24, 16, False), (16, 16, True)])
def test_fused_then_split_vector_axis(W, lanes, contiguous):
    """``for f: for v vectorized: X[(f*lanes+v) // W, (f*lanes+v) % W]`` (fuse, then split): when
    the lanes never cross a row the accesses are contiguous vectors; otherwise the store is not
    provably injective per lane and the loop falls back to scalar code."""
    H = 6
    X = L.Buffer("X", (H, W), "float32")
    Y = L.Buffer("Y", (H, W), "float32")
    f, v = E.var("f"), E.var("v")
    fused = f * lanes + v
    r, c = E.binary("floordiv", fused, W), E.binary("floormod", fused, W)
    body = L.For(f, H * W // lanes, "serial", L.For(v, lanes, "vectorized",
                                                    L.Store(Y, (r, c), X.load(r, c) * 2.0 + E.cast(c, "float32"))))
    k = build_func(L.PrimFunc("fsplit", (X, Y), body))
    if contiguous:
        assert "masked.gather" not in k.llvm_ir and f"store <{lanes} x float>" in k.llvm_ir
    else:  # the scalar fallback: no vector store emitted by us (LLVM may still vectorize at O3)
        assert "scalar fallback" in k.llvm_ir
    x = RNG.standard_normal((H, W)).astype(np.float32)
    np.testing.assert_array_equal(run(k, x), x * 2 + np.arange(W, dtype=np.float32))


@pytest.mark.parametrize("tile,block,contiguous", [(128, 32, True), (96, 32, True), (80, 32, False)])
def test_block_index_below_a_fused_tile_loop(tile, block, contiguous):
    """A packed tensor read in a tile of a fused loop: ``P[(f % 3 * tile + jo * block + v) //
    block, (...) % block]``. ``f % 3`` is no affine term, but ``f % 3 * tile`` is a multiple of
    ``tile``: when that is a multiple of the block the lanes stay in one block (a vector load),
    otherwise the load gathers."""
    nf, nj = 6, tile // block if tile % block == 0 else 2
    cols = 3 * tile + block
    P = L.Buffer("P", (cols // block + 1, block), "float32")
    Y = L.Buffer("Y", (nf, nj, block), "float32")
    f, jo, v = E.var("f"), E.var("jo"), E.var("v")
    col = E.binary("floormod", f, 3) * tile + jo * block + v
    load = P.load(E.binary("floordiv", col, block), E.binary("floormod", col, block))
    body = L.For(f, nf, "serial", L.For(jo, nj, "serial", L.For(v, block, "vectorized",
                                                                L.Store(Y, (f, jo, v), load * 2.0))))
    k = build_func(L.PrimFunc("blockidx", (P, Y), body))
    assert ("masked.gather" not in k.llvm_ir) == contiguous
    p = RNG.standard_normal(P.shape).astype(np.float32)
    c = (np.arange(nf)[:, None, None] % 3) * tile + np.arange(nj)[None, :, None] * block \
        + np.arange(block)[None, None, :]
    np.testing.assert_array_equal(run(k, p), p.ravel()[c] * 2)


def test_tiled_gemm_with_local_accumulator_in_parallel_loop():
    """The shape Ansor's multi-level tiling produces: fused parallel tile loop, per-thread local
    accumulator tile, split reduction with unrolled inner parts, vectorized columns."""
    M, N, K, ti, tj, tk = 24, 64, 20, 4, 32, 4
    A = L.Buffer("A", (M, K), "float32")
    B = L.Buffer("B", (K, N), "float32")
    C = L.Buffer("C", (M, N), "float32")
    acc = L.Buffer("C.local", (ti, tj), "float32", scope="local")
    nj = N // tj
    f, ii, ji, ko, ki = (E.var(n) for n in ("f", "ii", "ji", "ko", "ki"))
    row, col = E.binary("floordiv", f, nj) * ti + ii, E.binary("floormod", f, nj) * tj + ji
    k = ko * tk + ki
    init = L.For(ii, ti, "unrolled", L.For(ji, tj, "vectorized", L.Store(acc, (ii, ji), E.const(0.0))))
    update = L.For(ko, K // tk, "serial", L.For(ki, tk, "unrolled", L.For(ii, ti, "unrolled", L.For(
        ji, tj, "vectorized", L.Store(acc, (ii, ji), acc.load(ii, ji) + A.load(row, k) * B.load(k, col))))))
    write = L.For(ii, ti, "unrolled", L.For(ji, tj, "vectorized", L.Store(C, (row, col), acc.load(ii, ji))))
    body = L.For(f, (M // ti) * nj, "parallel", L.Allocate(acc, L.seq(init, update, write)))
    kern = build_func(L.PrimFunc("tgemm", (A, B, C), body))
    a = RNG.standard_normal((M, K)).astype(np.float32)
    b = RNG.standard_normal((K, N)).astype(np.float32)
    res = []
    for nt in (1, 2):
        kern.num_threads = nt
        res.append(run(kern, a, b))
    np.testing.assert_allclose(res[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(res[0], res[1])


# ---- property: vector code == scalar semantics for random index patterns ----------------------


@settings(max_examples=40, deadline=None)
@given(lanes=st.integers(1, 20), outer=st.integers(1, 4), a=st.integers(0, 40), c=st.integers(0, 3),
       k=st.integers(0, 9), d=st.integers(1, 40), d2=st.integers(1, 12), w=st.integers(1, 40))
def test_vector_index_patterns_match_scalar_semantics(lanes, outer, a, c, k, d, d2, w):
    o, v = E.var("o"), E.var("v")
    p = o * a + v * c + k
    pmax = a * (outer - 1) + c * (lanes - 1) + k
    X = L.Buffer("X", (d,), "int32")
    Y = L.Buffer("Y", (pmax // d2 + 1,), "int32")
    Out = L.Buffer("Out", (outer, lanes), "int32")
    val = X.load(E.binary("floormod", p, d)) * 1000 + Y.load(E.binary("floordiv", p, d2))
    # a fused-then-split store: (o*lanes + v) // w, % w
    q = o * lanes + v
    Out2 = L.Buffer("Out2", ((outer * lanes - 1) // w + 1, w), "int32")
    body = L.For(o, outer, "serial", L.For(v, lanes, "vectorized", L.seq(
        L.Store(Out, (o, v), val),
        L.Store(Out2, (E.binary("floordiv", q, w), E.binary("floormod", q, w)), val + 1))))
    kern = build_func(L.PrimFunc("prop", (X, Y, Out, Out2), body))
    x = np.arange(d, dtype=np.int32) + 1
    y = np.arange(pmax // d2 + 1, dtype=np.int32) * 7
    pv = a * np.arange(outer)[:, None] + c * np.arange(lanes)[None, :] + k
    out = np.zeros((outer, lanes), np.int32)
    out2 = np.zeros(Out2.shape, np.int32)
    kern(x, y, out, out2)
    exp = x[pv % d] * 1000 + y[pv // d2]
    np.testing.assert_array_equal(out, exp)
    exp2 = np.zeros(Out2.size, np.int32)
    exp2[: outer * lanes] = exp.ravel() + 1
    np.testing.assert_array_equal(out2.ravel(), exp2)


def _row_reduce(combiner: str, n: int = 1024):
    """``out[i] = combine_k A[i, k]`` with the reduce loop innermost and serial, as lowering
    emits it for layer_norm's and softmax's row reductions."""
    A = L.Buffer("A", (8, n), "float32")
    O = L.Buffer("O", (8,), "float32")
    i, k = E.var("i"), E.var("k")
    init = 0.0 if combiner == "add" else float("-inf")
    upd = E.binary(combiner, O.load(i), A.load(i, k))
    body = L.For(i, 8, "serial", L.Seq((L.Store(O, (i,), E.const(init, "float32")),
                                        L.For(k, n, "serial", L.Store(O, (i,), upd)))))
    return build_func(L.PrimFunc(f"row_{combiner}", (A, O), body))


def test_reduction_update_is_reassociable_and_vectorised():
    k = _row_reduce("add")
    assert "fadd reassoc contract" in k.llvm_ir
    # The scalar chain over k becomes SIMD partial sums: a vector add inside the loop.
    assert re.search(r"fadd reassoc[^\n]*<\d+ x float>", k.optimized_ir), k.optimized_ir
    assert re.search(r"vaddps\s+[^\n]*%[yz]mm", k.assembly)
    a = RNG.standard_normal((8, 1024)).astype(np.float32)
    o = np.empty(8, np.float32)
    k(a, o)
    np.testing.assert_allclose(o, a.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)


def test_max_reduction_is_reassociable_and_vectorised():
    k = _row_reduce("max")
    assert re.search(r"call nsz reassoc float @llvm\.maximum", k.llvm_ir)
    assert re.search(r"<\d+ x float> @llvm\.maximum", k.optimized_ir), k.optimized_ir
    a = RNG.standard_normal((8, 1024)).astype(np.float32)
    a[3, 17] = np.nan
    o = np.empty(8, np.float32)
    k(a, o)
    exp = np.maximum.reduce(a, axis=1)
    np.testing.assert_array_equal(o, exp)


def test_plain_float_adds_carry_no_reassoc():
    n = 64
    A = L.Buffer("A", (n,), "float32")
    B = L.Buffer("B", (n,), "float32")
    C = L.Buffer("C", (n,), "float32")
    i = E.var("i")
    # C[i] = A[i] + B[i] reads another buffer's element: not a reduction update.
    k = build_func(L.PrimFunc("add", (A, B, C), L.For(i, n, "serial",
                                                       L.Store(C, (i,), A.load(i) + B.load(i)))))
    assert "reassoc" not in k.llvm_ir


@pytest.mark.parametrize("n", [1, 5, 8, 21, 24])
def test_guarded_loop_body_becomes_a_shorter_trip_count(n):
    """``for o: for v in 0..8: if o*8 + v < n and v != 3: Out[o] += A[o*8 + v]`` (the tail of a
    split reduction) runs ``min(8, n - o*8)`` iterations with only the other condition left
    inside: no per-iteration test of the bound, so a tail's accumulators can stay in registers."""
    A = L.Buffer("A", (24,), "float32")
    Out = L.Buffer("Out", (3,), "float32")
    o, v = E.var("o"), E.var("v")
    idx = o * 8 + v
    cond = E.binary("and", idx < n, E.compare("ne", v, E.const(3)))
    body = L.For(o, 3, "serial", L.For(v, 8, "serial", L.IfThenElse(
        cond, L.Store(Out, (o,), Out.load(o) + A.load(idx)))))
    k = build_func(L.PrimFunc("tripcount", (A, Out), body))
    ir = k.llvm_ir
    assert re.search(r"^tail\d*:", ir, re.M)  # the bounded loop's entry block
    assert "icmp ne" in ir  # the other condition stays, inside the loop
    a = RNG.standard_normal(24).astype(np.float32)
    out = np.zeros(3, np.float32)
    k(a, out)
    want = np.zeros(3, np.float32)
    for oo in range(3):
        for vv in range(8):
            if oo * 8 + vv < n and vv != 3:
                want[oo] += a[oo * 8 + vv]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
