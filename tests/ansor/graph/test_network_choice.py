"""Fused pairs and variants chosen together (``ansor/graph/network_choice.py``): a pair is fused
only when it beats the two groups run separately in their fastest variants (a Winograd 3x3
included), the layouts are solved for the network the pairs leave, both choices are recorded
beside the log, and the compile builds exactly that (and the estimate counts exactly its kernels)."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

import ansor
from ansor.graph import GraphBuilder, GraphError
from ansor.graph.executor import plan_as_compiled
from ansor.graph.layout_sidecar import LayoutFileError, read_pair_choices, sidecar_path
from ansor.graph.layout_tuning import layout_variants, network_key, variant_occurrence, variant_tasks
from ansor.graph.network_calibration import alternative_layouts
from ansor.graph.network_choice import choose_network
from ansor.graph.network_estimate import estimate_network
from ansor.graph.plan import plan_network
from ansor.graph.two_anchor import pair_candidates, pair_tasks
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordToFile
from measure.target import host_hardware_params
from sketch.init_population import sample_initial_population
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from tests.util import assert_network_matches, tiny_tune_argv


def pair_net():
    """A 1x1 conv (16 -> 16) + relu feeding a 3x3 conv (16 -> 16, pad 1) + relu, 8x8, batch 1:
    a ``conv1x1+conv3x3`` pair whose 3x3 may also run as Winograd F(2, 3) or F(4, 3)."""
    r = np.random.default_rng(3)
    b = GraphBuilder("pair")
    x = b.input("x", (1, 8, 8, 16))

    def conv(y, k, name):
        w = (r.standard_normal((k, k, 16, 16)) / math.sqrt(k * k * 16)).astype(np.float32)
        z = b.conv2d(y, b.constant(w, f"{name}_w"), b.constant(r.standard_normal(16).astype(np.float32) * 0.1,
                                                               f"{name}_b"), strides=1, padding=k // 2, name=name)
        return b.relu(z, name=f"{name}_relu")

    return b.build(conv(conv(x, 1, "c1"), 3, "c3"))


def _setup(tmp_path, fused: float, wino: float, name: str):
    """The plan, its variants and pair candidates, and a log with one record per task: direct
    variants 1 s, Winograd ``wino`` s, the fused pair ``fused`` s."""
    g = pair_net()
    plan = plan_network(g)
    variants = layout_variants(g, occurrences=plan.groups, blocked=False, winograd=True)
    cands = pair_candidates(g, plan.groups)
    tasks = variant_tasks(g, variants)[0] + pair_tasks(g, cands)[0]
    hw = host_hardware_params()
    params = SearchParams().with_hardware(hw)
    log = tmp_path / f"{name}.json"
    rec = RecordToFile(log)
    for ti, t in enumerate(tasks):
        cost = fused if "+" in t.desc.split()[0] and "conv3x3" in t.desc else wino if "[winograd" in t.desc else 1.0
        state = sample_initial_population(list(generate_sketches(t.compute_dag, hardware_params=hw)), 1,
                                          random.Random(ti), params)[0]
        rec([MeasureInput(t, state)], [MeasureResult((cost,), 0)])
    return g, plan, variants, cands, log


def test_the_pair_loses_to_a_winograd_3x3_and_wins_against_it_when_faster(tmp_path):
    g, plan, variants, cands, log = _setup(tmp_path, fused=1.5, wino=0.2, name="wino")
    assert [c.kinds for c in cands] == [("conv1x1", "conv3x3")]
    choice = choose_network(plan, log, cands, variants, winograd=True)
    # fused 1.5 s beats 1 + 1 s direct, not 1 + 0.2 s with the 3x3 as Winograd
    assert [c.fused for c in choice.pairs] == [False] and choice.pairs[0].separate_seconds == pytest.approx(1.2)
    assert choice.plan is plan and choice.layouts.layouts[0] == "NHWC"
    assert choice.layouts.layouts[1].startswith("winograd")
    assert read_pair_choices(sidecar_path(log))[network_key(plan.groups)][0] == ()
    compiled = plan_as_compiled(plan, log)
    assert compiled.layouts == choice.layouts.layouts and len(compiled.groups) == 2
    assert estimate_network(compiled, log).seconds == pytest.approx(1.2)
    assert_network_matches(ansor.compile_network(g, log, verbose=False), g, atol=1e-4)

    g, plan, variants, cands, log = _setup(tmp_path, fused=0.5, wino=0.2, name="fused")
    choice = choose_network(plan, log, cands, variants, winograd=True)
    assert [c.fused for c in choice.pairs] == [True]
    assert len(choice.plan.groups) == 1 and choice.layouts.layouts == ("NHWC",)  # merged: NHWC only
    compiled = plan_as_compiled(plan, log)
    assert len(compiled.groups) == 1 and compiled.layouts == ("NHWC",)
    assert estimate_network(compiled, log).seconds == pytest.approx(0.5)
    assert_network_matches(ansor.compile_network(g, log, verbose=False), g, atol=1e-4)


def test_recorded_pairs_win_over_the_log_and_bad_ones_are_refused(tmp_path):
    g, plan, variants, cands, log = _setup(tmp_path, fused=1.5, wino=0.2, name="rec")
    # without a recorded choice the log alone decides: 1.5 s fused beats 2 s direct
    assert len(plan_as_compiled(plan, log).groups) == 1
    choose_network(plan, log, cands, None)  # pairs only: recorded, as 'network tune --fuse-pairs' does
    assert len(plan_as_compiled(plan, log).groups) == 1
    side = sidecar_path(log)
    side.write_text('{"version": 1, "kind": "pairs", "network": "%s", "pairs": []}\n' % network_key(plan.groups))
    assert len(plan_as_compiled(plan, log).groups) == 2  # the recorded choice, not the log's times
    side.write_text('{"version": 1, "kind": "pairs", "network": "%s", "pairs": [[1, 0]]}\n'
                    % network_key(plan.groups))
    with pytest.raises(GraphError, match=r"layouts.jsonl:1: groups \(1, 0\) are not a pair"):
        plan_as_compiled(plan, log)
    side.write_text('{"version": 1, "kind": "pairs", "network": "ab", "pairs": [["x"]]}\n')
    with pytest.raises(LayoutFileError, match=r"layouts.jsonl:1: 'pairs' must be a list"):
        plan_as_compiled(plan, log)


@pytest.mark.slow
def test_network_tune_fuse_pairs_with_winograd_through_the_cli(tmp_path, monkeypatch, capsys):
    """``ansor network tune --fuse-pairs --winograd`` tunes the variants and the pair, prints the
    pair's choice, the layouts and the estimate of the network as compiled, which matches."""
    from ansor.cli import main as ansor_main

    g = pair_net()
    monkeypatch.setattr("ansor.cli.common.load_model", lambda *a, **k: g)
    plan = plan_network(g)
    variants = layout_variants(g, occurrences=plan.groups, blocked=False, winograd=True)
    n_tasks = len(variant_tasks(g, variants)[0]) + len(pair_tasks(g, pair_candidates(g, plan.groups))[0])
    log = tmp_path / "log.json"
    argv = tiny_tune_argv("pair", log, n_tasks, "--fuse-pairs", "--winograd", "--no-export")
    assert ansor_main(argv) == 0
    out = capsys.readouterr().out
    assert "conv1x1+conv3x3 1x8x8x16" in out and "candidate(s) run as one kernel" in out
    assert "Winograd; estimated" in out and "estimated latency of the network as compiled: " in out
    assert "candidates (ms, in the network)" in out  # the variants chosen on in-network costs
    assert network_key(plan.groups) in read_pair_choices(sidecar_path(log))
    assert_network_matches(ansor.compile_network(g, log, verbose=False), g, atol=1e-4)


def test_in_network_factors_choose_the_variant_and_the_alternative_swaps_it(tmp_path):
    """Winograd 0.2 s by its record beats the direct 1 s, but not once it is measured 6x slower
    in the network (``factors``); ``alternative_layouts`` is the network with that conv the
    other way, what the calibration profiles beside the chosen one."""
    g, plan, variants, cands, log = _setup(tmp_path, fused=5.0, wino=0.2, name="inet")
    choice = choose_network(plan, log, None, variants, winograd=True)
    wino = choice.layouts.layouts[1]
    assert wino.startswith("winograd") and alternative_layouts(choice) == ["NHWC", "NHWC"]
    keys = {n: variant_occurrence(variants[1], k).dag.workload_key for k, n in enumerate(variants[1].layouts)}
    slow = {keys[n]: 6.0 for n in keys if n.startswith("winograd")}
    choice = choose_network(plan, log, None, variants, winograd=True, factors=slow)
    assert choice.layouts.layouts == ("NHWC", "NHWC")
    assert choice.layouts.group_costs[1][list(variants[1].layouts).index(wino)] == pytest.approx(1.2)
    alt = alternative_layouts(choice)
    assert alt[0] == "NHWC" and alt[1].startswith("winograd")  # the best Winograd by (scaled) cost
    assert plan_as_compiled(plan, log).layouts == ("NHWC", "NHWC")  # the sidecar has the new choice
