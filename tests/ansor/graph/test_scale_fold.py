"""A per-channel scale folded into the conv that reads it (``ansor/graph/scale_fold.py``): which
products are folded (the rule, either operand order, the conditions), that the rewritten graph
computes what the original does, and that a compiled squeeze-excite block matches it."""
from __future__ import annotations

import numpy as np
import pytest

import ansor
from ansor.graph import GraphBuilder, run
from ansor.graph.plan import plan_network
from ansor.graph.scale_fold import fold_channel_scales
from tests.util import assert_network_matches


def se_block(hw: int = 8, c: int = 16, co: int = 8, batch: int = 1, k: int = 1, gate_first: bool = False,
             reuse: bool = False, const_scale: bool = False):
    """Squeeze-excite then a ``k x k`` conv to ``co`` channels: pool -> 1x1 -> sigmoid -> y * gate
    -> conv. ``reuse``: the product is read again (a graph output); ``const_scale``: the scale is
    a constant ``[C]`` vector instead of the gate."""
    r = np.random.default_rng(5)
    b = GraphBuilder("se")
    x = b.input("x", (batch, hw, hw, c))
    y = b.relu(x, name="y")
    if const_scale:
        gate = b.constant(r.uniform(0.5, 1.5, c).astype(np.float32), "scale")
    else:
        pooled = b.global_avg_pool(y, name="pool")
        w1 = b.constant((r.standard_normal((1, 1, c, c)) / 4).astype(np.float32), "w1")
        gate = b.sigmoid(b.conv2d(pooled, w1, name="squeeze"), name="gate")
    scaled = b.mul(gate, y, name="scaled") if gate_first else b.mul(y, gate, name="scaled")
    w2 = b.constant((r.standard_normal((k, k, c, co)) / 4).astype(np.float32), "w2")
    out = b.conv2d(scaled, w2, b.constant(np.full(co, 0.1, np.float32), "b2"), padding=k // 2, name="project")
    return b.build([out, scaled] if reuse else out)


def _check_same(g, f, seed=0):
    ((name, t),) = g.inputs.items()
    x = np.random.default_rng(seed).standard_normal(t.shape).astype(np.float32)
    a, b = run(g, {name: x}), run(f, {name: x})
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("gate_first", [False, True])
@pytest.mark.parametrize("k", [1, 3])
def test_the_scale_moves_onto_the_weight_and_computes_the_same(gate_first, k):
    g = se_block(hw=12, gate_first=gate_first, k=k)  # 144 pixels > 9 x 8 weight products
    f = fold_channel_scales(g)
    assert "scaled" not in {n.name for n in f.nodes}  # the activation-sized product is gone
    conv = f.node("project")
    assert conv.inputs[0] == "y" and f.node(conv.inputs[1]).op == "mul"
    assert f.type_of(conv.inputs[1]).shape == (k, k, 16, 8)
    _check_same(g, f)
    assert fold_channel_scales(f) is f  # nothing left to fold


def test_a_constant_scale_and_a_batch_fold_too():
    g = se_block(const_scale=True, batch=3)
    f = fold_channel_scales(g)
    assert "scaled" not in {n.name for n in f.nodes}
    _check_same(g, f)


@pytest.mark.parametrize("why, kwargs", [
    ("the weight is larger than the activation: 4x4 pixels into 32 channels", {"hw": 4, "co": 32}),
    ("8x8 = 64 pixels, fewer than a 3x3 conv into 8 channels has weights per input channel (72)", {"k": 3}),
    ("the product is read again", {"reuse": True}),
    ("a per-sample gate (batch 2) cannot be one weight", {"batch": 2}),
])
def test_what_is_not_folded(why, kwargs):
    g = se_block(**kwargs)
    assert fold_channel_scales(g) is g, why


def test_efficientnet_folds_down_to_14x14_only():
    g = ansor.networks.get("efficientnet-b0")
    f = fold_channel_scales(g)
    folded = [n.name for n in f.nodes if n.name.endswith("_project_scaled_w")]
    # blocks 1-11 run at 112..14 pixels; 12-16 at 7x7 with 192 or 320 outputs keep the multiply
    assert folded == [f"block{i}_project_scaled_w" for i in range(1, 12)]
    assert all(f"block{i}_se_scale" in {n.name for n in f.nodes} for i in range(12, 17))
    assert plan_network(g).graph.op_counts() == f.op_counts()
    assert plan_network(g, fold_scales=False).graph is g


def test_a_compiled_se_block_matches_the_original_graph():
    g = se_block(hw=12, c=16, co=8)
    lib = ansor.compile_network(g, verbose=False)
    assert_network_matches(lib, g, atol=1e-4)


def test_hostile_and_taken_names_survive_the_fold():
    """The new nodes are named after the conv; a name with quotes and a newline, and a graph
    that already uses the name the fold would pick, still fold, compile and match."""
    r = np.random.default_rng(2)
    b = GraphBuilder("se")
    x = b.input("x", (1, 12, 12, 8))
    y = b.relu(x, name='y"\n')
    gate = b.sigmoid(b.global_avg_pool(y, name="pool"), name="conv'\n\"_scale")  # the fold's pick
    scaled = b.mul(y, gate, name="scaled")
    w = b.constant((r.standard_normal((1, 1, 8, 4)) / 3).astype(np.float32), "w")
    g = b.build(b.conv2d(scaled, w, name="conv'\n\""))
    f = fold_channel_scales(g)
    assert "scaled" not in {n.name for n in f.nodes} and "conv'\n\"_scale_2" in {n.name for n in f.nodes}
    _check_same(g, f)
    assert_network_matches(ansor.compile_network(g, verbose=False), g, atol=1e-4)
