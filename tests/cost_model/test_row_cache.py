"""The feature row cache (cost_model.row_cache) and batched rows: rows served from the cache or
computed in a batch of many states equal rows computed afresh one state at a time, a changed
statement misses, the stored static analysis is checked, and the table is bounded."""
from __future__ import annotations

import random

import numpy as np
import pytest

import ansor
from cost_model import row_cache
from cost_model.feature import (FEATURES, _buffers, _Item, _param_stage_ids, _row_key, _state_rows,
                                get_per_store_features)
from cost_model.loop_nests import statement_nests
from cost_model.stage_analysis import stage_infos
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


@pytest.mark.parametrize("func,args", [("matmul", (64, 48, 32)),
                                       ("conv2d_bias_relu", (1, 14, 14, 16, 16, 3, 3, 1, 1))])
def test_cached_rows_equal_fresh_rows_and_hit(func, args):
    states = _population(func, args)
    row_cache.clear_cache()
    before = dict(row_cache.stats)
    cached = [_state_rows(s) for s in states]
    again = [_state_rows(s) for s in states]  # every row now a hit
    fresh = [_state_rows(s, use_cache=False) for s in states]
    for a, b, c in zip(cached, again, fresh):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)
    hits = row_cache.stats["hits"] - before["hits"]
    rows = sum(len(m) for m in cached)
    assert hits >= rows  # the second pass hit every row (children also hit their parents' rows)
    assert row_cache.cache_size(states[0].dag) <= rows


def _keys(state):
    infos = stage_infos(state)
    nests = statement_nests(state, infos)
    params = _param_stage_ids(state)
    buffer_of = _buffers(state, nests, params)
    return {k: _row_key(_Item(state, k, infos[k], nests[k], nests, buffer_of, params)) for k in nests}


def test_a_changed_statement_misses():
    """A child whose rows differ from its parent's has different keys for exactly those rows."""
    states = _population("matmul", (64, 48, 32), n=8, children=0)
    rng = random.Random(3)
    params = SearchParams().with_hardware(host_hardware_params())
    checked = 0
    for parent in states:
        for _ in range(4):
            try:
                child, _ = mutate(parent, rng, params)
            except InvalidStepError:
                continue
            kp, kc = _keys(parent), _keys(child)
            rp, rc = _state_rows(parent, use_cache=False), _state_rows(child, use_cache=False)
            for i, k in enumerate(sorted(kp)):
                if not np.array_equal(rp[i], rc[i]):
                    assert kp[k] != kc[k]
                    checked += 1
            # and through the cache the child gets its own rows, not the parent's
            row_cache.clear_cache()
            _state_rows(parent)
            np.testing.assert_array_equal(_state_rows(child), rc)
    assert checked > 0


def test_hit_needs_the_same_static_analysis_and_table_is_bounded(monkeypatch):
    row_cache.clear_cache()
    dag = ansor.SearchTask(func="matmul", args=(16, 16, 16)).compute_dag
    info_a, info_b = object(), object()
    calls = []

    def compute(v):
        return lambda: calls.append(v) or np.full(3, float(v))

    np.testing.assert_array_equal(row_cache.cached_row(dag, ("k",), info_a, compute(1)), np.full(3, 1.0))
    np.testing.assert_array_equal(row_cache.cached_row(dag, ("k",), info_a, compute(2)), np.full(3, 1.0))
    # the same key under another analysis object (an id reused after the DAG's cache was
    # rebuilt) is recomputed, not served
    np.testing.assert_array_equal(row_cache.cached_row(dag, ("k",), info_b, compute(3)), np.full(3, 3.0))
    assert calls == [1, 3]
    monkeypatch.setattr(row_cache, "MAX_ENTRIES", 4)
    for i in range(10):
        row_cache.cached_row(dag, ("n", i), info_a, compute(i))
        assert row_cache.cache_size(dag) <= 4
    row_cache.clear_cache()
    assert row_cache.cache_size(dag) == 0


@pytest.mark.parametrize("func,args", [("matmul", (64, 48, 32)), ("matmul", (31, 17, 97)),
                                       ("conv2d_bias_relu", (1, 14, 14, 16, 16, 3, 3, 1, 1)),
                                       ("softmax", (33, 70))])
def test_rows_batched_over_many_states_equal_rows_of_one_state(func, args):
    """A generation is featurised at once, its statements batched per stage across the states;
    every state's matrix equals the one computed for it alone, bit for bit."""
    states = _population(func, args, n=16, children=32)
    alone = [_state_rows(s, use_cache=False) for s in states]
    row_cache.clear_cache()
    fresh = [type(s)(s.dag, s.stages, s.steps) for s in states]  # no memoised features
    assert all(s.memoized(FEATURES) is None for s in fresh)
    rows, group = get_per_store_features(fresh + fresh[:3])  # repeats are served once
    assert list(group) == [len(m) for m in alone] + [len(m) for m in alone[:3]]
    np.testing.assert_array_equal(rows, np.concatenate(alone + alone[:3]))
