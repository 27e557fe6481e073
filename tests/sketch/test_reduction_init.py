"""Where lowering puts a reduction's identity store: just outside the outermost reduce loop that
runs more than once, so the spatial loops a unit reduce split encloses (the second spatial level
of an SSRSRS tile when its outer reduce factor is 1) each start their tile from the identity
instead of zeroing a whole block of memory first."""
from __future__ import annotations

import numpy as np
import pytest

import ansor
from compute import expr as E
from compute import loop_ir as L
from sketch.lower import lower
from sketch.replay import replay
from sketch.transform_steps import step_from_json

M, N, K = 16, 32, 8
# matmul(i, j) += A[i, k] * B[k, j], tiled SSRSRS: i0 j0 i1 j1 k0 i2 j2 k1 i3 j3
ORDER = [0, 4, 1, 5, 8, 2, 6, 9, 3, 7]


def _state(k_inner: int):
    task = ansor.SearchTask(func="matmul", args=(M, N, K))
    steps = [["SP", 2, 0, M, [2, 2, 2], True], ["SP", 2, 4, N, [1, 2, 8], True],
             ["SP", 2, 8, K, [k_inner], True], ["RE", 2, ORDER]]
    return task, replay(task.compute_dag, [step_from_json(s) for s in steps])


def _init_loops(stmt: L.Stmt, outer: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """For every store of the constant 0: the names of the loops around it, outermost first."""
    if isinstance(stmt, L.For):
        return _init_loops(stmt.body, outer + (stmt.var.name,))
    if isinstance(stmt, L.Seq):
        return [x for s in stmt.stmts for x in _init_loops(s, outer)]
    if isinstance(stmt, L.IfThenElse):
        return _init_loops(stmt.then_case, outer)
    if isinstance(stmt, L.Allocate):
        return _init_loops(stmt.body, outer)
    if isinstance(stmt, L.Store) and isinstance(stmt.value, E.Const) and stmt.value.value == 0:
        return [outer]
    return []


@pytest.mark.parametrize("k_inner, inside_second_level", [(8, True), (4, False)])
def test_identity_store_goes_past_unit_reduce_loops(k_inner, inside_second_level):
    task, state = _state(k_inner)
    (loops,) = _init_loops(lower(state).body)
    # k0 has extent 1 when the inner factor is all of K: the init then sits inside i.2 and j.2
    # (the loops between k0 and k1) and only loops over the register tile (i.3, j.3).
    assert ("i.2" in loops and "j.2" in loops) is inside_second_level
    # Never inside a reduce loop that runs more than once (k.0 runs once when k_inner == K).
    assert "k.1" not in loops and ("k.0" in loops) is (k_inner == K)
    a = np.random.default_rng(0).standard_normal((M, K)).astype("float32")
    b = np.random.default_rng(1).standard_normal((K, N)).astype("float32")
    out = np.full((M, N), np.nan, dtype="float32")  # a missed init shows as NaN
    ansor.build(state)(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
