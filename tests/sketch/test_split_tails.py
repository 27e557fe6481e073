"""Splits whose parts do not divide the extent: the tail strategies (guard, peel, shift, pad), their
records, the code they lower to, and their results on prime extents against the reference."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ansor
from compute import loop_ir as L
from compute.ops import workloads as W
from sketch.loop_state import InvalidStepError
from sketch.lower import lower
from sketch.stage import SPLIT_TAILS
from sketch.transform_steps import SplitStep, step_from_json
from tests.util import assert_matches_reference

PRIMES = (1, 3, 7, 17, 31, 97)


def _inputs(dag, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.tensors
            if not hasattr(t.op, "body")]


def gemm_state(M: int, N: int, K: int, tile: tuple[int, int], reg: tuple[int, int, int],
               out_tail: str, acc_tail: str):
    """The GEMM sketch's structure: output tiles in parallel, a local accumulator per tile with a
    vectorized, unrolled register tile; ``tile`` and ``reg`` need not divide anything."""
    dag = ansor.ComputeDAG(W.matmul(M, N, K))
    s = dag.init_state().cache_write("matmul")
    CL, C = "matmul.local", "matmul"
    s = s.split(C, "i", [tile[0]], tail=out_tail).split(C, "j", [tile[1]], tail=out_tail)
    s = s.reorder(C, ["i.0", "j.0", "i.1", "j.1"]).fuse(C, ["i.0", "j.0"]).parallel(C, 0)
    s = s.compute_at(CL, C, 0)
    s = s.split(C, "j.1", [reg[1]], tail=out_tail).vectorize(C, "j.1.1")
    s = s.split(CL, "i", [reg[0]], tail=acc_tail).split(CL, "j", [reg[1]], tail=acc_tail)
    s = s.split(CL, "k", [reg[2]], tail="peel" if acc_tail == "pad" else acc_tail)  # k cannot pad
    s = s.reorder(CL, ["k.0", "i.0", "j.0", "k.1", "i.1", "j.1"])
    return dag, s.unroll(CL, "i.1").vectorize(CL, "j.1")


def _ifs(stmt: L.Stmt) -> list[L.IfThenElse]:
    return [s for s in L.walk(stmt) if isinstance(s, L.IfThenElse)]


# ---- records ------------------------------------------------------------------------------------

def test_a_guard_split_writes_the_record_it_always_wrote():
    step = SplitStep(2, 0, 17, (4,), True)
    assert step.to_json() == ["SP", 2, 0, 17, [4], True]
    assert step_from_json(["SP", 2, 0, 17, [4], True]) == step


@pytest.mark.parametrize("tail", ["peel", "shift"])
def test_a_tail_strategy_is_recorded_and_replayed(tail):
    dag, s = gemm_state(31, 17, 7, (8, 8), (3, 8, 4), tail, "peel")
    line = [st.to_json() for st in s.steps]
    assert ["SP", 3, 0, 31, [8], True, tail] in line
    again = dag.replay([step_from_json(x) for x in line])
    assert str(lower(again)) == str(lower(s))


def test_unknown_and_invalid_tails_are_clear_errors():
    dag = ansor.ComputeDAG(W.matmul(31, 17, 7))
    s = dag.init_state()
    with pytest.raises(InvalidStepError, match="unknown tail strategy 'round'.*guard, peel, shift"):
        s.split("matmul", "i", [4], tail="round")
    with pytest.raises(InvalidStepError, match="shift tail strategy needs a stage without a reduction"):
        s.split("matmul", "i", [4], tail="shift")
    with pytest.raises(ValueError, match="expected 5 or 6 fields"):
        step_from_json(["SP", 2, 0, 17, [4], True, "peel", 1])


# ---- the code each strategy lowers to -------------------------------------------------------------

def test_shift_leaves_no_guard_at_all():
    # 8x8 output tiles over 31x17 shifted inwards; the accumulator's tiles divide the tile.
    _, s = gemm_state(31, 17, 8, (8, 8), (4, 8, 4), "shift", "guard")
    f = lower(s)
    assert _ifs(f.body) == []
    assert "min(" in str(f)


def test_guard_tests_inside_the_register_tile_and_peel_hoists_the_tests_out():
    _, guarded = gemm_state(31, 17, 7, (8, 8), (3, 8, 4), "guard", "guard")
    _, peeled = gemm_state(31, 17, 7, (8, 8), (3, 8, 4), "peel", "peel")
    vec = [s for s in L.walk(lower(guarded).body) if isinstance(s, L.For) and s.kind == "vectorized"
           and "matmul.local" in str(s) and "A[" in str(s)]
    assert vec and all(_ifs(v.body) for v in vec)  # every vector FMA is masked
    f = lower(peeled)
    par = next(s for s in L.walk(f.body) if isinstance(s, L.For) and s.kind == "parallel")
    body = par.body.body if isinstance(par.body, L.Allocate) else par.body
    # The first statement in the parallel loop chooses between a clean and a guarded tile ...
    assert isinstance(body, L.IfThenElse) and body.else_case is not None
    # ... and the clean tile's register tile has no test left.
    clean_fma = [s for s in L.walk(body.then_case) if isinstance(s, L.For)
                 and s.kind == "vectorized" and "A[" in str(s)]
    assert clean_fma and not any(_ifs(v) for v in clean_fma)


# ---- results on prime extents -----------------------------------------------------------------------

@pytest.mark.parametrize("tail", SPLIT_TAILS)
@pytest.mark.parametrize("n", PRIMES)
def test_gemm_on_prime_extents(n, tail):
    acc_tail = "peel" if tail == "shift" else tail
    # Tiles bigger than, equal to and not dividing the extent, in one schedule.
    dag, s = gemm_state(n, 97 if n != 97 else 31, n, (min(n, 5), 8), (min(n, 2), 8, min(n, 3)),
                        tail, acc_tail)
    assert_matches_reference(ansor.build(s), dag, _inputs(dag, n), 1e-4, 1e-4, f"{n} {tail}")


@pytest.mark.parametrize("tail", SPLIT_TAILS)
def test_pure_stages_on_prime_extents(tail):
    dag = ansor.ComputeDAG(W.relu(97, 31))
    s = dag.init_state()
    s = s.split("relu", 0, [4, 3], tail=tail).split("relu", 3, [8], tail=tail)
    s = s.fuse("relu", [0, 1]).parallel("relu", 0).vectorize("relu", 3)
    assert_matches_reference(ansor.build(s), dag, _inputs(dag), 0, 0, tail)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(M=st.sampled_from(PRIMES), N=st.sampled_from(PRIMES), K=st.sampled_from(PRIMES),
       seed=st.integers(0, 10**6))
def test_random_imperfect_gemm_tiles_match_the_reference(M, N, K, seed):
    rng = random.Random(seed)
    tile = (rng.randint(1, 12), rng.randint(1, 12))
    reg = (rng.randint(1, 6), rng.choice([1, 3, 4, 8, 16]), rng.randint(1, 9))
    out_tail, acc_tail = rng.choice(SPLIT_TAILS), rng.choice(("guard", "peel", "pad"))
    try:
        dag, s = gemm_state(M, N, K, tile, reg, out_tail, acc_tail)
    except InvalidStepError:
        return  # a part longer than its extent
    assert_matches_reference(ansor.build(s), dag, _inputs(dag, seed), 1e-4, 1e-4,
                             f"{M}x{N}x{K} tile={tile} reg={reg} {out_tail}/{acc_tail}")


def test_peeling_knows_a_split_guard_caps_the_index_a_region_check_reads():
    # 100 rows in output tiles of 24, the accumulator's 24 rows in register tiles of 5 (4 full,
    # one of 4): the region check must not send the last full output tile to the guarded copy.
    _, s = gemm_state(100, 100, 64, (24, 24), (5, 8, 32), "peel", "peel")
    f = lower(s)
    par = next(x for x in L.walk(f.body) if isinstance(x, L.For) and x.kind == "parallel")
    top = par.body.body
    assert isinstance(top, L.IfThenElse)
    assert str(top.cond) == "i.0@j.0@ // 5*24 + 23 < 100 && i.0@j.0@ % 5*24 + 23 < 100"


def test_a_partial_tile_skips_the_iterations_past_the_extent():
    # 28 rows in tiles of 16 (one partial of 12) of 4-row register tiles: in the partial tile the
    # last register tile (rows 28..31) has no row at all; it is skipped by one test.
    _, s = gemm_state(28, 16, 8, (16, 16), (4, 8, 8), "peel", "peel")
    text = str(lower(s))
    assert "if i.0@j.0@*16 + i.0*4 < 28:" in text, text
    # and no test is made that the guard right inside it repeats
    lines = [x.strip() for x in text.splitlines()]
    assert not any(a == b and a.startswith("if ") for a, b in zip(lines, lines[1:]))
