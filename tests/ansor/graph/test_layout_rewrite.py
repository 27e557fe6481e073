"""Weight layout rewrite in whole networks (issue 20 item 1): tasks name their constant inputs,
``compile_network`` packs a constant once for a record that packs it and the kernel reads the
packed array; outputs equal the graph reference with rewrite on and off, for a conv + dense
network with biases and for grouped and depthwise convs; two packings of one constant each get
their own copy; an exported module loads and runs with the packed constants."""
from __future__ import annotations

import random

import numpy as np
import pytest

import ansor
from ansor.graph import GraphBuilder
from ansor.graph.plan import extract_tasks
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordToFile
from measure.target import host_hardware_params
from sketch.init_population import sample_initial_population
from sketch.layout_rewrite import rewritable_packs
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from sketch.transform_steps import PackStep
from tests.util import assert_network_matches, graph_inputs


def conv_dense_net():
    """conv + bias + relu, a grouped conv, a pool, a dense with bias (batch 3, so the dense
    output has rows to share its weight's packed blocks)."""
    r = np.random.default_rng(1)
    b = GraphBuilder("conv-dense")
    x = b.input("x", (3, 9, 9, 8))
    w = b.constant(r.standard_normal((3, 3, 8, 24)).astype(np.float32), "w")
    bias = b.constant(r.standard_normal((24,)).astype(np.float32), "b")
    y = b.relu(b.conv2d(x, w, bias=bias, padding=1, name="conv"))
    wg = b.constant(r.standard_normal((3, 3, 12, 20)).astype(np.float32), "wg")
    y = b.conv2d(y, wg, padding=1, groups=2, name="gconv")
    y = b.reshape(b.global_avg_pool(y), (3, 20))
    wd = b.constant(r.standard_normal((19, 20)).astype(np.float32), "wd")
    bd = b.constant(r.standard_normal((19,)).astype(np.float32), "bd")
    return b.build(b.dense(y, wd, bias=bd))


def grouped_net(groups=4, depthwise=False):
    r = np.random.default_rng(2)
    b = GraphBuilder("grouped")
    x = b.input("x", (2, 7, 7, 16))
    c = 16 if depthwise else 28  # 7 or 14 output channels per group: most blocks pad
    g = 16 if depthwise else groups
    w = b.constant(r.standard_normal((3, 3, 16 // g, c)).astype(np.float32), "w")
    y = b.relu(b.conv2d(x, w, padding=1, groups=g, name="gconv"))
    w2 = b.constant(r.standard_normal((1, 1, c, 12)).astype(np.float32), "w2")
    return b.build(b.conv2d(y, w2, name="pw"))


def shared_weight_net():
    """One weight read by two dense layers of different batch: two tasks, each its own packing."""
    r = np.random.default_rng(3)
    b = GraphBuilder("shared")
    x1 = b.input("x1", (4, 24))
    x2 = b.input("x2", (6, 24))
    w = b.constant(r.standard_normal((24, 40)).astype(np.float32), "w")
    return b.build([b.matmul(x1, w, name="mm1"), b.matmul(x2, w, name="mm2")])


def packed_log(graph, path, seed=0, blocks=None):
    """A tuned-like log: per task, one sampled schedule that packs a constant input (when its
    sketches pack one), recorded as if measured. ``blocks``: per task index, a required block
    length. Returns {task index: the recorded state's packs}."""
    tasks, _ = extract_tasks(graph)
    hw = host_hardware_params()
    params = SearchParams().with_hardware(hw)
    rec = RecordToFile(path)
    out = {}
    for ti, t in enumerate(tasks):
        sk = [x for x in generate_sketches(t.compute_dag, hardware_params=hw)
              if any(isinstance(st, PackStep) for st in x.steps)]
        if not sk:
            continue
        for state in sample_initial_population(sk, 64, random.Random(seed + ti), params):
            packs = rewritable_packs(state, t.layout_rewrite_inputs)
            if packs and (blocks is None or blocks.get(ti) in {p.block for p in packs.values()}):
                rec([MeasureInput(t, state)], [MeasureResult((1e-6,), 0)])
                out[ti] = packs
                break
    return out


def _packed_steps(lib):
    return [s for s in lib._steps if s.kernel.packed_args]


def test_tasks_name_their_constantgraph_inputs():
    tasks, _ = extract_tasks(conv_dense_net())
    by_desc = {t.desc.split()[0]: t for t in tasks}
    # conv: data, weight, bias -> weight and bias constant; dense: data, weight (bound transposed), bias
    assert by_desc["conv2d+add+relu"].layout_rewrite_inputs == (1, 2)
    assert by_desc["conv2d"].layout_rewrite_inputs == (1,)
    assert by_desc["dense+add"].layout_rewrite_inputs == (1, 2)
    assert by_desc["global_avg_pool"].layout_rewrite_inputs == ()
    off, _ = extract_tasks(conv_dense_net(), layout_rewrite=False)
    assert all(not t.layout_rewrite for t in off)
    assert [t.workload_key for t in off] == [t.workload_key for t in tasks]
    assert [t.constant_inputs for t in off] == [t.constant_inputs for t in tasks]
    assert tasks[0].to_json()["layout_rewrite"] == [1, 2] and "layout_rewrite" not in off[0].to_json()


def test_conv_dense_network_with_rewrite_matches_reference(tmp_path):
    g = conv_dense_net()
    log = tmp_path / "log.json"
    packed = packed_log(g, log)
    assert len(packed) == 3  # conv, grouped conv, dense
    on = ansor.compile_network(g, log, layout_rewrite=True, verbose=False)
    off = ansor.compile_network(g, log, layout_rewrite=False, verbose=False)
    assert_network_matches(on, g)
    assert_network_matches(off, g)
    steps = _packed_steps(on)
    assert len(steps) == 3 and not _packed_steps(off)
    for st in steps:
        for p in st.kernel.packed_args:
            # the kernel's argument is the packed shape, and so is the buffer bound to it
            assert st.kernel.args[p.position].shape == p.packed_shape
            assert on._buffers[st.args[p.position]].shape == p.packed_shape
    # the module holds the packed weights, not the originals nobody reads
    shapes = sorted(tuple(a.shape) for a in on._consts.values())
    assert (3, 3, 8, 24) not in shapes and (3, 3, 12, 20) not in shapes
    assert sorted(p.packed_shape for st in steps for p in st.kernel.packed_args) == \
        sorted(s for s in shapes if len(s) >= 3)


@pytest.mark.parametrize("kind", ["groups=4", "groups=2", "depthwise"])
def test_grouped_and_depthwise_conv_with_rewrite_match_reference(tmp_path, kind):
    g = grouped_net(groups=2 if kind == "groups=2" else 4, depthwise=kind == "depthwise")
    log = tmp_path / "log.json"
    packed = packed_log(g, log, seed=1, blocks=None if kind == "depthwise" else {0: 16})
    assert 0 in packed
    lib = ansor.compile_network(g, log, verbose=False)
    assert_network_matches(lib, g)
    first = lib._steps[0]
    assert first.name == "gconv+relu" and first.kernel.packed_args  # the grouped weight is packed
    p = first.kernel.packed_args[0]
    if kind != "depthwise":
        assert p.dim == 3 and p.src_shape[3] % p.block  # its last block is zero-padded


def test_one_constant_two_packings_get_their_own_copies(tmp_path):
    g = shared_weight_net()
    tasks, _ = extract_tasks(g)
    assert len(tasks) == 2 and all(t.layout_rewrite_inputs == (1,) for t in tasks)
    log = tmp_path / "log.json"
    packed = None
    for seed in range(20):  # two records whose blocks differ
        log.unlink(missing_ok=True)
        packed = packed_log(g, log, seed=seed)
        if len(packed) == 2 and len({p.block for ps in packed.values() for p in ps.values()}) == 2:
            break
    blocks = [next(iter(ps.values())).block for ps in packed.values()]
    assert len(set(blocks)) == 2, blocks
    lib = ansor.compile_network(g, log, verbose=False)
    assert_network_matches(lib, g)
    steps = _packed_steps(lib)
    assert len(steps) == 2 and steps[0].args[1] != steps[1].args[1]
    assert {lib._buffers[s.args[1]].shape for s in steps} == {p.packed_shape for s in steps for p in s.kernel.packed_args}


def test_same_packing_of_one_constant_is_shared(tmp_path):
    """Two identical blocks reading one weight: one task, one kernel, one packed copy."""
    r = np.random.default_rng(4)
    b = GraphBuilder("twice")
    x = b.input("x", (4, 24))
    w = b.constant(r.standard_normal((24, 40)).astype(np.float32), "w")
    g = b.build([b.matmul(x, w, name="a"), b.matmul(b.relu(x), w, name="b")])
    log = tmp_path / "log.json"
    assert packed_log(g, log)
    lib = ansor.compile_network(g, log, verbose=False)
    assert_network_matches(lib, g)
    steps = _packed_steps(lib)
    assert len(steps) == 2 and steps[0].args[1] == steps[1].args[1]
    assert len(lib._consts) == 1


def test_exported_module_with_packed_constants_loads_and_runs(tmp_path):
    g = conv_dense_net()
    log = tmp_path / "log.json"
    packed_log(g, log)
    lib = ansor.compile_network(g, log, verbose=False)
    lib.export(tmp_path / "mod")
    with np.load(tmp_path / "mod" / "weights.npz", allow_pickle=False) as z:
        assert any(z[k].ndim == 5 for k in z.files)  # a packed conv weight
    again = ansor.load_module(tmp_path / "mod")
    x = graph_inputs(g)
    want = lib.run(x)
    got = again.run(x)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
