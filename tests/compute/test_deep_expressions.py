"""Deep expressions (long chains of operations in one compute body) go through the whole pipeline.

A user's compute may legitimately be a chain of thousands of operations (an unrolled polynomial,
generated code). Every stage that walks expressions - interning, printing, the DAG analyses and
FLOP count, JSON round-trip, the reference evaluator, lowering, code generation, the cost model's
features, sketch generation and tuning - must handle them without Python recursion, so none of
them may end in a RecursionError.
"""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

import ansor
from ansor import te
from compute import compute_dag as CD
from compute import expr_analysis as EA
from compute import reference
from tests.loop_ir_interp import run as interpret

N_POINTS = 8


def left_chain(n: int):
    """x = ((A[i] + A[i]) + A[i]) + ...: the nesting is in the left operand."""
    A = te.placeholder((N_POINTS,), name="A")

    def body(i):
        x = A[i]
        for _ in range(n):
            x = x + A[i]
        return x

    return A, te.compute((N_POINTS,), body, name="B"), lambda a: a * np.float32(n + 1)


def right_chain(n: int):
    """x = A[i] * (A[i] * (... )): the nesting is in the right operand, with subtractions."""
    A = te.placeholder((N_POINTS,), name="A")

    def body(i):
        x = A[i]
        for k in range(n):
            x = (A[i] - x) if k % 2 else (0.5 * x)
        return x

    def expect(a):
        x = a.copy()
        for k in range(n):
            x = (a - x) if k % 2 else (np.float32(0.5) * x)
        return x

    return A, te.compute((N_POINTS,), body, name="B"), expect


def mixed_chain(n: int):
    """Every node kind on the way: mul, add, select, compare, casts, min/max, a call, negation."""
    A = te.placeholder((N_POINTS,), name="A")

    def body(i):
        x = A[i]
        for k in range(n):
            m = k % 5
            if m == 0:
                x = x * 0.5 + A[i]
            elif m == 1:
                x = te.if_then_else(x > 1.5, x - 1.0, x)
            elif m == 2:
                x = te.cast(te.cast(x, "float64") * 1.0, "float32")
            elif m == 3:
                x = te.min(te.max(x, -100.0), 100.0)
            else:
                x = -(-te.abs(x))
        return x

    def expect(a):
        x = a.copy()
        for k in range(n):
            m = k % 5
            if m == 0:
                x = x * np.float32(0.5) + a
            elif m == 1:
                x = np.where(x > 1.5, x - np.float32(1.0), x)
            elif m == 2:
                x = (x.astype(np.float64) * 1.0).astype(np.float32)
            elif m == 3:
                x = np.minimum(np.maximum(x, np.float32(-100)), np.float32(100))
            else:
                x = np.abs(x)
        return x

    return A, te.compute((N_POINTS,), body, name="B"), expect


def deep_reduction(n: int):
    """A sum whose source is a deep chain: B[i] = sum_k (A[k] + A[k] + ... + A[i])."""
    A = te.placeholder((N_POINTS,), name="A")
    k = te.reduce_axis((0, N_POINTS), name="k")

    def body(i):
        x = A[i]
        for _ in range(n):
            x = x + A[k]
        return te.sum(x, axis=k)

    return A, te.compute((N_POINTS,), body, name="B"), \
        lambda a: (N_POINTS * a + n * a.sum(dtype=np.float32)).astype(np.float32)


def deep_index(n: int):
    """The depth is in an index: A[i + 1 - 1 + 1 - ...], which is just A[i]."""
    A = te.placeholder((N_POINTS,), name="A")

    def body(i):
        j = i
        for k in range(n):
            j = j + 1 if k % 2 == 0 else j - 1
        return A[j] * 2.0

    assert n % 2 == 0
    return A, te.compute((N_POINTS,), body, name="B"), lambda a: a * np.float32(2.0)


SHAPES = {"left": left_chain, "right": right_chain, "mixed": mixed_chain,
          "reduction": deep_reduction, "index": deep_index}
FLOPS_PER_POINT = {"left": lambda n: n, "reduction": lambda n: N_POINTS * (n + 1),
                   "index": lambda n: 1}


def _inputs():
    return np.random.default_rng(0).uniform(0.5, 1.5, N_POINTS).astype("float32")


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("n", [400, 600, 5000, pytest.param(20000, marks=pytest.mark.slow)])
def test_dag_analyses_print_json_flops(shape, n):
    A, B, _ = SHAPES[shape](n)
    dag = ansor.ComputeDAG([A, B])
    text = str(dag)
    assert text.startswith("A = PLACEHOLDER [8]\nB(i)")
    assert len(text) > n
    assert repr(B.op.body)  # the expression's own repr
    flops = CD.op_flops(B.op)
    if shape in FLOPS_PER_POINT:
        assert flops == N_POINTS * FLOPS_PER_POINT[shape](n)
    data = json.loads(json.dumps(dag.to_json()))  # the JSON text itself must not nest n deep
    again = ansor.ComputeDAG.from_json(data)
    assert again.workload_key == dag.workload_key
    assert str(again) == text
    assert [id(v) for v in EA.free_vars(B.op.body)] == [id(a) for a in B.op.axes]


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("n", [400, 600, pytest.param(5000, marks=pytest.mark.slow)])  # LLVM: ~13 s
def test_reference_and_build_match_numpy(shape, n):
    A, B, expect = SHAPES[shape](n)
    a = _inputs()
    want = expect(a)
    ref = reference.evaluate([A, B], [a])[0]
    np.testing.assert_allclose(ref, want, rtol=1e-4)
    kernel = ansor.build([A, B])
    out = np.full(N_POINTS, np.nan, "float32")
    kernel(a, out)
    np.testing.assert_allclose(out, want, rtol=1e-4)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_lowering_interpreted_and_features(shape):
    from cost_model.feature import get_per_store_features

    A, B, expect = SHAPES[shape](1500)
    dag = ansor.ComputeDAG([A, B])
    assert dag.lower().params  # lowering at depth; the test interpreter itself recurses, so it
    A, B, expect = SHAPES[shape](60)  # checks what lowering produces on a shallower chain
    a = _inputs()
    out = np.full(N_POINTS, np.nan, "float32")
    interpret(ansor.ComputeDAG([A, B]).lower(), [a, out])
    np.testing.assert_allclose(out, expect(a), rtol=1e-4)
    feats, _ = get_per_store_features([dag.init_state()])
    assert np.isfinite(np.asarray(feats[0], dtype=float)).all()


@pytest.mark.parametrize("shape", ["left", pytest.param("reduction", marks=pytest.mark.slow), "index"])
def test_sketches_samples_build_and_run(shape):
    from sketch.init_population import sample_initial_population
    from measure.target import host_hardware_params
    from sketch.search_params import SearchParams
    from sketch.sketch_rules import generate_sketches

    A, B, expect = SHAPES[shape](1500)
    dag = ansor.ComputeDAG([A, B])
    hw = host_hardware_params()
    sketches = generate_sketches(dag, hardware_params=hw)
    assert sketches
    states = sample_initial_population(sketches, 3, random.Random(0), SearchParams().with_hardware(hw))
    assert states
    a = _inputs()
    for s in states:
        out = np.full(N_POINTS, np.nan, "float32")
        ansor.build(s)(a, out)
        np.testing.assert_allclose(out, expect(a), rtol=1e-4)


@pytest.mark.slow
def test_tune_two_trials_of_a_deep_chain():
    A, B, _ = left_chain(600)
    task = ansor.SearchTask(tensors=[A, B])
    result = task.tune(ansor.TuningOptions(num_measure_trials=2, num_measures_per_round=2,
                                           verbose=0, seed=0))
    assert np.isfinite(result.best_cost) and result.best_cost > 0


def test_shallow_dags_keep_their_workload_key():
    # The JSON of ordinary bodies (and so every existing log's workload key) is unchanged.
    A = te.placeholder((8,), name="A")
    Bp = te.placeholder((8, 8), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((8,), lambda i: te.sum(
        te.if_then_else(A[i] > 0.5, Bp[i, k] * A[k], te.exp(A[k]))
        + te.cast(te.cast(A[i], "float64") * 2.0, "float32"), axis=k), name="C")
    D = te.compute((8,), lambda i: te.max(C[i] + A[(i * 3 + 1) % 8], 0.0), name="D")
    assert ansor.ComputeDAG([A, Bp, D]).workload_key == "3afb24ad4e4d86140b85bd1c0c93f425"


def test_deeply_nested_json_body_loads_iteratively():
    # A hostile or old record may nest its body as deep as json.loads allows: it must load (or be
    # rejected with a ValueError), never exhaust the Python stack.
    A, B, _ = left_chain(3)
    data = ansor.ComputeDAG([A, B]).to_json()
    body = ["load", 0, ["ax", 0]]
    for _ in range(900):
        body = ["b", "add", body, ["load", 0, ["ax", 0]]]
    data["ops"][1]["body"] = body
    dag = ansor.ComputeDAG.from_json(json.loads(json.dumps(data)))
    assert CD.op_flops(dag.ops[1]) == N_POINTS * 900


@pytest.mark.parametrize("body", [
    ["b", "add", ["load", 0, ["ax", 0]]],
    ["b", "add", ["load", 0, ["ax", 0]], "x"],
    ["load", 0, ["ax", 7]],
    [],
    ["@", 3],
])
def test_malformed_json_body_is_a_value_error(body):
    A, B, _ = left_chain(3)
    data = ansor.ComputeDAG([A, B]).to_json()
    data["ops"][1]["body"] = body
    with pytest.raises(ValueError, match="expression"):
        ansor.ComputeDAG.from_json(data)


def test_shared_subexpressions_are_visited_once():
    # x = x + x doubled 60 times: 61 distinct nodes, a tree of 2**61 - 1. Every walk must be
    # linear in the distinct nodes (it would never finish otherwise).
    A = te.placeholder((N_POINTS,), name="A")

    def body(i):
        x = A[i]
        for _ in range(60):
            x = x + x
        return x

    B = te.compute((N_POINTS,), body, name="B")
    dag = ansor.ComputeDAG([A, B])
    assert CD.op_flops(B.op) == N_POINTS * (2 ** 60 - 1)
    again = ansor.ComputeDAG.from_json(json.loads(json.dumps(dag.to_json())))
    assert again.workload_key == dag.workload_key
    a = np.full(N_POINTS, 2.0 ** -70, "float32")
    out = np.empty(N_POINTS, "float32")
    ansor.build(dag)(a, out)
    np.testing.assert_allclose(out, a * np.float32(2.0 ** 60), rtol=1e-6)
    assert len(str(dag)) < 2_000_000  # printing a tree this size is cut short, not attempted
