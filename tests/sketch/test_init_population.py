"""Random annotation: uniform tile sizes within the caps, follow-splits that follow, annotations
where they belong, and sampled states that lower and compute the right values.

The sketches here are built by hand (``hand_sketches``) with the structure the sketch rules
produce, so these tests do not depend on the rules; the other search tests import them.
"""
from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest

import ansor
from compute import reference
from compute.ops import workloads as W
from sketch.init_population import (annotate_parallel, annotate_vectorize, fill_tile_sizes, lowers,
                                    sample_initial_population, sample_state)
from sketch.split_sampling import factorizations, is_placeholder_split, sample_split_lengths
from measure.target import host_hardware_params
from sketch.loop_state import State
from sketch.search_policy import SearchParams
from sketch.transform_steps import AnnotationStep, FollowSplitStep, PragmaStep, SplitStep
from tests.util import assert_matches_reference

PARAMS = SearchParams(population_size=64, num_cores=2).with_hardware(host_hardware_params())

# ---- hand-built sketches (the structure of sketch_rules' output) --------------------------------


def tile(state: State, stage: str, consumer: str | None = None, level: int = 1) -> State:
    """Multi-level tiling "SSRSRS" of ``stage`` with placeholder lengths; with ``consumer``, the
    consumer follows the first ``level`` levels and ``stage`` is computed at its tile."""
    sid = state.stage_index(stage)
    op = state.stages[sid].op
    sp = [a.name for a in op.axes]
    red = [a.name for a in op.reduce_axes]
    split_ids = []
    for name in sp:
        state = state.split(sid, name, [1, 1, 1])
        split_ids.append(len(state.steps) - 1)
    for name in red:
        state = state.split(sid, name, [1])
    order = ([f"{n}.0" for n in sp] + [f"{n}.1" for n in sp] + [f"{r}.0" for r in red]
             + [f"{n}.2" for n in sp] + [f"{r}.1" for r in red] + [f"{n}.3" for n in sp])
    state = state.reorder(sid, order)
    if consumer is None:
        return state
    cid = state.stage_index(consumer)
    csp = [a.name for a in state.stages[cid].op.axes]
    for name, src in zip(csp, split_ids):
        state = state.follow_split(cid, name, src, level)
    state = state.reorder(cid, [f"{n}.{lv}" for lv in range(level + 1) for n in csp])
    return state.compute_at(sid, cid, f"{csp[-1]}.{level - 1}")


def hand_sketches(dag: ansor.ComputeDAG) -> list[State]:
    """Sketches for the workloads these tests use, built step by step."""
    s = dag.init_state()
    names = [op.name for op in dag.compute_ops]
    if names == ["matmul"]:
        c = s.cache_write("matmul")
        return [tile(c, "matmul.local", "matmul", lv) for lv in (1, 2)] + [tile(s, "matmul")]
    if names == ["matmul", "relu"]:
        return [tile(s, "matmul", "relu", lv) for lv in (1, 2)]
    if names == ["conv2d_nhwc_pad", "conv2d_nhwc", "bias_add", "relu"]:
        s = s.compute_inline("bias_add")
        return [tile(s, "conv2d_nhwc", "relu", lv) for lv in (1, 2)]
    if names == ["softmax_maxelem", "softmax_exp", "softmax_expsum", "softmax"]:
        return [s]  # nothing to tile: location, parallel and vectorize are all annotation's
    if names == ["norm_sumsq", "norm"]:
        # rfactor: fuse the reduce loops, split (placeholder), factor out either part
        f = s.fuse("norm_sumsq", ["ri", "rj"]).split("norm_sumsq", "ri@rj@", [1])
        return [f.rfactor("norm_sumsq", "ri@rj@.0", 0), f.rfactor("norm_sumsq", "ri@rj@.1", 0)]
    raise AssertionError(f"no hand sketch for {names}")


WORKLOADS = {
    "matmul": (W.matmul, (64, 48, 40)),
    "matmul_relu": (W.matmul_relu, (64, 48, 40)),
    "conv2d_bias_relu": (W.conv2d_bias_relu, (1, 8, 8, 16, 16, 3, 3, 1, 1)),
    "softmax": (W.softmax, (8, 24)),
    "norm": (W.norm, (16, 40)),
}


def make_dag(name: str) -> ansor.ComputeDAG:
    fn, args = WORKLOADS[name]
    return ansor.ComputeDAG(fn(*args))


def check_runs(state: State, dag: ansor.ComputeDAG, what: str = "") -> None:
    inputs = reference.random_inputs(dag.tensors, 0)
    assert_matches_reference(ansor.build(state), dag, inputs, what=what)


# ---- tile sizes ---------------------------------------------------------------------------------


def test_factorizations_are_all_exact_factorisations_within_the_cap():
    got = factorizations(1024, 4, 64)
    assert len(set(got)) == len(got)
    assert all(math.prod(f) == 1024 and f[-1] <= 64 for f in got)
    # Brute force over powers of two: every exponent split whose innermost is <= 2**6.
    expected = {tuple(2 ** e for e in es) for es in itertools.product(range(11), repeat=4)
                if sum(es) == 10 and es[-1] <= 6}
    assert set(got) == expected
    assert factorizations(17, 3, 64) == ((1, 1, 17), (1, 17, 1), (17, 1, 1))
    assert factorizations(17, 3, 4) == ((1, 17, 1), (17, 1, 1))


def test_split_lengths_are_uniform_over_factorisations():
    rng = random.Random(0)
    options = factorizations(12, 3, 64)
    counts = Counter(sample_split_lengths(12, 2, True, 64, rng) for _ in range(18000))
    assert set(counts) == {f[1:] for f in options}
    mean = 18000 / len(options)
    # Level-by-level sampling would put ~3x more mass on some tuples; uniform stays within 10%.
    assert all(abs(c - mean) < 0.1 * mean for c in counts.values()), counts


def test_fill_tile_sizes_fills_every_placeholder_within_the_cap():
    dag = make_dag("matmul")
    params = SearchParams(max_innermost_split_factor=4, num_cores=2).with_hardware(host_hardware_params())
    rng = random.Random(1)
    seen = set()
    for sketch in hand_sketches(dag):
        n_placeholders = sum(is_placeholder_split(st) for st in sketch.steps)
        for _ in range(20):
            s = fill_tile_sizes(sketch, rng, params)
            splits = [st for st in s.steps if isinstance(st, SplitStep)]
            assert len(splits) == n_placeholders
            for sp in splits:
                # An exact factorisation, or tiles that need not divide with a tail strategy.
                assert sp.extent % math.prod(sp.lengths) == 0 or sp.tail in ("peel", "shift", "pad")
                assert sp.extent % math.prod(sp.lengths) != 0 or sp.tail == "guard"
                assert sp.lengths[-1] <= 4
                seen.add(sp.lengths)
            for st in s.steps:
                if isinstance(st, FollowSplitStep):  # follows the filled lengths on replay
                    src = s.steps[st.src_step_id].lengths
                    assert st.lengths(s) == src[: st.n_split - 1] + (math.prod(src[st.n_split - 1:]),)
            assert lowers(s)
    assert len(seen) > 10


def test_follow_split_consumer_tiles_match_the_producer():
    dag = make_dag("matmul_relu")
    rng = random.Random(3)
    s = fill_tile_sizes(hand_sketches(dag)[1], rng, PARAMS)  # level 2
    mm, relu = s["matmul"], s["relu"]
    ext = {it.name: it.extent for it in (mm.iters[i] for i in mm.leaves)}
    cons = {it.name: it.extent for it in (relu.iters[i] for i in relu.leaves)}
    for ax in ("i", "j"):
        assert cons[f"{ax}.0"] == ext[f"{ax}.0"]
        assert cons[f"{ax}.1"] == ext[f"{ax}.1"]
        assert cons[f"{ax}.2"] == ext[f"{ax}.2"] * ext[f"{ax}.3"]


# ---- annotations --------------------------------------------------------------------------------


def test_parallel_and_vectorize_annotations():
    dag = make_dag("matmul")
    rng = random.Random(0)
    params = SearchParams(num_cores=2, max_vector_lanes=16, max_vector_registers=1)
    for _ in range(30):
        s = sample_state(hand_sketches(dag)[0], rng, params)
        root = [st for st in s.stages if st.compute_at == "root" and not st.is_placeholder]
        for st in root:
            par = [st.iters[i] for i in st.leaves if st.iters[i].annotation == "parallel"]
            assert len(par) <= 1
            if par:
                assert st.iters[st.leaves[0]].annotation == "parallel"
        for st in s.stages:
            for i in st.leaves:
                it = st.iters[i]
                if it.annotation == "vectorize":
                    assert it.kind == "spatial" and it.extent <= 16 and i == st.leaves[-1]
                if it.annotation == "parallel":
                    assert st.compute_at == "root"
        pragmas = [x for x in s.steps if isinstance(x, PragmaStep)]
        assert pragmas and all(int(p.pragma_type.split("$")[1]) in params.auto_unroll_steps
                               for p in pragmas)


def test_parallel_fuses_outer_loops_up_to_the_core_target():
    dag = make_dag("softmax")
    s = annotate_parallel(dag.init_state(), random.Random(0), SearchParams(num_cores=2))
    # softmax (8, 24): i alone has 8 < 32 iterations, so i and j are fused (192) where spatial.
    out = s["softmax"]
    assert out.iters[out.leaves[0]].annotation == "parallel"
    assert out.iters[out.leaves[0]].extent == 8 * 24
    red = s["softmax_maxelem"]  # (i, k): k is a reduction, only i can be parallel
    assert red.iters[red.leaves[0]].extent == 8 and red.iters[red.leaves[0]].annotation == "parallel"
    assert red.iters[red.leaves[1]].annotation == "none"


def test_vectorize_respects_the_lane_cap():
    dag = make_dag("softmax")
    s = annotate_vectorize(dag.init_state(), random.Random(0),
                           SearchParams(max_vector_lanes=4, max_vector_registers=2))
    for st in s.stages:
        for i in st.leaves:
            if st.iters[i].annotation == "vectorize":
                assert st.iters[i].extent <= 8
    assert not any(isinstance(x, AnnotationStep) for x in s.steps)  # 24 > 8: no vector loop
    s = annotate_vectorize(dag.init_state(), random.Random(0),
                           SearchParams(max_vector_lanes=16, max_vector_registers=2))
    assert s["softmax"].iters[s["softmax"].leaves[-1]].annotation == "vectorize"


# ---- sampled states run correctly ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_sampled_states_lower_and_compute_correctly(name):
    dag = make_dag(name)
    rng = random.Random(7)
    stats: dict = {}
    pop = sample_initial_population(hand_sketches(dag), 5, rng, PARAMS, stats)
    assert len(pop) == 5 and stats["attempts"] >= 5
    assert len({s.canonical_key() for s in pop}) == 5
    for s in pop:
        assert lowers(s)
        check_runs(s, dag, name)


def test_sample_initial_population_is_reproducible_and_distinct():
    dag = make_dag("conv2d_bias_relu")
    a = sample_initial_population(hand_sketches(dag), 40, random.Random(5), PARAMS)
    b = sample_initial_population(hand_sketches(dag), 40, random.Random(5), PARAMS)
    assert [s.canonical_key() for s in a] == [s.canonical_key() for s in b]
    assert len({s.canonical_key() for s in a}) == len(a) == 40


def test_small_spaces_stop_at_the_attempt_limit():
    # A 3x5 elementwise op has a handful of distinct schedules: sampling must end, not spin.
    dag = ansor.ComputeDAG(W.relu(3, 5))
    stats: dict = {}
    pop = sample_initial_population([dag.init_state()], 100, random.Random(0), PARAMS, stats)
    assert 1 <= len(pop) < 100
    assert stats["attempts"] <= 4 * PARAMS.init_max_attempts_factor * 100


def test_states_from_the_sketch_rules_lower_and_run():
    rules = pytest.importorskip("sketch.sketch_rules")
    rng = random.Random(11)
    for name in ("matmul", "conv2d_bias_relu", "softmax"):
        dag = make_dag(name)
        pop = sample_initial_population(rules.generate_sketches(dag, num_cores=2), 3, rng, PARAMS)
        assert pop
        for s in pop:
            check_runs(s, dag, f"{name} (generated sketches)")


def test_prime_extents_get_imperfect_tiles_and_powers_of_two_mostly_exact_ones():
    params = SearchParams(num_cores=2, max_vector_lanes=8)
    for extent, lo, hi in ((1031, 0.85, 1.0), (1001, 0.55, 0.9), (1024, 0.0, 0.2)):
        dag = ansor.ComputeDAG(W.matmul(extent, extent, extent))
        rng = random.Random(0)
        n = imperfect = 0
        for sketch in hand_sketches(dag):
            for _ in range(40):
                s = fill_tile_sizes(sketch, rng, params)
                for sp in s.steps:
                    if isinstance(sp, SplitStep) and len(sp.lengths) == 3:
                        n += 1
                        imperfect += sp.extent % math.prod(sp.lengths) != 0
                        assert math.prod(sp.lengths) <= sp.extent
        assert lo <= imperfect / n <= hi, (extent, imperfect / n)


def test_without_imperfect_tiles_every_split_is_an_exact_factorisation():
    params = SearchParams(num_cores=2, max_vector_lanes=8, imperfect_split_prob=0.0,
                          awkward_imperfect_split_prob=0.0)
    dag = ansor.ComputeDAG(W.matmul(31, 17, 97))
    rng = random.Random(0)
    for sketch in hand_sketches(dag):
        for _ in range(20):
            s = fill_tile_sizes(sketch, rng, params)
            for sp in s.steps:
                if isinstance(sp, SplitStep):
                    assert sp.extent % math.prod(sp.lengths) == 0 and sp.tail == "guard"
