"""Tests of the numpy reference evaluator (compute/reference.py), the oracle of every other test.

Each semantic rule is checked against an independent computation (numpy's own operators, Python's
integer arithmetic, math.erf, plain loops), so that a wrong oracle cannot pass by agreeing with
itself.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from compute import te
from compute import evaluator as EV
from compute import reference as R
from compute.compute_dag import ComputeDAG


def _matmul(m: int, n: int, k: int, dtype: str = "float32"):
    A = te.placeholder((m, k), dtype, name="A")
    B = te.placeholder((k, n), dtype, name="B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def test_matmul_matches_numpy():
    A, B, C = _matmul(33, 17, 65)
    a, b = R.random_inputs([A, B, C], seed=1)
    (c,) = R.evaluate([A, B, C], [a, b])
    assert c.dtype == np.float32 and c.shape == (33, 17)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_float32_products_are_rounded_then_summed_in_float64():
    # Each product rounds in float32 (the expression's dtype); only the accumulation is float64.
    A, B, C = _matmul(8, 8, 300)
    a, b = R.random_inputs([A, B, C], seed=2)
    (c,) = R.evaluate([A, B, C], [a, b])
    prods = (a[:, :, None] * b[None, :, :]).astype(np.float64)  # float32 products, widened exactly
    want = prods.sum(axis=1).astype(np.float32)
    np.testing.assert_allclose(c, want, rtol=0, atol=1e-6)


def test_reduce_axis_with_offset_and_where():
    A = te.placeholder((6, 20), name="A")
    k = te.reduce_axis((3, 17), "k")
    S = te.compute((6,), lambda i: te.sum(A[i, k], axis=k, where=(k % 2 == 0)), name="S")
    (a,) = R.random_inputs([A, S], seed=3)
    (s,) = R.evaluate([A, S], [a])
    want = a[:, 4:17:2].astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(s, want, rtol=1e-6)


def test_reduce_where_uses_the_spatial_axis():
    A = te.placeholder((5, 5), name="A")
    k = te.reduce_axis((0, 5), "k")
    T = te.compute((5,), lambda i: te.sum(A[i, k], axis=k, where=k <= i), name="T")  # prefix sums
    (a,) = R.random_inputs([A, T], seed=4)
    (t,) = R.evaluate([A, T], [a])
    np.testing.assert_allclose(t, [a[i, : i + 1].astype(np.float64).sum() for i in range(5)], rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8"])
def test_max_min_reductions_with_fully_masked_rows(dtype):
    A = te.placeholder((4, 7), dtype, name="A")
    k = te.reduce_axis((0, 7), "k")
    # Row i keeps the columns k < i: row 0 keeps nothing and must give the combiner's identity.
    Mx = te.compute((4,), lambda i: te.max(A[i, k], axis=k, where=k < i), name="Mx")
    Mn = te.compute((4,), lambda i: te.min(A[i, k], axis=k, where=k < i), name="Mn")
    (a,) = R.random_inputs([A, Mx, Mn], seed=5)
    mx, mn = R.evaluate([A, Mx, Mn], [a])
    if dtype == "float32":
        lo, hi = -np.inf, np.inf
    else:
        lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    assert mx[0] == lo and mn[0] == hi
    for i in range(1, 4):
        assert mx[i] == a[i, :i].max() and mn[i] == a[i, :i].min()
    assert mx.dtype == np.dtype(dtype)


def test_reduction_over_an_axis_the_source_ignores_counts_each_point():
    A = te.placeholder((3,), name="A")
    k = te.reduce_axis((0, 5), "k")
    S = te.compute((3,), lambda i: te.sum(A[i], axis=k), name="S")
    (a,) = R.random_inputs([A, S], seed=6)
    np.testing.assert_allclose(R.evaluate([A, S], [a])[0], 5 * a, rtol=1e-6)


def test_floordiv_floormod_negative_ints_match_python():
    vals = np.array([-7, -6, -1, 0, 1, 5, 7, 100, -100], dtype=np.int32)
    divs = np.array([3, -3, 2, -2, 7, -7, 1, -1, 5], dtype=np.int32)
    A = te.placeholder((9,), "int32", name="A")
    B = te.placeholder((9,), "int32", name="B")
    Q = te.compute((9, 9), lambda i, j: te.floordiv(A[i], B[j]), name="Q")
    M = te.compute((9, 9), lambda i, j: A[i] % B[j], name="M")
    q, m = R.evaluate([A, B, Q, M], [vals, divs])
    for i, x in enumerate(vals.tolist()):
        for j, y in enumerate(divs.tolist()):
            assert q[i, j] == x // y and m[i, j] == x % y, (x, y)


def test_division_by_zero_does_not_crash():
    A = te.placeholder((3,), "int32", name="A")
    F = te.placeholder((3,), name="F")
    Q = te.compute((3,), lambda i: A[i] // (A[i] - A[i]), name="Q")
    D = te.compute((3,), lambda i: F[i] / (F[i] - F[i]), name="D")
    q, d = R.evaluate([A, F, Q, D], [np.array([1, 2, 3], np.int32), np.array([1, 0, -1], np.float32)])
    assert q.shape == (3,) and np.isposinf(d[0]) and np.isnan(d[1]) and np.isneginf(d[2])


@pytest.mark.parametrize("dtype,bits", [("int8", 8), ("int32", 32), ("uint8", 8)])
def test_integer_arithmetic_wraps(dtype, bits):
    A = te.placeholder((4,), dtype, name="A")
    B = te.compute((4,), lambda i: A[i] * A[i] + A[i] * 3 - 1, name="B")
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, info.max // 2 + 3, 11], dtype=dtype)
    (b,) = R.evaluate([A, B], [a])

    def wrap(v: int) -> int:
        v &= (1 << bits) - 1
        return v - (1 << bits) if info.min < 0 and v >= 1 << (bits - 1) else v

    assert b.dtype == np.dtype(dtype)
    assert b.tolist() == [wrap(x * x + x * 3 - 1) for x in a.tolist()]


def test_integer_sum_wraps_in_its_dtype():
    A = te.placeholder((2, 40), "int8", name="A")
    k = te.reduce_axis((0, 40), "k")
    S = te.compute((2,), lambda i: te.sum(A[i, k], axis=k), name="S")
    a = np.full((2, 40), 100, dtype=np.int8)
    a[1] = -100
    (s,) = R.evaluate([A, S], [a])
    assert s.dtype == np.int8
    assert s.tolist() == [((4000 + 128) % 256) - 128, ((-4000 + 128) % 256) - 128]


def test_out_of_range_int_literal_is_rejected_and_explicit_cast_wraps():
    A = te.placeholder((2,), "int8", name="A")
    with pytest.raises(ValueError, match="200 does not fit in int8"):
        te.compute((2,), lambda i: A[i] + 200, name="B")
    B = te.compute((2,), lambda i: A[i] + te.cast(200, "int8"), name="B")  # wraps to -56
    (b,) = R.evaluate([A, B], [np.array([0, 100], np.int8)])
    assert b.tolist() == [-56, 44]


def test_casts():
    F = te.placeholder((8,), name="F")
    I = te.placeholder((8,), "int32", name="I")
    f = np.array([-2.7, -1.5, -0.5, 0.0, 0.5, 1.5, 2.7, 3.99], np.float32)
    i = np.array([-3, -1, 0, 1, 2, 255, 256, 1000], np.int32)
    ToI = te.compute((8,), lambda x: te.cast(F[x], "int32"), name="ToI")
    ToI8 = te.compute((8,), lambda x: te.cast(F[x] * 100.0, "int8"), name="ToI8")
    ToB = te.compute((8,), lambda x: te.cast(F[x], "bool"), name="ToB")
    IToB = te.compute((8,), lambda x: te.cast(I[x], "bool"), name="IToB")
    BToF = te.compute((8,), lambda x: te.cast(I[x] > 0, "float32"), name="BToF")
    IToU8 = te.compute((8,), lambda x: te.cast(I[x], "uint8"), name="IToU8")
    IToF = te.compute((8,), lambda x: te.cast(I[x], "float64"), name="IToF")
    outs = R.evaluate([F, I, ToI, ToI8, ToB, IToB, BToF, IToU8, IToF], [f, i])
    to_i, to_i8, to_b, i_to_b, b_to_f, i_to_u8, i_to_f = outs
    assert to_i.tolist() == [math.trunc(v) for v in f.tolist()]  # toward zero, not floor
    # Out-of-range float->int8: convert to 32 bits, keep the low byte (what x86 code does).
    assert to_i8.tolist() == [(math.trunc(float(np.float32(v) * np.float32(100))) + 128) % 256 - 128
                              for v in f.tolist()]
    assert to_b.tolist() == [v != 0 for v in f.tolist()] and to_b.dtype == np.bool_
    assert i_to_b.tolist() == [v != 0 for v in i.tolist()]
    assert b_to_f.tolist() == [1.0 if v > 0 else 0.0 for v in i.tolist()] and b_to_f.dtype == np.float32
    assert i_to_u8.tolist() == [v % 256 for v in i.tolist()]
    assert i_to_f.dtype == np.float64 and i_to_f.tolist() == [float(v) for v in i.tolist()]


def test_round_half_away_from_zero():
    vals = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 2.4, -2.6, 8388609.0]
    F = te.placeholder((len(vals),), name="F")
    Rn = te.compute((len(vals),), lambda i: te.round(F[i]), name="Rn")
    (r,) = R.evaluate([F, Rn], [np.array(vals, np.float32)])
    want = [math.copysign(math.floor(abs(v) + 0.5), v) for v in np.array(vals, np.float32).tolist()]
    assert r.tolist() == want
    assert r[0] == -3.0 and r[4] == 2.0  # numpy's np.round would give -2 and 2


def test_math_functions_in_float64_rounded_once():
    x = np.linspace(0.05, 3.0, 40).astype(np.float32)
    F = te.placeholder((40,), name="F")
    p17 = float(np.float32(1.7))  # the literal 1.7 becomes a float32 constant
    positive = {  # evaluated on x itself
        "log": (te.log, np.log), "sqrt": (te.sqrt, np.sqrt),
        "rsqrt": (te.rsqrt, lambda v: 1 / np.sqrt(v)),
        "pow": (lambda v: te.pow(v, 1.7), lambda v: v ** p17),
    }
    signed = {  # evaluated on x - 1.5, in float32 first
        "exp": (te.exp, np.exp), "tanh": (te.tanh, np.tanh),
        "sigmoid": (te.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
        "erf": (te.erf, np.vectorize(math.erf)),
        "floor": (te.floor, np.floor), "ceil": (te.ceil, np.ceil), "trunc": (te.trunc, np.trunc),
        "abs": (te.abs, np.abs),
    }
    outs = [te.compute((40,), lambda i, f=f: f(F[i]), name=n) for n, (f, _) in positive.items()]
    outs += [te.compute((40,), lambda i, f=f: f(F[i] - 1.5), name=n) for n, (f, _) in signed.items()]
    vals = R.evaluate([F] + outs, [x])
    args = [x.astype(np.float64)] * len(positive) + [(x - np.float32(1.5)).astype(np.float64)] * len(signed)
    for (name, (_, ref)), arg, v in zip(list(positive.items()) + list(signed.items()), args, vals):
        assert v.dtype == np.float32, name
        np.testing.assert_array_equal(v, ref(arg).astype(np.float32), err_msg=name)


def test_erf_accuracy_against_math_erf():
    xs = np.concatenate([
        np.linspace(-7, 7, 20001), np.linspace(2.49, 2.51, 2001), np.linspace(-2.51, -2.49, 2001),
        [0.0, -0.0, 1e-300, -1e-300, 1e-10, 26.0, -26.0, 1e300, -1e300, np.inf, -np.inf],
        np.random.default_rng(0).standard_normal(5000) * 3,
    ])
    got = R.erf(xs)
    want = np.array([math.erf(v) for v in xs.tolist()])
    assert np.max(np.abs(got - want)) < 1e-12
    tiny = np.array([1e-10, 1e-200, -3e-50])  # relative accuracy near zero, not just absolute
    np.testing.assert_allclose(R.erf(tiny), [math.erf(v) for v in tiny], rtol=1e-14)
    assert np.isnan(R.erf(np.array([np.nan])))[0]
    assert math.copysign(1.0, R.erf(np.array([-0.0]))[0]) == -1.0


def test_select_padding_reads_out_of_bounds_only_in_the_untaken_branch():
    A = te.placeholder((5,), name="A")
    P = te.compute((7,), lambda i: te.if_then_else(te.all(i >= 1, i < 6), A[i - 1], 0.0), name="P")
    (a,) = R.random_inputs([A, P], seed=7)
    (p,) = R.evaluate([A, P], [a])
    np.testing.assert_array_equal(p, np.concatenate([[0], a, [0]]).astype(np.float32))


def test_nested_select_combines_masks_by_condition():
    A = te.placeholder((4,), name="A")
    # The inner select would be out of bounds at i = 4, but the outer one discards it there.
    B = te.compute((5,), lambda i: te.if_then_else(
        i < 4, te.if_then_else(i > 0, A[i], A[i] * 2.0), A[i - 1]), name="B")
    (a,) = R.random_inputs([A, B], seed=8)
    (b,) = R.evaluate([A, B], [a])
    np.testing.assert_array_equal(b, [a[0] * 2, a[1], a[2], a[3], a[3]])


def test_wrong_index_raises_index_error_naming_the_tensor():
    A = te.placeholder((5,), name="Apad")
    B = te.compute((5,), lambda i: A[i + 1] * 2.0, name="shift")  # reads A[5] at i = 4
    with pytest.raises(IndexError, match=r"Apad.*\[5\].*shift|shift.*Apad.*\[5\]"):
        R.evaluate([A, B], R.random_inputs([A, B]))


def test_out_of_bounds_in_the_taken_branch_raises():
    A = te.placeholder((5,), name="Src")
    # The guard is off by one: at i = 0 the taken branch reads Src[-1].
    P = te.compute((6,), lambda i: te.if_then_else(i >= 0, A[te.min(i - 1, 4)], 0.0), name="Pad")
    with pytest.raises(IndexError) as err:
        R.evaluate([A, P], R.random_inputs([A, P]))
    assert "'Src'" in str(err.value) and "'Pad'" in str(err.value) and "[-1]" in str(err.value)


def test_out_of_bounds_in_a_reduction_where_is_ignored_only_when_masked():
    A = te.placeholder((4,), name="A")
    k = te.reduce_axis((0, 6), "k")
    ok = te.compute((1,), lambda i: te.sum(A[k], axis=k, where=k < 4), name="ok")
    bad = te.compute((1,), lambda i: te.sum(A[k], axis=k, where=k < 5), name="bad")
    (a,) = R.random_inputs([A, ok], seed=9)
    np.testing.assert_allclose(R.evaluate([A, ok], [a])[0], [a.astype(np.float64).sum()], rtol=1e-6)
    with pytest.raises(IndexError, match="'A'.*bad|bad.*'A'"):
        R.evaluate([A, bad], [a])


def test_out_of_bounds_in_an_intermediate_stage_is_caught():
    A = te.placeholder((4, 4), name="In")
    B = te.compute((4, 4), lambda i, j: A[j, i + j], name="Skew")
    C = te.compute((4, 4), lambda i, j: B[i, j] + 1.0, name="Out")
    with pytest.raises(IndexError, match="In"):
        R.evaluate([A, C], R.random_inputs([A, C]))


def test_data_dependent_gather_and_its_bounds():
    Tbl = te.placeholder((10,), name="Tbl")
    Idx = te.placeholder((6,), "int32", name="Idx")
    G = te.compute((6,), lambda i: Tbl[Idx[i]], name="G")
    tbl = np.arange(10, dtype=np.float32) * 1.5
    (g,) = R.evaluate([Tbl, Idx, G], [tbl, np.array([0, 9, 3, 3, 1, 2], np.int32)])
    np.testing.assert_array_equal(g, tbl[[0, 9, 3, 3, 1, 2]])
    with pytest.raises(IndexError, match=r"Tbl.*\[10\]"):
        R.evaluate([Tbl, Idx, G], [tbl, np.array([0, 10, 3, 3, 1, 2], np.int32)])


def test_input_validation():
    A, B, C = _matmul(4, 5, 6)
    a = np.zeros((4, 6), np.float32)
    b = np.zeros((6, 5), np.float32)
    with pytest.raises(ValueError, match="expected 2 input"):
        R.evaluate([A, B, C], [a])
    with pytest.raises(ValueError, match=r"'B'.*\[6, 5\].*\[5, 6\]"):
        R.evaluate([A, B, C], [a, b.T])
    with pytest.raises(TypeError, match=r"'A'.*float32.*float64"):
        R.evaluate([A, B, C], [a.astype(np.float64), b])
    with pytest.raises(TypeError, match="list of arrays"):
        R.evaluate([A, B, C], a)
    with pytest.raises(ValueError, match="missing.*'B'"):
        R.evaluate([A, B, C], {"A": a})
    with pytest.raises(ValueError, match="unknown.*'X'"):
        R.evaluate([A, B, C], {"A": a, "B": b, "X": a})


def test_dict_inputs_and_argument_order():
    A, B, C = _matmul(3, 4, 5)
    a, b = R.random_inputs([A, B, C], seed=10)
    # Outputs may come first in the argument list; inputs and results follow argument order.
    D = te.compute((3, 4), lambda i, j: C[i, j] * 2.0, name="D")
    dag = ComputeDAG([D, B, C, A])
    d, c = R.evaluate(dag, {"B": b, "A": a})
    np.testing.assert_array_equal(d, c * np.float32(2))
    d2, c2 = R.evaluate(dag, [b, a])
    np.testing.assert_array_equal(d, d2)
    np.testing.assert_array_equal(c, c2)


def test_evaluate_all_gives_every_stage():
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((6,), lambda i: B[i] * B[i], name="C")
    dag = ComputeDAG([A, C])
    (a,) = R.random_inputs(dag, seed=11)
    vals = R.evaluate_all(dag, [a])
    assert set(vals) == {A.op, B.op, C.op}
    np.testing.assert_array_equal(vals[A.op], a)
    np.testing.assert_array_equal(vals[B.op], a + np.float32(1))
    np.testing.assert_array_equal(vals[C.op], vals[B.op] * vals[B.op])


def test_random_inputs_dtypes_and_ranges():
    ts = [te.placeholder((50, 40), d, name=f"P{d}") for d in
          ("float32", "float64", "int8", "uint8", "int32", "int64", "bool")]
    out = te.compute((50, 40), lambda i, j: te.cast(ts[0][i, j], "int32") + te.cast(ts[6][i, j], "int32"),
                     name="out")
    dag = ComputeDAG(ts + [out])
    arrays = R.random_inputs(dag, seed=3)
    for t, a in zip(ts, arrays):
        assert a.dtype == np.dtype(t.dtype) and a.shape == (50, 40)
    for a in arrays[:2]:
        assert a.min() >= -1 and a.max() < 1 and len(np.unique(a)) > 1000
    assert arrays[2].min() >= -8 and arrays[2].max() < 8 and arrays[3].max() < 16
    assert arrays[6].any() and not arrays[6].all()
    again = R.random_inputs(dag, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(arrays, again))
    assert not np.array_equal(R.random_inputs(dag, seed=4)[0], arrays[0])


def _conv_dag(n=1, hw=14, ci=16, co=16, kk=3, pad=1, stride=1):
    I = te.placeholder((n, hw, hw, ci), name="I")
    W = te.placeholder((kk, kk, ci, co), name="W")
    hp = hw + 2 * pad
    P = te.compute((n, hp, hp, ci), lambda b, h, w, c: te.if_then_else(
        te.all(h >= pad, h < hw + pad, w >= pad, w < hw + pad), I[b, h - pad, w - pad, c], 0.0),
        name="pad")
    ho = (hp - kk) // stride + 1
    rh = te.reduce_axis((0, kk), "rh")
    rw = te.reduce_axis((0, kk), "rw")
    rc = te.reduce_axis((0, ci), "rc")
    O = te.compute((n, ho, ho, co), lambda b, h, w, o: te.sum(
        P[b, h * stride + rh, w * stride + rw, rc] * W[rh, rw, rc, o], axis=[rh, rw, rc]), name="conv")
    return ComputeDAG([I, W, O])


def _conv_loops(x, w, pad, stride):
    n, hw, _, ci = x.shape
    kk, _, _, co = w.shape
    xp = np.zeros((n, hw + 2 * pad, hw + 2 * pad, ci))
    xp[:, pad:pad + hw, pad:pad + hw, :] = x
    ho = (hw + 2 * pad - kk) // stride + 1
    out = np.zeros((n, ho, ho, co))
    for h in range(ho):
        for v in range(ho):
            patch = xp[:, h * stride:h * stride + kk, v * stride:v * stride + kk, :]
            out[:, h, v, :] = np.tensordot(patch, w.astype(np.float64), axes=([1, 2, 3], [0, 1, 2]))
    return out


@pytest.mark.parametrize("stride", [1, 2])
def test_medium_conv_against_loops(stride):
    dag = _conv_dag(stride=stride)
    x, w = R.random_inputs(dag, seed=12)
    (o,) = R.evaluate(dag, [x, w])
    np.testing.assert_allclose(o, _conv_loops(x, w, 1, stride), rtol=1e-5, atol=1e-5)


def test_chunking_gives_the_same_result():
    dag = _conv_dag(hw=9, ci=5, co=6)
    ins = R.random_inputs(dag, seed=13)
    whole = R.evaluate_all(dag, ins)
    for limit in (1, 7, 50, 400):  # 1 splits every reduce *and* spatial axis to single points
        chunked = R.evaluate_all(dag, ins, chunk_elems=limit)
        for op, v in whole.items():
            np.testing.assert_allclose(chunked[op], v, rtol=1e-6, atol=1e-7, err_msg=f"{op.name} @ {limit}")
    # Integer max with where, chunked: the identity must not leak from an all-masked chunk.
    A = te.placeholder((6, 10), "int32", name="A")
    k = te.reduce_axis((2, 10), "k")
    M = te.compute((6,), lambda i: te.max(A[i, k], axis=k, where=k > i + 2), name="M")
    (a,) = R.random_inputs([A, M], seed=14)
    full = R.evaluate([A, M], [a])[0]
    assert full.tolist() == [a[i, i + 3:].max() for i in range(6)]
    np.testing.assert_array_equal(R.evaluate([A, M], [a], chunk_elems=3)[0], full)


def test_chunking_plan_respects_limit(monkeypatch):
    assert EV.plan_blocks([4, 100, 3, 64], [2, 3, 0, 1], 4 * 100 * 10) == [4, 100, 1, 10]
    assert EV.plan_blocks([4, 100, 3, 64], [2, 3, 0, 1], 10) == [1, 10, 1, 1]
    assert EV.plan_blocks([8, 8], [0, 1], 1000) == [8, 8]
    monkeypatch.setattr(R, "CHUNK_ELEMS", 16)  # the module constant is the default limit
    dag = _conv_dag(hw=5, ci=3, co=2)
    ins = R.random_inputs(dag, seed=15)
    np.testing.assert_allclose(R.evaluate(dag, ins)[0], _conv_loops(*ins, 1, 1), rtol=1e-5, atol=1e-6)


def test_shared_subexpressions_are_evaluated_once(monkeypatch):
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: (te.exp(A[i]) + te.exp(A[i])) * te.exp(A[i]), name="B")
    calls = []
    real = EV._call
    monkeypatch.setattr(EV, "_call", lambda *a: calls.append(a[0]) or real(*a))
    (a,) = R.random_inputs([A, B], seed=16)
    (b,) = R.evaluate([A, B], [a])
    assert calls == ["exp"]
    ex = np.exp(a.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(b, (ex + ex) * ex)


def test_bool_outputs_and_logic():
    A = te.placeholder((5,), name="A")
    B = te.compute((5,), lambda i: te.any(A[i] > 0.5, te.all(A[i] < 0.0, ~(A[i] < -0.5))), name="B")
    a = np.array([-0.8, -0.2, 0.1, 0.7, 0.0], np.float32)
    (b,) = R.evaluate([A, B], [a])
    assert b.dtype == np.bool_ and b.tolist() == [False, True, False, True, False]


def test_float64_compute_and_constant_body():
    A = te.placeholder((3,), "float64", name="A")
    B = te.compute((3,), lambda i: A[i] / 3.0, name="B")
    Z = te.compute((2, 2), lambda i, j: te.const(1.5), name="Z")
    a = np.array([1.0, 2.0, 1e300], np.float64)
    b, z = R.evaluate([A, B, Z], [a])
    assert b.dtype == np.float64 and b.tolist() == [1.0 / 3.0, 2.0 / 3.0, 1e300 / 3.0]
    assert z.tolist() == [[1.5, 1.5], [1.5, 1.5]] and z.dtype == np.float32
