"""The search's cost per state grows linearly with the number of stages, not faster.

A chain of transposes (not strictly inlineable, so every stage stays movable) once took 54 s for
one round at 10 stages and did not finish in 300 s at 100: every compute_at / inline step rebuilt
the whole consumer table, so replaying a state was quadratic in its stage count. The tests count
Python function calls (deterministic for a fixed seed, independent of the machine's speed and
load) for the same work on a short and a four times longer chain: linear work gives a ratio near
4, quadratic near 16.
"""
from __future__ import annotations

import random
import sys
from typing import Callable

import pytest

from ansor.search_task import SearchTask
from compute import te
from cost_model.cost_model import RandomModel
from cost_model.feature import get_per_store_features
from sketch.init_population import lowers, sample_state
from sketch.replay import replay
from sketch.loop_state import InvalidStepError, State
from sketch.mutation import mutate
from sketch.search_policy import SearchParams, SketchPolicy
from sketch.sketch_rules import generate_sketches

PARAMS = SearchParams(population_size=16, num_generations=1, num_cores=2, max_vector_lanes=16)
SHORT, LONG = 12, 48
# Linear work gives LONG / SHORT = 4 (plus fixed costs, which only lower the ratio); quadratic 16.
MAX_RATIO = 1.5 * LONG / SHORT


def transpose_chain(n: int, reduce_end: bool = False) -> SearchTask:
    """T_{k+1}[i, j] = T_k[j, i] + 1 for ``n`` stages (optionally a row sum at the end)."""
    ts = [te.placeholder((64, 64), name="T0")]
    for k in range(n):
        ts.append(te.compute((64, 64), lambda i, j, p=ts[-1]: p[j, i] + 1.0, name=f"T{k + 1}"))
    if reduce_end:
        r = te.reduce_axis((0, 64), name="r")
        ts.append(te.compute((64,), lambda i, p=ts[-1]: te.sum(p[i, r], axis=r), name="S"))
    return SearchTask(tensors=[ts[0], ts[-1]])


def calls(fn: Callable[[], object]) -> int:
    """Python function calls made while running ``fn`` (a machine-independent measure of work)."""
    count = 0

    def prof(frame, event, arg):  # noqa: ANN001 - the sys.setprofile signature
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    old = sys.getprofile()
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(old)
    return count


def samples(task: SearchTask, n: int, seed: int = 0) -> list[State]:
    sketches = generate_sketches(task, num_cores=2)
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        s = sample_state(sketches[rng.randrange(len(sketches))], rng, PARAMS)
        if lowers(s):
            out.append(s)
    return out


def ratio(work: Callable[[SearchTask], Callable[[], object]], reduce_end: bool = False) -> float:
    short = calls(work(transpose_chain(SHORT, reduce_end)))
    long = calls(work(transpose_chain(LONG, reduce_end)))
    return long / short


@pytest.fixture(params=[False, True], ids=["transposes", "transposes+sum"])
def reduce_end(request: pytest.FixtureRequest) -> bool:
    """A plain chain of transposes, and one that ends in a reduction (tiled, cache_write)."""
    return request.param


def test_sketches_of_a_chain_do_not_multiply():
    for n in (SHORT, LONG):
        assert len(generate_sketches(transpose_chain(n), num_cores=2)) == 1
        assert len(generate_sketches(transpose_chain(n, reduce_end=True), num_cores=2)) <= 2


def test_sampling_is_linear_in_stages(reduce_end: bool):
    def work(task):
        return lambda: samples(task, 4)

    assert ratio(work, reduce_end) < MAX_RATIO


def test_replay_is_linear_in_stages(reduce_end: bool):
    def work(task):
        states = samples(task, 4)
        return lambda: [replay(task.compute_dag, s.steps, verbatim=False) for s in states]

    assert ratio(work, reduce_end) < MAX_RATIO


def test_mutation_is_linear_in_stages(reduce_end: bool):
    def work(task):
        states = samples(task, 4)

        def run():
            rng = random.Random(1)
            for s in states:
                for _ in range(3):
                    try:
                        mutate(s, rng, PARAMS)
                    except InvalidStepError:
                        pass

        return run

    assert ratio(work, reduce_end) < MAX_RATIO


def test_features_are_linear_in_stages(reduce_end: bool):
    def work(task):
        states = samples(task, 3)
        return lambda: get_per_store_features(states)

    assert ratio(work, reduce_end) < MAX_RATIO


def test_one_search_round_is_linear_in_stages(reduce_end: bool):
    def work(task):
        sketches = generate_sketches(task, num_cores=2)

        def run():
            policy = SketchPolicy(task, RandomModel(0), params=PARAMS, seed=0, sketches=sketches)
            assert len(policy.generate_measure_candidates(4, set(), [])) == 4

        return run

    assert ratio(work, reduce_end) < MAX_RATIO
