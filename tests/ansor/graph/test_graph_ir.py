"""The graph IR, builder and numpy interpreter without ONNX: type inference errors name the node
and op, validation catches malformed graphs, printing is readable and escapes names, and the
interpreter's conv/pool kernels agree with direct loops."""
from __future__ import annotations

import numpy as np
import pytest

from ansor.graph import Graph, GraphBuilder, GraphError, Node, TensorType, run
from ansor.graph.ir import OPS, make_node


def _naive_conv(x, w, stride, pad, dil, groups):
    """Direct 7-loop NHWC/HWIO convolution (the definition)."""
    n, h, wd, ci = x.shape
    kh, kw, cig, co = w.shape
    t, l, b, r = pad
    xp = np.pad(x.astype(np.float64), ((0, 0), (t, b), (l, r), (0, 0)))
    oh = (h + t + b - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (wd + l + r - (kw - 1) * dil[1] - 1) // stride[1] + 1
    out = np.zeros((n, oh, ow, co))
    cog = co // groups
    for o in range(co):
        g = o // cog
        for y in range(oh):
            for xx in range(ow):
                for ky in range(kh):
                    for kx in range(kw):
                        for c in range(cig):
                            out[:, y, xx, o] += (xp[:, y * stride[0] + ky * dil[0], xx * stride[1] + kx * dil[1], g * cig + c]
                                                 * w[ky, kx, c, o])
    return out


@pytest.mark.parametrize("ci, co, groups, stride, pad, dil", [
    (3, 4, 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    (4, 6, 2, (2, 1), (0, 1, 2, 0), (1, 2)),
    (4, 8, 4, (2, 2), (1, 1, 1, 1), (1, 1)),   # depthwise, multiplier 2
    (3, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2)),
])
def test_conv_kernel_matches_definition(ci, co, groups, stride, pad, dil):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 7, 6, ci)).astype(np.float32)
    w = rng.standard_normal((3, 3, ci // groups, co)).astype(np.float32)
    b = GraphBuilder()
    y = b.conv2d(b.input("x", x.shape), w, strides=stride, padding=pad, dilation=dil, groups=groups)
    got = run(b.build(y), {"x": x})[y.name]
    np.testing.assert_allclose(got, _naive_conv(x, w, stride, pad, dil, groups), rtol=1e-5, atol=1e-5)


def test_pools_match_definition():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 6, 7, 2)).astype(np.float32)
    b = GraphBuilder()
    xi = b.input("x", x.shape)
    mx = b.max_pool2d(xi, 3, 2, 1)
    av = b.avg_pool2d(xi, 3, 2, 1, count_include_pad=False)
    avp = b.avg_pool2d(xi, 3, 2, 1, count_include_pad=True)
    out = run(b.build([mx, av, avp]), {"x": x})
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=np.nan)
    for i in range(3):
        for j in range(3):
            win = xp[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
            np.testing.assert_allclose(out[mx.name][:, i, j], np.nanmax(win, axis=(1, 2)), rtol=1e-6)
            np.testing.assert_allclose(out[av.name][:, i, j], np.nanmean(win, axis=(1, 2)), rtol=1e-6)
            np.testing.assert_allclose(out[avp.name][:, i, j], np.nansum(win, axis=(1, 2)) / 9, rtol=1e-6)


def test_every_op_has_a_kernel_and_a_pattern():
    assert all(d.reference is not None for d in OPS.values())
    patterns = {"elemwise", "broadcast", "injective", "reduce", "out_elemwise_fusable", "opaque"}
    assert {op.pattern for op in OPS.values()} <= patterns


def test_type_errors_name_node_and_op():
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 3))
    with pytest.raises(GraphError, match=r"node conv_a \(conv2d\): weight \[3, 3, 4, 8\] \(HWIO\) has 4 input"):
        b.conv2d(x, np.zeros((3, 3, 4, 8), np.float32), name="conv_a")
    with pytest.raises(GraphError, match=r"node add \(add\): shapes \[1, 8, 8, 3\] and \[4\] do not broadcast"):
        b.add(x, np.zeros(4, np.float32))
    with pytest.raises(GraphError, match=r"node reshape \(reshape\): cannot reshape f32\[1, 8, 8, 3\] to \[5, -1\]|"
                                         r"cannot reshape"):
        b.reshape(x, (5, 7))
    with pytest.raises(GraphError, match=r"node max_pool2d \(max_pool2d\): kernel 9 exceeds"):
        b.max_pool2d(x, 9)
    with pytest.raises(GraphError, match=r"node softmax \(softmax\): softmax axis 4 is out of range"):
        b.softmax(x, axis=4)
    with pytest.raises(GraphError, match=r"node dense \(dense\): need data \[M, K\]"):
        b.dense(x, np.zeros((2, 3), np.float32))


def test_validate_rejects_malformed_graphs():
    t = TensorType((2, 3))
    relu = make_node("r", "relu", ["x"], [t])
    with pytest.raises(GraphError, match=r"input x is not defined before it"):
        Graph({}, {}, (relu,), ("r",))
    with pytest.raises(GraphError, match=r"node r \(relu\): the name is already defined"):
        Graph({"r": t}, {}, (make_node("r", "relu", ["r"], [t]),), ("r",))
    wrong = Node("r", "relu", ("x",), {}, TensorType((3, 2)))
    with pytest.raises(GraphError, match=r"recorded type f32\[3, 2\] but the op infers f32\[2, 3\]"):
        Graph({"x": t}, {}, (wrong,), ("r",))
    with pytest.raises(GraphError, match=r"graph output nope is not defined"):
        Graph({"x": t}, {}, (relu,), ("nope",))
    with pytest.raises(GraphError, match=r"constant c must be a numpy array"):
        Graph({"x": t}, {"c": [1, 2]}, (relu,), ("r",))
    with pytest.raises(GraphError, match="unsupported dtype 'float16'"):
        TensorType((2,), "float16")


def test_printing_is_readable_and_escapes_names():
    b = GraphBuilder("tiny")
    x = b.input("bad\nname", (1, 4))
    y = b.dense(x, np.ones((2, 4), np.float32), bias=np.zeros(2, np.float32))
    g = b.build(b.softmax(y))
    text = str(g)
    assert "graph tiny(%'bad\\nname': f32[1, 4]) {" in text
    assert "%dense = dense(%'bad\\nname', %const): f32[1, 2]" in text
    assert "%softmax = softmax(%dense_bias, axis=1): f32[1, 2]" in text
    assert text.endswith("return %softmax\n}")


def test_run_checks_inputs_by_name():
    b = GraphBuilder()
    y = b.relu(b.input("x", (2, 2)))
    g = b.build(y)
    with pytest.raises(GraphError, match="missing graph input"):
        run(g, {})
    with pytest.raises(GraphError, match=r"unknown input name\(s\): z"):
        run(g, {"x": np.zeros((2, 2)), "z": 1})
    with pytest.raises(GraphError, match=r"input x: expected shape \[2, 2\], got \[3\]"):
        run(g, {"x": np.zeros(3)})
