"""The scheduler's objective with alternatives (``network_objective``): each group's fastest
variant, smoothed; a pair fused where faster, no group in two pairs; built from a network's
variant and pair tasks, and used by ``network tune``."""
from __future__ import annotations

import math

import pytest

import ansor
from ansor.graph.layout_tuning import layout_variants, variant_occurrence, variant_tasks
from ansor.graph.network_objective import network_objective, objective_for, soft_choice
from ansor.graph.plan import plan_network
from ansor.graph.two_anchor import pair_candidates, pair_tasks


def test_soft_choice_is_the_fastest_when_it_leads_and_the_mean_on_a_tie():
    assert soft_choice([1.0, 2.0, 3.0]) == pytest.approx(1.0, abs=1e-6)
    assert soft_choice([2.0, 2.0]) == pytest.approx(2.0)
    near = soft_choice([1.0, 1.05])  # 5% apart: between the two, nearer the fastest
    assert 1.0 < near < 1.025
    assert soft_choice([1.0, math.inf, 1e10]) == pytest.approx(1.0)
    assert soft_choice([]) == 0.0 and soft_choice([3.0]) == 3.0


def test_groups_and_pairs():
    # groups 0 and 1 have two variants each (tasks 0/1, 2/3), group 2 one (task 4); the pair of
    # groups 0 and 1 is task 5, the pair of groups 1 and 2 is task 6.
    f = network_objective([[0, 1], [2, 3], [4], []], [(0, 1, 5), (1, 2, 6)])
    costs = [1.0, 9.0, 2.0, 9.0, 3.0, 9.0, 9.0]
    assert f(costs) == pytest.approx(6.0, rel=1e-6)  # no pair pays: the fastest variants
    costs[5] = 1.0  # pair (0, 1) at 1 against 1 + 2 separately
    assert f(costs) == pytest.approx(4.0, rel=1e-6)
    costs[6] = 0.5  # pair (1, 2) saves 4.5, more than (0, 1)'s 2: taken, and (0, 1) not with it
    assert f(costs) == pytest.approx(1.0 + 0.5, rel=1e-6)
    # the gradient reaches a variant only while it is close to its group's fastest
    def slope(i, cs):
        lowered = list(cs)
        lowered[i] *= 0.999
        return (f(cs) - f(lowered)) / (cs[i] * 0.001)
    base = [1.0, 9.0, 2.0, 2.04, 3.0, 9.0, 9.0]
    assert slope(1, base) == pytest.approx(0.0, abs=1e-6) and slope(0, base) == pytest.approx(1.0, abs=1e-3)
    assert 0.1 < slope(3, base) < 0.9 and 0.1 < slope(2, base) < 0.9


def test_built_from_a_network_with_winograd_variants_and_pairs():
    g = ansor.networks.get("mobilenet-v2", image_size=32)
    plan = plan_network(g)
    variants = layout_variants(g, occurrences=plan.groups, blocked=False, winograd=True)
    tasks = variant_tasks(g, variants)[0]
    cands = pair_candidates(g, plan.groups)
    tasks = tasks + pair_tasks(g, cands)[0]
    keys = [[variant_occurrence(v, k).dag.workload_key for k in range(len(v.layouts))] for v in variants]
    pairs = [(c.producer, c.consumer, c.occurrence.dag.workload_key) for c in cands]
    f = objective_for(tasks, keys, pairs)
    assert f is not None
    costs = [1e-4] * len(tasks)
    n_tasks_groups = sum(1 for ks in keys if any(k in {t.workload_key for t in tasks} for k in ks))
    assert f(costs) <= n_tasks_groups * 1e-4 * (1 + 1e-9)  # each pair as fast as one group: fused, it saves
    assert objective_for(tasks, keys, [(0, 1, "no such task")]) is None
    assert objective_for(tasks[:-1], keys, []) is None  # a pair task nobody names: not covered
