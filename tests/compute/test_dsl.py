"""Tests of the tensor-expression DSL: its error messages, interning, folding and the DAG analyses.

Error tests check that the message names the problem (the tensor, the dtype, the construct), since
that message is all a user writing a compute gets to see.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from compute import expr as E
from compute import te
from compute.compute_dag import ComputeDAG


def _matmul(m=8, n=6, k=5, names=("A", "B", "C", "k")):
    A = te.placeholder((m, k), name=names[0])
    B = te.placeholder((k, n), name=names[1])
    r = te.reduce_axis((0, k), names[3])
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name=names[2])
    return A, B, C


# ---- error messages -----------------------------------------------------------------------------

def test_wrong_number_of_indices():
    A = te.placeholder((4, 5), name="Amat")
    with pytest.raises(IndexError, match=r"'Amat' has 2 dimension.*indexed with 1"):
        A[1]
    with pytest.raises(IndexError, match=r"'Amat' has 2 dimension.*indexed with 3"):
        A[1, 2, 3]


def test_float_index():
    A = te.placeholder((4, 5), name="Amat")
    with pytest.raises(TypeError, match=r"'Amat'.*index 0 is 1.0.*not an integer"):
        A[1.0, 2]
    F = te.placeholder((4,), name="F")
    with pytest.raises(TypeError, match=r"'Amat'.*index 1.*float32.*must be integers"):
        te.compute((4,), lambda i: A[i, F[i]])


def test_unknown_dtype():
    with pytest.raises(TypeError, match=r"unknown dtype 'float16'.*float32"):
        te.placeholder((3,), "float16", name="H")
    with pytest.raises(TypeError, match="unknown dtype"):
        te.cast(te.var("x"), "complex64")


def test_reduce_axis_outside_a_reducer():
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), "kk")
    with pytest.raises(ValueError, match=r"reduce axis 'kk' is used outside a reducer"):
        te.compute((4,), lambda i: A[i, k], name="Bad")


def test_lambda_arity_mismatch():
    A = te.placeholder((4, 5), name="A")
    with pytest.raises(TypeError, match=r"'Bad'.*takes 1 index argument.*shape has 2 dimension"):
        te.compute((4, 5), lambda i: A[i, 0], name="Bad")
    with pytest.raises(TypeError, match=r"takes 3 index argument.*shape has 2"):
        te.compute((4, 5), lambda i, j, extra: A[i, j])


def test_mixing_float32_and_float64_needs_a_cast():
    A = te.placeholder((3,), "float32", name="A")
    D = te.placeholder((3,), "float64", name="D")
    with pytest.raises(TypeError, match=r"different dtypes float64 and float32.*te.cast"):
        te.compute((3,), lambda i: D[i] + A[i])
    ok = te.compute((3,), lambda i: D[i] + te.cast(A[i], "float64"))
    assert ok.dtype == "float64"


def test_float_literal_with_int_expression():
    I = te.placeholder((3,), "int32", name="I")
    with pytest.raises(TypeError, match=r"float literal 1.5 with a int32 expression"):
        te.compute((3,), lambda i: I[i] * 1.5)


def test_reduction_inside_a_larger_expression():
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), "k")
    with pytest.raises(ValueError, match=r"reduction.*must be the whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) * 2.0, name="Bad")


def test_bool_of_symbolic_expression():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match=r"truth value of the symbolic expression `A\[0\] > 1.0f`"):
        bool(A[0] > 1.0)
    with pytest.raises(TypeError, match="truth value"):
        te.compute((4,), lambda i: A[i] if A[i] > 0.0 else 0.0)
    with pytest.raises(TypeError, match="truth value"):
        bool(A[0] < A[1])


def test_placeholder_missing_from_the_argument_list():
    A, B, C = _matmul()
    with pytest.raises(ValueError, match=r"placeholder 'B'.*not in the argument list"):
        ComputeDAG([A, C])


def test_other_construction_errors():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="tensor 'A' used as a value"):
        te.compute((4,), lambda i: A + 1.0)
    with pytest.raises(ValueError, match="non-positive extent"):
        te.placeholder((4, 0), name="Z")
    with pytest.raises(ValueError, match="empty domain"):
        te.reduce_axis((3, 3), "k")
    with pytest.raises(TypeError, match=r"true division.*int32"):
        te.var("x") / 2


# ---- positive behaviour -------------------------------------------------------------------------

def test_interning_gives_identical_objects():
    A = te.placeholder((4, 5), name="A")
    i, j = te.var("i"), te.var("j")
    e1 = te.exp(A[i, j] * 2.0 + 1.0)
    e2 = te.exp(A[i, j] * 2.0 + 1.0)
    assert e1 is e2
    assert te.const(1.5) is te.const(1.5)
    assert te.const(0.0) is not te.const(-0.0)
    assert te.var("i") is not i  # each var is distinct, whatever its name
    assert te.const(1, "int32") is not te.const(1, "int64")


def test_expressions_as_dict_keys():
    i = te.var("i")
    d = {i + 1: "a", i * 2: "b"}
    assert d[i + 1] == "a" and d[i * 2] == "b"
    assert (i + 2) not in d
    assert len({i + 1, i + 1, i * 2}) == 2
    assert [i + 1, i * 2].index(i * 2) == 1


def test_eq_builds_a_compare_with_structural_truth():
    i = te.var("i")
    c = i + 1 == i + 1
    assert isinstance(c, E.Compare) and c.op == "eq" and c.dtype == "bool"
    assert bool(c) is True
    assert bool(i + 1 == i + 2) is False
    assert bool(i + 1 != i + 2) is True
    assert bool(i + 1 != i + 1) is False


def test_constant_folding_of_int_index_arithmetic():
    i = te.var("i")
    assert isinstance(te.const(6) * 7 + 1, E.Const) and (te.const(6) * 7 + 1).value == 43
    assert (te.const(-7) // 2).value == -4 and (te.const(-7) % 2).value == 1
    assert (i + 0) is i and (i * 1) is i and (i // 1) is i
    assert (i * 0).value == 0 and (i % 1).value == 0
    assert (te.const(3) < 4).value is True
    assert (te.const(2**31 - 1) + 1).value == -(2**31)  # folding wraps like the machine
    f = te.const(1.5) + 2.5
    assert not isinstance(f, E.Const)  # floats are never folded (float32 rounding must match)


def test_te_max_min_two_value_and_reduce_forms():
    A = te.placeholder((4, 5), name="A")
    two = te.max(A[0, 0], 1.0)
    assert isinstance(two, E.Binary) and two.op == "max"
    assert te.min(A[0, 0], 1.0).op == "min"
    k = te.reduce_axis((0, 5), "k")
    red = te.max(A[0, k], axis=k)
    assert isinstance(red, E.Reduce) and red.combiner == "max" and red.axes == (k,)
    red2 = te.min(A[0, k], axis=[k], where=k > 1)
    assert red2.combiner == "min" and red2.where is not None
    with pytest.raises(TypeError, match="give two values"):
        te.max(A[0, 0])


def test_dag_printing():
    A, B, C = _matmul()
    text = str(ComputeDAG([A, B, C]))
    assert text.splitlines() == ["A = PLACEHOLDER [8, 5]", "B = PLACEHOLDER [5, 6]",
                                 "C(i, j) += A[i, k]*B[k, j]"]


def test_flop_count_of_matmul():
    A, B, C = _matmul(8, 6, 5)
    assert ComputeDAG([A, B, C]).flop_count == 2 * 8 * 6 * 5


def test_workload_key():
    k1 = ComputeDAG(list(_matmul(8, 6, 5))).workload_key
    k2 = ComputeDAG(list(_matmul(8, 6, 5, names=("X", "Y", "Z", "r")))).workload_key
    k3 = ComputeDAG(list(_matmul(8, 6, 4))).workload_key
    assert k1 == k2
    assert k1 != k3
    A, B, C = _matmul(8, 6, 5)
    assert ComputeDAG([C, A, B]).workload_key != k1  # argument order is part of the kernel


def test_json_round_trip_preserves_the_key():
    A = te.placeholder((1, 6, 6, 3), name="I")
    W = te.placeholder((3, 3, 3, 4), name="W")
    P = te.compute((1, 8, 8, 3), lambda n, h, w, c: te.if_then_else(
        te.all(h >= 1, h < 7, w >= 1, w < 7), A[n, h - 1, w - 1, c], 0.0), name="pad")
    rh, rw, rc = te.reduce_axis((0, 3), "rh"), te.reduce_axis((0, 3), "rw"), te.reduce_axis((0, 3), "rc")
    O = te.compute((1, 6, 6, 4), lambda n, h, w, o: te.sum(
        P[n, h + rh, w + rw, rc] * W[rh, rw, rc, o], axis=[rh, rw, rc]), name="conv")
    R = te.compute((1, 6, 6, 4), lambda n, h, w, o: te.max(O[n, h, w, o], 0.0), name="relu")
    dag = ComputeDAG([A, W, R])
    data = json.loads(json.dumps(dag.to_json()))  # must survive real JSON
    again = ComputeDAG.from_json(data)
    assert again.workload_key == dag.workload_key
    assert str(again) == str(dag)
    assert [t.name for t in again.tensors] == ["I", "W", "relu"]


def test_opinfo_flags():
    A, B, C = _matmul()
    mm = ComputeDAG([A, B, C])
    assert mm.info[C.op].needs_multi_level_tiling and mm.info[C.op].has_reduce

    X = te.placeholder((4, 5), name="X")
    relu = te.compute((4, 5), lambda i, j: te.max(X[i, j], 0.0), name="relu")
    ex = te.compute((4, 5), lambda i, j: te.exp(relu[i, j]), name="ex")
    pad = te.compute((6, 5), lambda i, j: te.if_then_else(i >= 1, ex[te.min(i - 1, 3), j], 0.0),
                     name="pad")
    dag = ComputeDAG([X, pad])
    r, e, p = dag.info[relu.op], dag.info[ex.op], dag.info[pad.op]
    assert r.is_strictly_inlineable and r.is_elementwise and not r.needs_multi_level_tiling
    assert e.is_elementwise and e.has_expensive_op and not e.is_strictly_inlineable
    assert p.has_branch and not p.is_strictly_inlineable and not p.is_elementwise
    assert dag.info[pad.op].is_output and not r.is_output


def test_dsl_builds_what_the_reference_evaluates():
    # A smoke test tying the DSL to the oracle: te.max/te.min both forms in one DAG.
    from compute.reference import evaluate

    A = te.placeholder((3, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    M = te.compute((3,), lambda i: te.max(A[i, k], axis=k), name="M")
    Cl = te.compute((3,), lambda i: te.min(te.max(M[i], -0.5), 0.5), name="Cl")
    a = np.array([[0.1, 0.9, -2, 0], [-3, -2, -1, -0.7], [0, 0, 0.2, 0.3]], np.float32)
    (cl,) = evaluate([A, Cl], [a])
    np.testing.assert_array_equal(cl, np.clip(a.max(axis=1), -0.5, 0.5))
