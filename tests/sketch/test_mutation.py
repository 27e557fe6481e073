"""Mutations: each kind changes what it says, keeps the state valid, and mutated programs still
compute the right values."""
from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from sketch import mutation as M
from sketch.init_population import lowers, sample_initial_population, sample_state
from measure.target import host_hardware_params
from sketch.loop_state import InvalidStepError
from sketch.replay import TRACE, replay
from sketch.search_policy import SearchParams
from sketch.transform_steps import AnnotationStep, ComputeAtStep, PragmaStep, SplitStep
from tests.sketch.test_init_population import check_runs, hand_sketches, make_dag

PARAMS = SearchParams(population_size=64, num_cores=2).with_hardware(host_hardware_params())


def _population(name: str, n: int = 8, seed: int = 0, params: SearchParams = PARAMS):
    dag = make_dag(name)
    return dag, sample_initial_population(hand_sketches(dag), n, random.Random(seed), params)


def _diff(a, b) -> list[int]:
    assert len(a.steps) == len(b.steps)
    return [k for k, (x, y) in enumerate(zip(a.steps, b.steps)) if x != y]


def test_tile_size_mutation_moves_one_factor_within_one_split():
    params = SearchParams(max_innermost_split_factor=8, num_cores=2, imperfect_split_prob=0.0,
                          awkward_imperfect_split_prob=0.0).with_hardware(host_hardware_params())
    dag, pop = _population("matmul", 10, params=params)
    rng = random.Random(1)
    for parent in pop:
        for _ in range(10):
            try:
                child = M.mutate_tile_size(parent, rng, params)
            except InvalidStepError:
                continue
            changed = [k for k in _diff(parent, child) if isinstance(parent.steps[k], SplitStep)]
            assert len(changed) == 1
            old, new = parent.steps[changed[0]], child.steps[changed[0]]
            assert old.lengths != new.lengths and old.extent == new.extent
            assert new.extent % math.prod(new.lengths) == 0  # still an exact factorisation
            if new.lengths[-1] > old.lengths[-1]:
                assert new.lengths[-1] <= 8  # the cap holds for a factor moved inwards
            assert lowers(child)


def test_tile_size_mutation_on_a_prime_extent_draws_imperfect_tiles_with_a_tail():
    import ansor
    from compute.ops import workloads as W
    dag = ansor.ComputeDAG(W.matmul(31, 17, 97))
    params = SearchParams(num_cores=2, max_vector_lanes=8, awkward_imperfect_split_prob=1.0)
    pop = sample_initial_population(hand_sketches(dag), 6, random.Random(0), params)
    rng = random.Random(3)
    tails = Counter()
    for parent in pop:
        for _ in range(6):
            try:
                child = M.mutate_tile_size(parent, rng, params)
            except InvalidStepError:
                continue
            (k,) = [k for k in _diff(parent, child) if isinstance(parent.steps[k], SplitStep)]
            new = child.steps[k]
            assert math.prod(new.lengths) <= new.extent
            assert (new.extent % math.prod(new.lengths) == 0) == (new.tail == "guard")
            tails[new.tail] += 1
            assert lowers(child)
    assert tails["peel"] > 0
    check_runs(child, dag)


def test_auto_unroll_mutation_changes_the_pragma_value():
    dag, pop = _population("matmul_relu", 4)
    rng = random.Random(2)
    for parent in pop:
        child = M.mutate_auto_unroll(parent, rng, PARAMS)
        (k,) = _diff(parent, child)
        assert isinstance(child.steps[k], PragmaStep)
        assert child.steps[k].pragma_type != parent.steps[k].pragma_type
        value = int(child.steps[k].pragma_type.split("$")[1])
        assert value in PARAMS.auto_unroll_steps
        assert child[child.steps[k].stage_id].auto_unroll_max_step == value


def _parallel_width(state) -> list[int]:
    return [st.iters[i].extent for st in state.stages for i in st.leaves
            if st.iters[i].annotation == "parallel"]


def test_parallel_mutation_changes_the_fused_loop_and_keeps_the_rest():
    dag, pop = _population("softmax", 8)
    rng = random.Random(3)
    changed = 0
    for parent in pop:
        try:
            child = M.mutate_parallel(parent, rng, PARAMS)
        except InvalidStepError:
            continue
        changed += 1
        assert lowers(child)
        assert _parallel_width(child) != _parallel_width(parent)
        # vectorized loops survive the position shift
        vec = lambda s: sorted(s.stages[a.stage_id].name for a in s.steps  # noqa: E731
                               if isinstance(a, AnnotationStep) and a.annotation == "vectorize")
        assert vec(child) == vec(parent)
        check_runs(child, dag, "parallel mutation")
    assert changed


def test_compute_location_mutation_moves_within_the_same_target():
    dag, pop = _population("conv2d_bias_relu", 30, seed=4)
    rng = random.Random(4)
    moved = 0
    for parent in pop:
        try:
            child = M.mutate_compute_location(parent, rng, PARAMS)
        except InvalidStepError:
            continue
        (k,) = _diff(parent, child)[:1]
        a, b = parent.steps[k], child.steps[k]
        assert isinstance(a, ComputeAtStep) and isinstance(b, ComputeAtStep)
        assert (a.stage_id, a.target_stage_id) == (b.stage_id, b.target_stage_id)
        assert a.target_iter_id != b.target_iter_id
        assert child.stages[a.stage_id].name == "conv2d_nhwc_pad"  # never the tiled conv
        assert lowers(child)
        if moved < 3:
            check_runs(child, dag, "compute location mutation")
        moved += 1
    assert moved


def test_mutate_respects_the_weights():
    dag, pop = _population("matmul", 6)
    rng = random.Random(5)
    only_unroll = SearchParams(mutate_tile_size_weight=0, mutate_compute_location_weight=0,
                               mutate_parallel_weight=0, mutate_auto_unroll_weight=1
                               ).with_hardware(host_hardware_params())
    assert {M.mutate(s, rng, only_unroll)[1] for s in pop} == {"auto_unroll"}
    kinds: Counter = Counter()
    for k in range(400):
        try:
            kinds[M.mutate(pop[k % len(pop)], rng, PARAMS)[1]] += 1
        except InvalidStepError:  # by contract: the chosen mutation found nothing valid to do
            kinds["invalid"] += 1
    assert kinds["invalid"] < 40
    assert kinds["tile_size"] > 300  # 0.90 of the weight (no compute_at to move here)


@pytest.mark.parametrize("name", ["matmul", "matmul_relu", "conv2d_bias_relu", "softmax", "norm"])
def test_every_kind_of_mutant_computes_correctly(name):
    dag = make_dag(name)
    rng = random.Random(6)
    sketches = hand_sketches(dag)
    built = 0
    for kind, fn, _, has in M.MUTATIONS:
        for _ in range(20):
            parent = sample_state(sketches[rng.randrange(len(sketches))], rng, PARAMS)
            if not has(parent):
                continue
            try:
                child = fn(parent, rng, PARAMS)
            except InvalidStepError:
                continue
            if lowers(child):
                check_runs(child, dag, f"{name} after {kind} mutation")
                built += 1
                break
    assert built >= 2


def test_mutants_are_exactly_what_their_steps_replay_to():
    # Children are replayed from the parent's recorded prefix states: the result (and the
    # prefix states it records for its own children) must equal a replay from scratch.
    dag, pop = _population("conv2d_bias_relu", 6, seed=8)
    rng = random.Random(8)
    for parent in pop:
        child = parent
        for _ in range(4):  # a lineage: grandchildren use traces recorded by replays
            try:
                child, _ = M.mutate(child, rng, PARAMS)
            except InvalidStepError:
                continue
        fresh = replay(dag, child.steps)
        assert fresh.canonical_key() == child.canonical_key()
        assert str(fresh) == str(child)
        for i, before in child.memoized(TRACE).items():
            assert before.steps == child.steps[:i]
