"""Winograd as a variant of a conv group (``ansor/graph/winograd_variant.py``): eligible convs are
offered winograd2/4/6 (refusals say why), each variant is its own task named
``conv2d_winograd... [winogradM]``, a network compiled with Winograd groups matches the graph
reference and onnxruntime, and the layout solver picks Winograd per group only from measured
times (an untuned Winograd variant never beats a measured direct one)."""
from __future__ import annotations

import io
import json
import math
import random

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import ansor
from ansor.frontend.onnx import from_onnx
from ansor.graph import GraphBuilder, GraphError
from ansor.graph.layout_sidecar import LayoutFileError, read_sidecar, sidecar_path
from ansor.graph.layout_tuning import (chosen_layouts, extract_layout_tasks, layout_variants, network_key,
                                       solve_layouts, variant_tasks)
from ansor.graph.layouts import NHWC, activation_layout, candidate_layouts
from ansor.graph.tasks import lower_groups
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordToFile
from measure.target import host_hardware_params
from sketch.init_population import sample_initial_population
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from tests.util import assert_network_matches, tiny_tune_argv

from .op_check import model_of


def wino_net():
    """conv3x3+bias+relu (16 -> 17) -> conv3x3+bias+residual+relu -> conv1x3+bias, batch 2, 7x9."""
    r = np.random.default_rng(0)
    b = GraphBuilder("wino-net")
    x = b.input("x", (2, 7, 9, 16))

    def conv(y, ci, co, k, name, pad):
        w = (r.standard_normal((*k, ci, co)) / math.sqrt(k[0] * k[1] * ci)).astype(np.float32)
        bias = b.constant(r.standard_normal(co).astype(np.float32), f"{name}_b")
        return b.conv2d(y, b.constant(w, f"{name}_w"), bias=bias, padding=pad, name=name)

    y = b.relu(conv(x, 16, 17, (3, 3), "c1", 1))
    z = b.relu(b.add(conv(y, 17, 17, (3, 3), "c2", 1), y, name="res"))
    return b.build(conv(z, 17, 16, (1, 3), "c3", (0, 1, 0, 1)))


def test_eligible_convs_get_winograd_variants_and_refusals_say_why():
    g = wino_net()
    hw = host_hardware_params()
    lays = [v.layouts for v in layout_variants(g, hw, blocked=False, winograd=True)]
    # 7x9 outputs: tiles of 4 would compute 8x12 (1.52x), of 6 12x12: only m = 2 on the 3x3s;
    # the 1x3 tiles only W (7x12 for m = 4, 7x12 for m = 6)
    assert lays == [(NHWC, "winograd2"), (NHWC, "winograd2"), (NHWC, "winograd2", "winograd4", "winograd6")]
    refused = dict(candidate_layouts(lower_groups(g)[0].group, g, hw, winograd=True).refused)
    assert "1.52x the 7x9 output" in refused["winograd4"]
    # off by default: the existing variants are unchanged
    assert all("winograd" not in lay for v in layout_variants(g, hw) for lay in v.layouts)
    b = GraphBuilder("no")
    x = b.input("x", (1, 8, 8, 16))
    w3 = b.constant(np.ones((3, 3, 16, 16), np.float32), "w3")
    w5 = b.constant(np.ones((5, 5, 16, 16), np.float32), "w5")
    wn = b.constant(np.ones((3, 3, 16, 8), np.float32), "wn")
    b.conv2d(x, w3, strides=2, padding=1, name="strided")
    b.conv2d(x, w5, padding=2, name="five")
    g2 = b.build(b.conv2d(x, wn, padding=1, name="narrow"))
    why = [dict(candidate_layouts(o.group, g2, hw, winograd=True).refused)["winograd"] for o in lower_groups(g2)]
    assert any("strided" in s for s in why) and any("5x5 kernel" in s for s in why)
    assert any("8 output channels (fewer than 16)" in s for s in why)
    with pytest.raises(GraphError, match="cannot run in winograd4: strided"):
        ansor.compile_network(g2, layouts=["winograd4"] + [NHWC] * 2, verbose=False)
    with pytest.raises(GraphError, match="unknown variant 'winograd3'"):
        ansor.compile_network(g2, layouts=["winograd3"] + [NHWC] * 2, verbose=False)


def test_variant_tasks_are_named_and_distinct():
    g = wino_net()
    tasks, weights = variant_tasks(g, layout_variants(g, blocked=False, winograd=True))
    descs = [t.desc for t in tasks]
    assert "conv2d_winograd+add+relu 2x7x9x17 [winograd2]" in descs
    assert "conv2d+add+relu 2x7x9x17" in descs
    assert {d for d in descs if d.startswith("conv2d_winograd+add ")} == {
        f"conv2d_winograd+add 2x7x9x16 [winograd{m}]" for m in (2, 4, 6)}
    assert len({t.workload_key for t in tasks}) == len(tasks) == 8
    wino = tasks[descs.index("conv2d_winograd+add+relu 2x7x9x17 [winograd2]")]
    assert len(wino.constant_inputs) == 4  # U, B^T, A^T and the bias: constants, packable at compile time
    assert activation_layout("winograd6") == NHWC


def test_forced_winograd_network_matches_and_the_table_names_it():
    g = wino_net()
    lays = ["winograd2", "winograd2", "winograd4"]
    out = io.StringIO()
    lib = ansor.compile_network(g, layouts=lays, file=out)
    assert lib.num_layout_transforms == 0  # Winograd groups keep NHWC
    assert "conv2d_winograd+add+add+relu 2x7x9x17 [winograd2]" in out.getvalue()
    assert "conv2d_winograd+add 2x7x9x16 [winograd4]" in out.getvalue()
    assert_network_matches(lib, g, atol=1e-5)


@pytest.mark.parametrize("m", [2, 4, 6])
def test_onnx_conv_as_winograd_matches_onnxruntime(m):
    r = np.random.default_rng(m)
    x = r.standard_normal((2, 19, 10, 11)).astype(np.float32)  # NCHW: 19 channels, 10x11
    w = (r.standard_normal((23, 19, 3, 3)) / math.sqrt(9 * 19)).astype(np.float32)
    bias = r.standard_normal(23).astype(np.float32)
    model = model_of([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                      helper.make_node("Relu", ["c"], ["y"])], {"x": x}, {"w": w, "b": bias})
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    g = from_onnx(model)
    groups = lower_groups(g)
    lays = [f"winograd{m}" if o.group.nodes[0].op == "conv2d" else NHWC for o in groups]
    assert lays.count(f"winograd{m}") == 1
    got = ansor.compile_network(g, layouts=lays, verbose=False).run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def _fake_log(g, path, wino_cost: float, skip_wino: bool = False):
    """Per variant task one sampled schedule recorded as measured: direct at 1 s, Winograd at
    ``wino_cost`` (or no record at all: ``skip_wino``)."""
    tasks, _ = extract_layout_tasks(g, winograd=True)
    hw = host_hardware_params()
    params = SearchParams().with_hardware(hw)
    rec = RecordToFile(path)
    for ti, t in enumerate(tasks):
        wino = "[winograd" in t.desc
        if wino and skip_wino:
            continue
        state = sample_initial_population(list(generate_sketches(t.compute_dag, hardware_params=hw)), 1,
                                          random.Random(ti), params)[0]
        rec([MeasureInput(t, state)], [MeasureResult((wino_cost if wino else 1.0,), 0)])


@pytest.fixture
def quick_runner():
    from measure.runner import LocalRunner

    runner = LocalRunner(min_repeat_ms=0, warmup_ms=0)
    yield runner
    runner.close()


def test_the_solver_keeps_the_measured_faster_and_never_an_untuned_winograd(tmp_path, quick_runner):
    g = wino_net()
    variants = layout_variants(g, blocked=False, winograd=True)
    log = tmp_path / "fast.json"
    _fake_log(g, log, 0.1)
    choice = solve_layouts(g, log, runner=quick_runner, variants=variants)
    assert choice.layouts == ("winograd2", "winograd2", "winograd2")  # ties: the first of equals
    assert choice.transforms == {}  # NHWC activations: nothing to transform
    assert chosen_layouts(g, log) == choice.layouts
    lib = ansor.compile_network(g, log, verbose=False)  # layouts="auto": the recorded choice
    assert_network_matches(lib, g, atol=1e-5)
    slow = tmp_path / "slow.json"
    _fake_log(g, slow, 10.0)
    assert set(solve_layouts(g, slow, runner=quick_runner, variants=variants).layouts) == {NHWC}
    untuned = tmp_path / "untuned.json"
    _fake_log(g, untuned, 0.0, skip_wino=True)
    assert set(solve_layouts(g, untuned, runner=quick_runner, variants=variants).layouts) == {NHWC}


def test_sidecar_accepts_winograd_choices_and_refuses_bad_ones(tmp_path):
    g = wino_net()
    log = tmp_path / "log.json"
    log.write_text("")
    key = network_key(lower_groups(g))
    side = sidecar_path(log)
    side.write_text(json.dumps({"version": 1, "kind": "choice", "network": key,
                                "layouts": ["winograd2", NHWC, "winograd6"]}) + "\n")
    assert chosen_layouts(g, log) == ("winograd2", NHWC, "winograd6")
    assert read_sidecar(side)[1][key][0][2] == "winograd6"
    side.write_text(json.dumps({"version": 1, "kind": "choice", "network": key,
                                "layouts": ["winograd5", NHWC, NHWC]}) + "\n")
    with pytest.raises(LayoutFileError, match=r"layouts.jsonl:1: layouts\[0\]: unknown variant 'winograd5'"):
        read_sidecar(side)
    side.write_text(json.dumps({"version": 1, "kind": "transform", "shape": [1, 2, 2, 16], "dtype": "float32",
                                "src": "winograd4", "dst": NHWC, "seconds": 1e-6, "target": "x"}) + "\n")
    with pytest.raises(LayoutFileError, match="layouts.jsonl:1: unknown layout 'winograd4'"):
        read_sidecar(side)


def test_exported_winograd_module_loads_and_runs(tmp_path):
    from ansor.graph.executor import load_module

    g = wino_net()
    lib = ansor.compile_network(g, layouts=["winograd2", NHWC, "winograd6"], verbose=False)
    back = load_module(lib.export(tmp_path / "m"))
    assert_network_matches(back, g, atol=1e-5)


@pytest.mark.slow
def test_network_tune_winograd_through_the_cli(tmp_path, monkeypatch, capsys):
    """``ansor network tune --winograd`` tunes the direct and Winograd tasks (named in the task
    table), records a per-group choice, and the network compiled with it matches."""
    from ansor.cli import main as ansor_main

    g = wino_net()
    monkeypatch.setattr("ansor.cli.common.load_model", lambda *a, **k: g)
    log = tmp_path / "log.json"
    n_tasks = len(variant_tasks(g, layout_variants(g, blocked=False, winograd=True))[0])
    argv = tiny_tune_argv("wino-net", log, n_tasks, "--winograd", "--no-export")
    assert ansor_main(argv) == 0
    out = capsys.readouterr().out
    assert "conv2d_winograd+add+relu 2x7x9x17 [winograd2]" in out and "Winograd; estimated" in out
    layouts = chosen_layouts(g, log)
    assert layouts is not None and len(layouts) == 3
    assert_network_matches(ansor.compile_network(g, log, verbose=False), g, atol=1e-5)
