"""Property test of the reference evaluator: random elementwise expression trees agree bit for bit
with a tiny independent numpy interpreter of the same trees.

A tree is plain data (nested tuples); the test turns it into a te expression and, separately,
evaluates it directly on numpy float32 arrays. float32 numpy arithmetic is correctly rounded, so
the two must match exactly (NaNs included).
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compute import te
from compute.compute_dag import ComputeDAG
from compute.reference import evaluate

N = 5  # square, so that transposed reads are in bounds
_CONSTS = [0.0, 1.0, -1.0, 0.5, 2.0, -3.25, 1e-3, 7.0]

_leaf = st.one_of(
    st.tuples(st.just("load"), st.integers(0, 2), st.sampled_from(["ij", "ji", "shift"])),
    st.tuples(st.just("const"), st.sampled_from(_CONSTS)),
)


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.sampled_from(["add", "sub", "mul", "div", "min", "max"]), children, children),
        st.tuples(st.sampled_from(["neg", "abs", "exp_clipped", "tanh"]), children),
        st.tuples(st.just("select"), st.sampled_from(["lt", "ge", "eq"]), children, children,
                  children, children),
    )


trees = st.recursive(_leaf, _extend, max_leaves=12)


def _to_te(t: tuple, ins: list, i, j):
    op = t[0]
    if op == "load":
        x = ins[t[1]]
        return {"ij": x[i, j], "ji": x[j, i], "shift": x[(i + 1) % N, j]}[t[2]]
    if op == "const":
        return te.const(t[1])
    if op == "select":
        a, b, c, d = (_to_te(s, ins, i, j) for s in t[2:])
        cond = {"lt": lambda: a < b, "ge": lambda: a >= b, "eq": lambda: a == b}[t[1]]()
        return te.if_then_else(cond, c, d)
    args = [_to_te(s, ins, i, j) for s in t[1:]]
    if op == "neg":
        return -args[0]
    if op == "abs":
        return te.abs(args[0])
    if op == "exp_clipped":
        return te.exp(te.min(te.max(args[0], -4.0), 4.0))
    if op == "tanh":
        return te.tanh(args[0])
    a, b = args
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
            "min": lambda: te.min(a, b), "max": lambda: te.max(a, b)}[op]()


def _to_np(t: tuple, arrays: list[np.ndarray]) -> np.ndarray:
    op = t[0]
    if op == "load":
        x = arrays[t[1]]
        return {"ij": x, "ji": x.T, "shift": np.roll(x, -1, axis=0)}[t[2]]
    if op == "const":
        return np.full((N, N), t[1], dtype=np.float32)
    if op == "select":
        a, b, c, d = (_to_np(s, arrays) for s in t[2:])
        cond = {"lt": np.less, "ge": np.greater_equal, "eq": np.equal}[t[1]](a, b)
        return np.where(cond, c, d)
    args = [_to_np(s, arrays) for s in t[1:]]
    if op == "neg":
        return -args[0]
    if op == "abs":
        return np.abs(args[0])
    if op == "exp_clipped":
        clipped = np.minimum(np.maximum(args[0], np.float32(-4)), np.float32(4))
        return np.exp(clipped.astype(np.float64)).astype(np.float32)
    if op == "tanh":
        return np.tanh(args[0].astype(np.float64)).astype(np.float32)
    a, b = args
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
            "min": np.minimum, "max": np.maximum}[op](a, b)


@settings(max_examples=50, deadline=None)
@given(tree=trees, seed=st.integers(0, 2**16), scale=st.sampled_from([1.0, 100.0, 1e-3]),
       n_inputs=st.integers(2, 3))
def test_random_elementwise_trees_match_numpy(tree, seed, scale, n_inputs):
    # Leaves name inputs 0..2; with two inputs, leaf 2 reads input 0 again (shared loads).
    ins = [te.placeholder((N, N), name=f"X{k}") for k in range(n_inputs)]
    ins_by_leaf = [ins[k % n_inputs] for k in range(3)]
    out = te.compute((N, N), lambda i, j: _to_te(tree, ins_by_leaf, i, j), name="out")
    rng = np.random.default_rng(seed)
    arrays = [(rng.uniform(-1, 1, (N, N)) * scale).astype(np.float32) for _ in range(n_inputs)]
    arrays[0][0, 0] = 0.0  # exact zeros and ties make the comparisons and divisions interesting
    arrays[1][0, 0] = 0.0
    arrays[1][1, 1] = arrays[0][1, 1]
    with np.errstate(all="ignore"):
        want = _to_np(tree, [arrays[k % n_inputs] for k in range(3)])
    # Unread inputs are still legal arguments, so the DAG always takes all of them.
    (got,) = evaluate(ComputeDAG(ins + [out]), arrays)
    np.testing.assert_array_equal(got, want)
