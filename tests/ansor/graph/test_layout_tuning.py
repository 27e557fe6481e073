"""Graph-level layout tuning (issue 20 items 2-3): blocked NCHW[x]c conv variants compute what
the graph reference does (fused bias, relu, residual add), channel counts x does not divide are
refused with the reason, the transform kernels are exact, the sidecar of transform costs and
chosen layouts round-trips and refuses hostile lines naming file and line, the layout problem of
a network solves to the brute-force optimum, and a small network with a chain, a residual add
and a concat, layout-tuned end to end, matches the reference (in the API and through the CLI)."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

import ansor
from ansor.cli import main as ansor_main
from ansor.graph import GraphBuilder, GraphError
from ansor.graph.layout_solver import brute_force, solve
from ansor.graph.layout_sidecar import (LayoutFileError, TransformKey, read_sidecar, sidecar_path,
                                        write_transform_costs)
from ansor.graph.layout_tuning import (build_problem, chosen_layouts, extract_layout_tasks, layout_variants,
                                       needed_transforms, solve_layouts, transform_state)
from ansor.graph.layouts import (NHWC, LayoutError, blocked, block_weight, candidate_layouts,
                                 from_layout, physical_shape, to_layout, transform_tensors)
from ansor.graph.tasks import lower_groups
from ansor.build_module import build
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordToFile
from measure.target import host_hardware_params
from sketch.init_population import sample_initial_population
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from tests.util import assert_network_matches, graph_inputs, tiny_tune_argv

LANES = host_hardware_params().vector_lanes
C = 2 * LANES  # channels both host block sizes divide


def small_net(c: int = C, first_in: int | None = None):
    """conv+bias+relu -> conv+bias+relu+residual add -> two 1x1 convs -> concat -> max pool."""
    r = np.random.default_rng(0)
    b = GraphBuilder("layout-net")
    cin = c if first_in is None else first_in
    x = b.input("x", (1, 5, 5, cin))

    def conv(y, ci, co, k, name):
        w = b.constant((r.standard_normal((k, k, ci, co)) / math.sqrt(k * k * ci)).astype(np.float32), f"{name}_w")
        bias = b.constant(r.standard_normal(co).astype(np.float32), f"{name}_b")
        return b.conv2d(y, w, bias=bias, padding=k // 2, name=name)

    y = b.relu(conv(x, cin, c, 3, "c1"))
    z = b.relu(b.add(conv(y, c, c, 3, "c2"), y, name="res"))
    y2 = b.relu(conv(z, c, c // 2, 1, "c3"))
    y3 = b.relu(conv(z, c, c // 2, 1, "c4"))
    cat = b.concat([y2, y3], axis=3)
    return b.build(b.max_pool2d(cat, 2, 2))




# ---------------------------------------------------------------- variants and refusals

def test_candidates_follow_the_host_vector_width():
    g = small_net()
    hw = host_hardware_params()
    lays = [v.layouts for v in layout_variants(g, hw)]
    b1, b2 = blocked(LANES), blocked(2 * LANES)
    assert lays[0] == (NHWC, b1, b2) and lays[1] == (NHWC, b1, b2)
    # c3 / c4 have C/2 = LANES output channels: only one register's block
    assert lays[2] == (NHWC, b1) and lays[3] == (NHWC, b1)
    assert lays[4] == (NHWC,) and lays[5] == (NHWC,)  # concat, pool keep NHWC
    tasks, weights = extract_layout_tasks(g, hw)
    descs = [t.desc for t in tasks]
    assert any(d.endswith(f"[{b2}]") for d in descs) and any(not d.endswith("]") for d in descs)
    assert len({t.workload_key for t in tasks}) == len(tasks)
    assert weights[[i for i, d in enumerate(descs) if d.endswith(f"[{b1}]")][-1]] == 2  # c3/c4 share


def test_odd_channels_refuse_the_blocked_variant_with_the_reason():
    g = small_net(first_in=3)
    first = lower_groups(g)[0].group
    cands = candidate_layouts(first, g, host_hardware_params())
    assert cands.layouts == (NHWC,)
    reasons = dict(cands.refused)
    assert f"3 input channels not a multiple of {LANES}" in reasons[blocked(LANES)]
    with pytest.raises(GraphError, match=f"cannot run in NCHW{LANES}c: 3 input / {C} output channels"):
        ansor.compile_network(g, layouts=[blocked(LANES)] + [NHWC] * 5, verbose=False)
    with pytest.raises(GraphError, match="one layout per fused group"):
        ansor.compile_network(g, layouts=[NHWC], verbose=False)
    with pytest.raises(GraphError, match="unknown layout 'NCHWc'"):
        ansor.compile_network(g, layouts=["NCHWc"] + [NHWC] * 5, verbose=False)


def test_depthwise_and_pool_keep_nhwc():
    b = GraphBuilder("dw")
    x = b.input("x", (1, 6, 6, C))
    w = b.constant(np.ones((3, 3, 1, C), np.float32), "w")
    g = b.build(b.conv2d(x, w, padding=1, groups=C))
    cands = candidate_layouts(lower_groups(g)[0].group, g, host_hardware_params())
    assert cands.layouts == (NHWC,) and "depthwise" in dict(cands.refused)[blocked(LANES)]


@pytest.mark.parametrize("which", ["chain", "mixed"])
def test_blocked_conv_variants_match_the_reference(which):
    g = small_net()
    b1, b2 = blocked(LANES), blocked(2 * LANES)
    lays = {"chain": [b1, b1, b1, b1, NHWC, NHWC], "mixed": [b2, b1, NHWC, b1, NHWC, NHWC]}[which]
    lib = ansor.compile_network(g, layouts=lays, verbose=False)
    out = assert_network_matches(lib, g)
    plain = ansor.compile_network(g, layouts=None, verbose=False).run(graph_inputs(g))
    for k in out:
        np.testing.assert_allclose(out[k], plain[k], rtol=0, atol=1e-4 * np.abs(plain[k]).max())
    assert plain and lib.num_layout_transforms >= 2  # into the first blocked conv, out before concat


def test_numpy_layout_helpers_round_trip():
    a = np.arange(2 * 3 * 4 * 16, dtype=np.float32).reshape(2, 3, 4, 16)
    for lay in (NHWC, "NCHW4c", "NCHW8c", "NCHW16c"):
        t = to_layout(a, lay)
        assert t.shape == physical_shape(a.shape, lay)
        np.testing.assert_array_equal(from_layout(t, lay), a)
    assert to_layout(a, "NCHW4c")[1, 2, 0, 3, 1] == a[1, 0, 3, 2 * 4 + 1]
    w = np.arange(3 * 3 * 8 * 16, dtype=np.float32).reshape(3, 3, 8, 16)
    assert block_weight(w, 4)[2, 1, 0, 2, 3, 1] == w[0, 2, 1 * 4 + 3, 2 * 4 + 1]
    with pytest.raises(LayoutError, match="6 channels are not a multiple of 4"):
        physical_shape((1, 2, 2, 6), "NCHW4c")


@pytest.mark.parametrize("src, dst", [(NHWC, "b1"), ("b1", NHWC), ("b1", "b2"), ("b2", "b1"), (NHWC, "b2"),
                                      ("b2", NHWC)])
def test_transform_kernels_are_exact(src, dst):
    name = {NHWC: NHWC, "b1": blocked(LANES), "b2": blocked(2 * LANES)}
    key = TransformKey((1, 3, 5, 4 * LANES), "float32", name[src], name[dst])
    kernel = build(transform_state(key))
    a = np.random.default_rng(1).standard_normal(key.shape).astype(np.float32)
    out = np.zeros(physical_shape(key.shape, key.dst), np.float32)
    kernel(to_layout(a, key.src), out)
    np.testing.assert_array_equal(out, to_layout(a, key.dst))
    with pytest.raises(LayoutError, match="to itself"):
        transform_tensors(key.shape, "float32", key.src, key.src)


# ---------------------------------------------------------------- the sidecar file

def test_sidecar_round_trips(tmp_path):
    path = tmp_path / "log.json.layouts.jsonl"
    costs = {TransformKey((1, 5, 5, C), "float32", NHWC, blocked(LANES)): 1.5e-6,
             TransformKey((1, 5, 5, C), "float32", blocked(2 * LANES), blocked(LANES)): 2.5e-6}
    write_transform_costs(path, {**costs, TransformKey((1, 5, 5, C), "float32", NHWC, blocked(C)): math.inf})
    got, choices = read_sidecar(path)
    assert got == costs and choices == {}  # a failed (inf) transform is not cached
    assert read_sidecar(tmp_path / "missing") == ({}, {})


def _good_transform_line():
    from measure.target import toolchain_key

    return {"version": 1, "kind": "transform", "shape": [1, 5, 5, C], "dtype": "float32", "src": NHWC,
            "dst": blocked(LANES), "seconds": 1e-6, "target": toolchain_key()}


@pytest.mark.parametrize("change, message", [
    ({"seconds": float("nan")}, "'seconds' must be a finite number >= 0"),  # json reads NaN
    ({"seconds": float("inf")}, "'seconds' must be a finite number >= 0"),
    ({"seconds": -1.0}, "'seconds' must be a finite number >= 0"),
    ({"seconds": "fast"}, "'seconds' must be a finite number >= 0"),
    ({"seconds": True}, "'seconds' must be a finite number >= 0"),
    ({"shape": [1, 5, 5]}, "'shape' must be 4 integers"),
    ({"shape": [1, 5, 5, 10 ** 12]}, "'shape' must be 4 integers"),
    ({"shape": [1, 5, 5, LANES + 1]}, f"{LANES + 1} channels are not a multiple of {LANES}"),
    ({"dst": "NCHW0c"}, "unknown layout 'NCHW0c'"),
    ({"dst": "__import__('os')"}, "unknown layout"),
    ({"dst": NHWC}, "a transform from NHWC to itself"),
    ({"dtype": "object"}, "'dtype' must be one of"),
    ({"kind": "exec"}, "unknown 'kind'"),
    ({"version": 2}, "'version' must be 1"),
    ({"target": 7}, "'target' must be a toolchain key"),
])
def test_hostile_sidecar_lines_are_refused_naming_file_and_line(tmp_path, change, message):
    path = tmp_path / "log.json.layouts.jsonl"
    bad = {**_good_transform_line(), **change}
    path.write_text(json.dumps(_good_transform_line()) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(LayoutFileError, match=f"{path}:2: .*{message}"):
        read_sidecar(path)


@pytest.mark.parametrize("line, message", [
    ("[1, 2]", "an entry must be a JSON object"),
    ('{"version": 1, "kind": "choice", "network": "ab", "layouts": ["NHWC", 3]}', r"layouts\[1\] must be a layout name string"),
    ('{"version": 1, "kind": "choice", "network": "a b", "layouts": ["NHWC"]}', "'network' must be a network key"),
    ('{"version": 1, "kind": "choice", "network": "ab", "layouts": []}', "'layouts' must be a non-empty list"),
    ("[" * 100000, "not JSON"),
])
def test_hostile_choice_lines_are_refused(tmp_path, line, message):
    path = tmp_path / "l.layouts.jsonl"
    path.write_text("\n" + line + "\n")
    with pytest.raises(LayoutFileError, match=f"{path}:2: {message}"):
        read_sidecar(path)
    path.write_bytes(b"\xff\xfe\n")
    with pytest.raises(LayoutFileError, match=f"{path}:1: not UTF-8"):
        read_sidecar(path)


def test_a_choice_for_a_group_that_cannot_take_it_is_refused(tmp_path):
    from ansor.graph.layout_tuning import network_key

    g = small_net(first_in=3)
    log = tmp_path / "log.json"
    log.write_text("")
    occ = lower_groups(g)
    sidecar_path(log).write_text(json.dumps({"version": 1, "kind": "choice", "network": network_key(occ),
                                             "layouts": [blocked(LANES)] + [NHWC] * 5}) + "\n")
    with pytest.raises(GraphError, match=r"layouts.jsonl:1: group .* cannot run in NCHW\d+c: 3 input"):
        chosen_layouts(g, log)
    sidecar_path(log).write_text("\n" + json.dumps({"version": 1, "kind": "choice", "network": network_key(occ),
                                                    "layouts": [NHWC] * 5}) + "\n")
    with pytest.raises(GraphError, match="layouts.jsonl:2: expected one layout per fused group \\(6\\), got 5"):
        ansor.compile_network(g, log, verbose=False)


# ---------------------------------------------------------------- the problem

def test_the_network_problem_solves_to_the_brute_force_optimum():
    g = small_net()
    variants = layout_variants(g)
    rng = random.Random(3)
    for _ in range(5):
        costs = [[rng.uniform(1, 10) for _ in v.layouts] for v in variants]
        transforms = {k: rng.uniform(0, 5) for k in needed_transforms(g, variants)}
        p = build_problem(g, variants, costs, transforms)
        assert "in:0" in p.nodes and "out:0" in p.nodes
        sol, best = solve(p), brute_force(p)
        assert sol.cost == pytest.approx(best.cost)
    # transforms for free and blocked kernels cheaper: every conv blocks
    costs = [[10.0] + [1.0] * (len(v.layouts) - 1) for v in variants]
    p = build_problem(g, variants, costs, {k: 0.0 for k in needed_transforms(g, variants)})
    ch = solve(p).choice
    assert all(ch[f"g{i}"] > 0 for i in range(4))


# ---------------------------------------------------------------- end to end

def _fake_tuned_log(g, path, blocked_faster: bool):
    """A tuned-like log: per task one sampled schedule, recorded as measured, the blocked
    variants at a tenth (or ten times) of the NHWC time (seconds: far above any transform's time
    on a busy host, so the choice does not depend on the timing noise)."""
    tasks, _ = extract_layout_tasks(g)
    hw = host_hardware_params()
    params = SearchParams().with_hardware(hw)
    rec = RecordToFile(path)
    for ti, t in enumerate(tasks):
        sk = list(generate_sketches(t.compute_dag, hardware_params=hw))
        state = sample_initial_population(sk, 1, random.Random(ti), params)[0]
        cost = 1.0 * ((0.1 if blocked_faster else 10) if t.desc.endswith("]") else 1)
        rec([MeasureInput(t, state)], [MeasureResult((cost,), 0)])


@pytest.fixture
def quick_runner():
    from measure.runner import LocalRunner

    runner = LocalRunner(min_repeat_ms=0, warmup_ms=0)
    yield runner
    runner.close()


def test_layout_choice_written_and_reused_by_compile_network(tmp_path, quick_runner):
    g = small_net()
    log = tmp_path / "log.json"
    _fake_tuned_log(g, log, blocked_faster=True)
    choice = solve_layouts(g, log, runner=quick_runner)
    assert choice.solution.optimal
    assert sum(lay != NHWC for lay in choice.layouts) >= 3
    cached, choices = read_sidecar(sidecar_path(log))
    assert set(choice.transforms) <= set(cached) and list(choices.values()) == [(choice.layouts, len(cached) + 1)]
    assert chosen_layouts(g, log) == choice.layouts
    lib = ansor.compile_network(g, log, verbose=False)  # layouts="auto": the recorded choice
    assert lib.num_layout_transforms >= 2
    assert_network_matches(lib, g)
    assert ansor.compile_network(g, log, verbose=False, layouts=None).num_layout_transforms == 0
    # a second solve measures nothing new (the transform costs are cached)
    lines = sidecar_path(log).read_text().count('"transform"')
    solve_layouts(g, log, runner=quick_runner)
    assert sidecar_path(log).read_text().count('"transform"') == lines
    # slower blocked variants: the solver keeps NHWC everywhere
    log2 = tmp_path / "log2.json"
    _fake_tuned_log(g, log2, blocked_faster=False)
    assert set(solve_layouts(g, log2, runner=quick_runner).layouts) == {NHWC}


@pytest.mark.slow
def test_layout_tuning_through_the_cli(tmp_path, monkeypatch, capsys):
    """``ansor network tune --layout-tuning`` really measures the variants and transforms, writes
    the choice; ``ansor network run`` compiles with it and matches the reference."""
    g = small_net()
    monkeypatch.setattr("ansor.cli.common.load_model", lambda *a, **k: g)
    monkeypatch.setattr("ansor.cli.network.load_model", lambda *a, **k: g)
    log = tmp_path / "log.json"
    n_tasks = len(extract_layout_tasks(g)[0])
    argv = tiny_tune_argv("layout-net", log, n_tasks, "--layout-tuning", "--verbose", "0")
    assert ansor_main(argv) == 0
    out = capsys.readouterr().out
    assert "group(s) blocked" in out and "layouts.jsonl" in out
    layouts = chosen_layouts(g, log)
    assert layouts is not None and len(layouts) == 6
    assert ansor_main(["network", "run", "layout-net", "--log", str(log), "--rounds", "0"]) == 0
    out = capsys.readouterr().out
    assert "max error against the numpy reference" in out
    assert_network_matches(ansor.compile_network(g, log, verbose=False), g)


def test_exported_module_with_layout_transforms_loads_and_runs(tmp_path):
    g = small_net()
    lib = ansor.compile_network(g, layouts=[blocked(LANES)] * 4 + [NHWC] * 2, verbose=False)
    from ansor.graph.executor import load_module

    back = load_module(lib.export(tmp_path / "m"))
    assert back.num_layout_transforms == lib.num_layout_transforms > 0
    assert_network_matches(back, g)


@pytest.mark.parametrize("strides, dilation, padding", [(2, 1, (1, 0, 2, 1)), (1, 2, 2), (2, 2, 0)])
def test_blocked_conv_with_strides_dilation_and_batch_matches(strides, dilation, padding):
    r = np.random.default_rng(4)
    b = GraphBuilder("strided")
    x = b.input("x", (2, 9, 8, LANES))
    w = b.constant(r.standard_normal((3, 3, LANES, 2 * LANES)).astype(np.float32), "w")
    y = b.conv2d(x, w, strides=strides, dilation=dilation, padding=padding, name="conv")
    scale = b.constant(r.standard_normal((1, 1, 2 * LANES)).astype(np.float32), "scale")
    g = b.build(b.clip(b.mul(y, scale), 0.0, 6.0))
    assert candidate_layouts(lower_groups(g)[0].group, g, host_hardware_params()).layouts[1:] == (
        blocked(LANES),)
    assert_network_matches(ansor.compile_network(g, layouts=[blocked(LANES)], verbose=False), g)


def test_transform_costs_are_kept_per_cache_mode(tmp_path):
    """A cold run does not take costs timed warm (entries without ``cache``, as before the modes),
    nor the reverse."""
    path = tmp_path / "log.json.layouts.jsonl"
    warm = {TransformKey((1, 5, 5, C), "float32", NHWC, blocked(LANES)): 1.5e-6}
    cold = {TransformKey((1, 5, 5, C), "float32", blocked(LANES), NHWC): 4.5e-6}
    write_transform_costs(path, warm)
    write_transform_costs(path, cold, "cold")
    assert '"cache"' not in path.read_text().splitlines()[0]
    assert read_sidecar(path, "warm")[0] == warm and read_sidecar(path, "cold")[0] == cold
    assert read_sidecar(path)[0] == {**warm, **cold}
    bad = {**_good_transform_line(), "cache": "tepid"}
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(LayoutFileError, match="'cache' must be one of"):
        read_sidecar(path)


def test_the_network_key_ignores_how_a_view_is_written_and_reads_the_legacy_key(tmp_path):
    """A reshape runs no kernel: a change to its op's definition (its workload key) must not
    lose the layouts chosen for a network (it once made ResNet-50 compile direct-only). Choices
    written under the old key are still read; a sidecar whose choices are all for another
    network is said, not silently ignored."""
    import dataclasses
    import warnings

    from ansor.graph.layout_tuning import network_key

    g = ansor.networks.get("resnet-18", image_size=32)
    occ = lower_groups(g)
    views = [i for i, o in enumerate(occ) if all(n.op == "reshape" for n in o.group.nodes)]
    assert views, "resnet-18 flattens before its classifier"
    changed = list(occ)
    changed[views[0]] = dataclasses.replace(occ[views[0]], dag=occ[0].dag)  # another workload key
    assert network_key(changed) == network_key(occ)
    assert network_key(changed, legacy=True) != network_key(occ, legacy=True)

    log = tmp_path / "log.json"
    log.write_text("")
    layouts = [NHWC] * len(occ)
    sidecar_path(log).write_text(json.dumps({"version": 1, "kind": "choice", "layouts": layouts,
                                             "network": network_key(occ, legacy=True)}) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert chosen_layouts(g, log) == tuple(layouts)
    sidecar_path(log).write_text(json.dumps({"version": 1, "kind": "choice", "layouts": layouts,
                                             "network": network_key(changed, legacy=True)}) + "\n")
    with pytest.warns(RuntimeWarning, match="recorded layout choice.* for another network"):
        assert chosen_layouts(g, log) is None
