"""Feature rows computed in batches: a generation's statements are featurised together, grouped
by stage across the states; every state's matrix equals the one computed for it alone, bit for
bit, and a statement that cannot be featurised costs its own state only."""
from __future__ import annotations

import random

import numpy as np
import pytest

import ansor
from cost_model import feature
from cost_model.feature import FEATURES, _feature_matrices, _state_rows, get_per_store_features
from measure.target import host_hardware_params
from sketch.init_population import lowers_cached, sample_initial_population
from sketch.loop_state import InvalidStepError
from sketch.mutation import mutate
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches


def _population(func: str, args: tuple, n: int = 24, children: int = 48):
    """Samples and their mutated children (the pairs that share most statements)."""
    task = ansor.SearchTask(func=func, args=args)
    hw = host_hardware_params()
    params = SearchParams().with_hardware(hw)
    rng = random.Random(7)
    pop = sample_initial_population(generate_sketches(task.compute_dag, hardware_params=hw), n,
                                    rng, params)
    kids = []
    while len(kids) < children:
        try:
            child, _ = mutate(pop[rng.randrange(len(pop))], rng, params)
        except InvalidStepError:
            continue
        if lowers_cached(child):
            kids.append(child)
    return pop + kids


@pytest.mark.parametrize("func,args", [("matmul", (64, 48, 32)), ("matmul", (31, 17, 97)),
                                       ("conv2d_bias_relu", (1, 14, 14, 16, 16, 3, 3, 1, 1)),
                                       ("softmax", (33, 70))])
def test_rows_batched_over_many_states_equal_rows_of_one_state(func, args):
    """A generation is featurised at once, its statements batched per stage across the states;
    every state's matrix equals the one computed for it alone, bit for bit."""
    states = _population(func, args, n=16, children=32)
    alone = [_state_rows(s) for s in states]
    fresh = [type(s)(s.dag, s.stages, s.steps) for s in states]  # no memoised features
    assert all(s.memoized(FEATURES) is None for s in fresh)
    rows, group = get_per_store_features(fresh + fresh[:3])  # repeats are served once
    assert list(group) == [len(m) for m in alone] + [len(m) for m in alone[:3]]
    np.testing.assert_array_equal(rows, np.concatenate(alone + alone[:3]))


def test_a_statement_that_fails_costs_its_own_state_only(monkeypatch):
    states = _population("matmul", (64, 48, 32), n=8, children=8)
    alone = [_state_rows(s) for s in states]
    bad = states[3]
    real = feature._scalar_features

    def failing(row, it):
        if it.state is bad:
            raise ValueError("no features for this one")
        return real(row, it)

    monkeypatch.setattr(feature, "_scalar_features", failing)
    got = _feature_matrices(states)
    assert isinstance(got[3], ValueError)
    for k, (m, ref) in enumerate(zip(got, alone)):
        if k != 3:
            np.testing.assert_array_equal(m, ref)
    fresh = [type(s)(s.dag, s.stages, s.steps) for s in states]
    bad = fresh[3]
    rows, group = get_per_store_features(fresh)  # the model then rejects that state
    assert group[3] == 0 and group.sum() == sum(len(m) for k, m in enumerate(alone) if k != 3)
