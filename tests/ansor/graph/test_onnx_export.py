"""A graph written as ONNX (``ansor.graph.onnx_export``) runs in onnxruntime with the graph
reference's outputs: the zoo networks (the peer onnxruntime runs for them), an imported model
round-tripped, and every op the exporter maps, including image ops kept NCHW between transposes."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ansor
from ansor.graph import GraphBuilder, GraphError, run
from ansor.graph.onnx_export import export_onnx, to_onnx

from .test_onnx_light_models import LIGHT


def _check(g, tmp_path, rtol=1e-4):
    rng = np.random.default_rng(0)
    x = {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in g.inputs.items()}
    ref = run(g, x)
    path = tmp_path / "g.onnx"
    export_onnx(g, path)
    outs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {f"input_{i}": v for i, v in enumerate(x.values())})
    for o, name in zip(outs, g.outputs):
        np.testing.assert_allclose(o, ref[name], rtol=0, atol=rtol * max(np.abs(ref[name]).max(), 1e-30))
    return onnx.load(str(path))


@pytest.mark.parametrize("name, kwargs", [("resnet-18", {"image_size": 32}), ("mobilenet-v2", {"image_size": 32}),
                                          ("efficientnet-b0", {"image_size": 32}), ("bert-base-layer", {"seq_len": 8})])
def test_zoo_networks(tmp_path, name, kwargs):
    m = _check(ansor.networks.get(name, **kwargs), tmp_path)
    ops = [n.op_type for n in m.graph.node]
    if name != "bert-base-layer":
        # images stay NCHW from the input's transpose to the classifier's flatten
        assert ops.count("Transpose") == 2 and "Conv" in ops


def test_an_imported_model_round_trips(tmp_path):
    _check(ansor.frontend.from_onnx(f"{LIGHT}/light_inception_v1.onnx"), tmp_path)


def test_every_mapped_op(tmp_path):
    rng = np.random.default_rng(3)

    def c(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    b = GraphBuilder("ops")
    x = b.input("x", (1, 9, 9, 4))
    y = b.relu(b.conv2d(x, b.constant(c(3, 3, 4, 8), "w"), b.constant(c(8), "b"), padding=(0, 0, 1, 1)))
    y = b.batch_norm(y, *(b.constant(np.abs(c(8)) + 0.5, n) for n in ("g", "be", "m", "v")))
    a = b.avg_pool2d(y, 3, strides=2, padding=(0, 0, 1, 1), ceil_mode=True)
    mx = b.max_pool2d(y, 3, strides=2, padding=1)
    z = b.concat([a, mx], axis=3)
    z = b.lrn(b.clip(z, -1.0, 2.0), 3)
    z = b.gelu(b.sub(b.mul(z, b.constant(c(16), "s")), b.global_avg_pool(z)))
    z = b.pad(z, (0, 1, 0, 0), (0, 0, 1, 0))
    flat = b.reshape(b.transpose(z, (0, 3, 1, 2)), (1, -1))
    t = b.reshape(flat, (16, -1))
    t = b.layer_norm(t, b.constant(c(t.shape[1]), "lg"), b.constant(c(t.shape[1]), "lb"))
    mm = b.matmul(t, t, transpose_b=True)
    mm = b.gelu(b.softmax(b.reduce_mean(mm, axes=[1], keepdims=True), axis=0), approximate="tanh")
    out = b.dense(b.reshape(mm, (1, 16)), b.constant(c(5, 16), "dw"))
    _check(b.build([out, b.sigmoid(b.tanh(flat))]), tmp_path)


def test_a_graph_without_onnx_mapping_is_named():
    b = GraphBuilder("lrn1")
    x = b.input("x", (1, 4, 4, 8))
    with pytest.raises(GraphError, match="lrn over axis 1"):
        to_onnx(b.build(b.lrn(x, 3, axis=1)))
