"""Two-anchor fusion in a network (``ansor/graph/two_anchor.py``): the pairs of groups offered
(and the ones refused, with why), their tasks named by their anchors, networks compiled with the
pairs fused (forced) matching the graph reference and onnxruntime, and the measured choice - a
pair runs fused only when the log says its kernel beats the two separate ones, never untuned."""
from __future__ import annotations

import io
import math
import random

import numpy as np
import onnxruntime as ort
import pytest

import ansor
from ansor.graph import GraphBuilder, GraphError, to_onnx
from ansor.graph.plan import plan_network
from ansor.graph.two_anchor import choose_pairs, pair_candidates, pair_tasks, resolve_pairs
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordToFile
from measure.target import host_hardware_params
from sketch.init_population import sample_initial_population
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from tests.util import assert_network_matches, graph_inputs, tiny_tune_argv


def block_net(stride: int = 1, dw: int = 3):
    """Two MobileNet-V2 inverted residual blocks, batch 2, 13x11: expand 1x1 (8 -> 24) + relu6,
    depthwise ``dw`` x ``dw`` (``stride``) + relu6, project 1x1 (24 -> 8) + bias (+ the residual
    with stride 1), then the same again with stride 1."""
    r = np.random.default_rng(stride)
    b = GraphBuilder("blocks")
    x = b.input("x", (2, 13, 11, 8))

    def conv(y, co, k, s, groups, name, act=True):
        ci = y.shape[-1]
        w = (r.standard_normal((k, k, ci // groups, co)) / math.sqrt(k * k * ci / groups)).astype(np.float32)
        z = b.conv2d(y, b.constant(w, f"{name}_w"), b.constant(r.standard_normal(co).astype(np.float32) * 0.1,
                                                               f"{name}_b"),
                     strides=s, padding=k // 2, groups=groups, name=name)
        return b.relu6(z, name=f"{name}_relu6") if act else z

    def block(y, s, p):
        z = conv(y, 24, 1, 1, 1, f"{p}_expand")
        z = conv(z, 24, dw, s, 24, f"{p}_dw")
        z = conv(z, 8, 1, 1, 1, f"{p}_project", act=False)
        return b.add(y, z, name=f"{p}_add") if s == 1 else z

    return b.build(block(block(x, stride, "b1"), 1, "b2"))


def test_pairs_offered_and_named():
    g = block_net(2)
    plan = plan_network(g)
    cands = pair_candidates(g, plan.groups)
    assert [(c.kinds, c.producer, c.consumer) for c in cands] == [
        (("conv1x1", "dwconv3x3"), 0, 1), (("dwconv3x3", "conv1x1"), 1, 2),
        (("conv1x1", "dwconv3x3"), 3, 4), (("dwconv3x3", "conv1x1"), 4, 5)]
    # block 1's project output feeds block 2's expand and its residual add: never a producer
    tasks, weights = pair_tasks(g, cands)
    assert [t.desc for t in tasks] == ["conv1x1+dwconv3x3 2x7x6x24", "dwconv3x3+conv1x1 2x7x6x8",
                                       "conv1x1+dwconv3x3 2x7x6x24", "dwconv3x3+conv1x1 2x7x6x8"]
    assert len({t.workload_key for t in tasks}) == 4 and weights == [1, 1, 1, 1]
    assert not {t.workload_key for t in tasks} & {t.workload_key for t in plan.tasks}
    # a pair task's sketches are fused ones only (its first conv asks for them): the separate
    # structures are the separate tasks' to tune
    for t in tasks:
        sketches = generate_sketches(t.compute_dag, num_cores=2)
        first = next(op.name for op in t.compute_dag.ops if getattr(op, "attrs", {}).get("sketch") == "two_anchor")
        assert sketches and all(s.stages[s.stage_index(first)].compute_at == "iter" for s in sketches)
        assert not any(st.name == first + ".local" for s in sketches for st in s.stages)
    with pytest.raises(GraphError, match="cannot be fused: the producer's output has other readers"):
        resolve_pairs(g, plan.groups, [(2, 3)], None)
    with pytest.raises(GraphError, match=r"\(0, 9\) is not a pair"):
        resolve_pairs(g, plan.groups, [(0, 9)], None)
    with pytest.raises(ValueError, match="fuse_pairs must be"):
        resolve_pairs(g, plan.groups, "some", None)
    assert resolve_pairs(g, plan.groups, "auto", None) == []  # no log, no measurement: nothing fused


def _ort(g, x):
    sess = ort.InferenceSession(to_onnx(g).SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {f"input_{i}": x[n] for i, n in enumerate(g.inputs)})[0]


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("which", ["all", [(1, 2), (4, 5)]])
def test_forced_fused_network_matches_reference_and_onnxruntime(stride, which):
    g = block_net(stride)
    out = io.StringIO()
    lib = ansor.compile_network(g, fuse_pairs=which, file=out)
    assert "2 pair(s) of groups run as one kernel" in out.getvalue()
    got = assert_network_matches(lib, g, atol=1e-5)
    x = graph_inputs(g)
    want = _ort(g, x)
    np.testing.assert_allclose(got[g.outputs[0]], want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_5x5_pairs_fused_match(stride):
    g = block_net(stride, dw=5)
    plan = plan_network(g)
    assert [c.kinds for c in pair_candidates(g, plan.groups)] == [
        ("conv1x1", "dwconv5x5"), ("dwconv5x5", "conv1x1")] * 2
    out = io.StringIO()
    lib = ansor.compile_network(g, fuse_pairs=[(0, 1), (4, 5)], file=out)
    assert "2 pair(s) of groups run as one kernel" in out.getvalue()
    assert_network_matches(lib, g, atol=1e-5)


@pytest.mark.parametrize("family", ["efficientnet", "mobilenet_v3"])
def test_model_family_with_every_pair_fused_matches_onnxruntime(family):
    """EfficientNet and MobileNet-V3 (3x3 and 5x5 depthwise; where a squeeze-excite block reads
    the depthwise output, only expand -> depthwise is offered) run with every pair their graphs
    offer fused."""
    from ansor.frontend.onnx import from_onnx
    from tests.ansor.graph.test_model_families import _check, _model

    path, inp, shape, high = _model(family)
    g = from_onnx(str(path), shape={inp: shape})
    plan = plan_network(g)
    kinds = {c.kinds for c in pair_candidates(g, plan.groups)}
    assert {("conv1x1", "dwconv3x3"), ("conv1x1", "dwconv5x5")} & kinds, kinds
    out = io.StringIO()
    lib = ansor.compile_network(g, fuse_pairs="all", file=out)
    assert "pair(s) of groups run as one kernel" in out.getvalue()
    _check(lib.run, path, inp, shape, high)


def test_mobilenet_v2_with_every_pair_fused_matches():
    g = ansor.networks.get("mobilenet-v2", image_size=32)
    lib = ansor.compile_network(g, fuse_pairs="all", verbose=False)
    assert_network_matches(lib, g, atol=1e-4)


def _fake_log(g, path, fused_cost: float, skip_fused: bool = False) -> None:
    """One sampled schedule per task recorded as measured: each separate task at 1 s, each
    fused pair at ``fused_cost`` (or no record for them: ``skip_fused``)."""
    plan = plan_network(g)
    fused_tasks = pair_tasks(g, pair_candidates(g, plan.groups))[0]
    hw = host_hardware_params()
    params = SearchParams().with_hardware(hw)
    rec = RecordToFile(path)
    for ti, t in enumerate([*plan.tasks, *fused_tasks]):
        fused = ti >= len(plan.tasks)
        if fused and skip_fused:
            continue
        state = sample_initial_population(list(generate_sketches(t.compute_dag, hardware_params=hw)), 1,
                                          random.Random(ti), params)[0]
        rec([MeasureInput(t, state)], [MeasureResult((fused_cost if fused else 1.0,), 0)])


def test_choice_by_measurement_and_never_untuned(tmp_path):
    g = block_net(1)
    plan = plan_network(g)
    cands = pair_candidates(g, plan.groups)
    fast = tmp_path / "fast.json"
    _fake_log(g, fast, 0.5)  # every fused pair beats 1 + 1 s: the greedy keeps non-overlapping ones
    choices = choose_pairs(g, plan.groups, cands, fast)
    assert [c.fused for c in choices] == [True, False, True, False]
    assert choices[0].fused_seconds == 0.5 and choices[0].separate_seconds == 2.0
    out = io.StringIO()
    lib = ansor.compile_network(g, fast, file=out)  # fuse_pairs="auto": the measured choice
    assert "2 pair(s) of groups run as one kernel: conv1x1+dwconv3x3 (0, 1), conv1x1+dwconv3x3 (3, 4)" \
        in out.getvalue()
    assert len(plan.with_pairs([c.candidate for c in choices if c.fused]).groups) == len(plan.groups) - 2
    assert_network_matches(lib, g, atol=1e-5)
    slow = tmp_path / "slow.json"
    _fake_log(g, slow, 2.5)  # slower than the separate pair
    assert not any(c.fused for c in choose_pairs(g, plan.groups, cands, slow))
    untuned = tmp_path / "untuned.json"
    _fake_log(g, untuned, 0.0, skip_fused=True)  # fused tasks never measured
    assert not any(c.fused for c in choose_pairs(g, plan.groups, cands, untuned))
    out = io.StringIO()
    ansor.compile_network(g, untuned, file=out)
    assert "run as one kernel" not in out.getvalue()


def test_network_tasks_lists_the_pairs(monkeypatch, capsys):
    from ansor.cli import main as ansor_main

    monkeypatch.setattr("ansor.cli.network.load_model", lambda *a, **k: block_net(2))
    assert ansor_main(["network", "tasks", "blocks", "--fuse-pairs"]) == 0
    out = capsys.readouterr().out
    assert "conv1x1+dwconv3x3 2x7x6x24" in out and "dwconv3x3+conv1x1 2x7x6x8" in out
    assert "4 fused pair task(s) beside them" in out


@pytest.mark.slow
def test_network_tune_fuse_pairs_through_the_cli(tmp_path, monkeypatch, capsys):
    """``ansor network tune --fuse-pairs`` tunes the separate and the fused tasks (named in the
    task table), prints the measured choice, and the network compiled from the log matches."""
    from ansor.cli import main as ansor_main

    g = block_net(1)
    monkeypatch.setattr("ansor.cli.common.load_model", lambda *a, **k: g)
    log = tmp_path / "log.json"
    plan = plan_network(g)
    n_tasks = len(plan.tasks) + len(pair_tasks(g, pair_candidates(g, plan.groups))[0])
    argv = tiny_tune_argv("blocks", log, n_tasks, "--fuse-pairs", "--no-export")
    assert ansor_main(argv) == 0
    out = capsys.readouterr().out
    assert "conv1x1+dwconv3x3 2x13x11x24" in out and "candidate(s) run as one kernel" in out
    assert "estimated latency of the network as compiled: " in out
    assert_network_matches(ansor.compile_network(g, log, verbose=False), g, atol=1e-5)


def test_exported_fused_module_loads_and_runs(tmp_path):
    from ansor.graph.executor import load_module

    g = block_net(1)
    lib = ansor.compile_network(g, fuse_pairs=[(1, 2), (3, 4)], verbose=False)
    back = load_module(lib.export(tmp_path / "m"))
    assert_network_matches(back, g, atol=1e-5)


def test_estimate_of_the_network_as_compiled(tmp_path):
    """The estimate sums one best record per kernel the compiled network runs: with two pairs
    fused at 0.5 s, 2 x 0.5 s for them and 1 s for each of the other kernels; without a fused
    record, 1 s per separate kernel; a task without any record leaves no figure, named."""
    from ansor.graph.executor import plan_as_compiled
    from ansor.graph.network_estimate import estimate_network

    g = block_net(1)
    plan = plan_network(g)
    fast = tmp_path / "fast.json"
    _fake_log(g, fast, 0.5)
    compiled = plan_as_compiled(plan, fast)
    assert len(compiled.groups) == len(plan.groups) - 2
    est = estimate_network(compiled, fast)
    assert est.kernels == len(compiled.task_of)
    assert est.seconds == pytest.approx(2 * 0.5 + (est.kernels - 2) * 1.0) and est.missing == ()
    assert est.modes == {"warm": est.kernels} and "ms (the compiled network's" in est.describe()
    untuned = tmp_path / "untuned.json"
    _fake_log(g, untuned, 0.0, skip_fused=True)
    est2 = estimate_network(plan_as_compiled(plan, untuned), untuned)
    assert est2.seconds == pytest.approx(1.0 * len(plan.task_of))
    empty = tmp_path / "empty.json"
    empty.write_text("")
    none = estimate_network(plan, empty)
    assert none.seconds is None and set(none.missing) == {t.desc for t in plan.tasks}
    assert none.describe().startswith("- (")
