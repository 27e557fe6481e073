"""Post-dominator fusion (relay's FuseOps): diamonds fuse when every path to the post-dominator
is fusable, a conv absorbs an elementwise diamond after it, values read by two groups or returned
by the graph are materialised, and the fused network still computes the graph reference."""
import numpy as np

import ansor
from ansor.graph import GraphBuilder, run
from ansor.graph.fuse import fuse


def _ops(g):
    return [[n.op for n in grp.nodes] for grp in fuse(g)]


def _inputs(g, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in g.inputs.items()}


def _matches_reference(g):
    x = _inputs(g)
    out, ref = ansor.compile_network(g, verbose=False).run(x), run(g, x)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=1e-5 * np.abs(ref[k]).max())


def _conv_gelu_diamond():
    # conv -> bias -> x * (1 + erf(x / sqrt 2)) * 0.5: x is read twice (a diamond of elementwise
    # ops, ONNX's decomposed exact GELU); relay fuses it all into the conv.
    b = GraphBuilder()
    x = b.input("x", (1, 6, 6, 4))
    w = b.constant(np.random.default_rng(1).standard_normal((3, 3, 4, 8)).astype(np.float32), "w")
    y = b.conv2d(x, w, b.constant(np.random.default_rng(2).standard_normal(8).astype(np.float32), "bias"), padding=1)
    e = b.add(b.erf(b.div(y, b.constant(np.float32(np.sqrt(2.0)), "s2"))), b.constant(np.float32(1.0), "one"))
    return b.build(b.mul(b.mul(y, e), b.constant(np.float32(0.5), "half")))


def test_elementwise_diamond_fuses_into_one_group():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    r = b.relu(x, name="r")
    g = b.build(b.add(b.exp(r), b.neg(r)))
    assert _ops(g) == [["relu", "exp", "neg", "add"]]
    _matches_reference(g)


def test_conv_absorbs_an_elementwise_diamond_after_it():
    g = _conv_gelu_diamond()
    assert _ops(g) == [["conv2d", "add", "div", "erf", "add", "mul", "mul"]]
    _matches_reference(g)


def test_value_read_by_a_conv_and_an_add_is_materialised():
    # r feeds a conv and the residual add: the path through the conv is not elementwise, so r
    # stays its own group's output; the conv and the add fuse (the add after a conv absorbs).
    b = GraphBuilder()
    x = b.input("x", (1, 6, 6, 4))
    w = b.constant(np.random.default_rng(1).standard_normal((3, 3, 4, 4)).astype(np.float32), "w")
    r = b.relu(x, name="r")
    g = b.build(b.relu(b.add(b.conv2d(r, w, padding=1), r)))
    assert _ops(g) == [["relu"], ["conv2d", "add", "relu"]]
    _matches_reference(g)


def test_a_graph_output_ends_its_group_even_inside_a_diamond():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    r = b.relu(x, name="r")
    e = b.exp(r, name="e")
    g = b.build([b.add(e, b.neg(r)), e])
    groups = fuse(g)
    assert any(grp.output == "e" for grp in groups)
    assert all(n.name != "e" or grp.output == "e" for grp in groups for n in grp.nodes)
    _matches_reference(g)


def test_a_diamond_through_an_opaque_op_does_not_fuse():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    r = b.relu(x, name="r")
    g = b.build(b.add(b.softmax(r), r))
    assert _ops(g) == [["relu"], ["softmax"], ["add"]]
    _matches_reference(g)


def test_injective_diamond_fuses_in_phase_one():
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    t = b.transpose(x, (0, 2, 1))
    g = b.build(b.concat([b.reshape(t, (2, 12)), b.reshape(b.relu(t), (2, 12))], axis=1))
    assert _ops(g) == [["transpose", "reshape", "relu", "reshape", "concat"]]
    _matches_reference(g)


def test_depth_cap_applies_to_the_whole_diamond():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    r = b.relu(x, name="r")
    g = b.build(b.add(b.exp(r), b.neg(r)))
    assert all(len(grp.nodes) <= 3 for grp in fuse(g, max_depth=3))
    assert len(fuse(g, max_depth=1)) == 4
