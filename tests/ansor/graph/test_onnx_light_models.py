"""The nine real models the onnx wheel ships under onnx/backend/test/data/light: import, run our
numpy interpreter, and match both the expected output shipped beside each model and onnxruntime.

Input and tolerances are the onnx backend test runner's (onnx/backend/test/runner and
case/model): the input is ``arange(n).reshape(shape) / n`` in float32, rtol 1e-3 (DenseNet-121
2e-3), atol 1e-7. The small networks run in the fast suite; the rest are marked slow (5-20 s each
on a shared 2-core machine, VGG-19's 400 MB fc6 weight dominating its import).
"""
from __future__ import annotations

import collections
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ansor.frontend import from_onnx
from ansor.graph import run

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
TOL = {"densenet121": 2e-3}
FAST = {"squeezenet", "shufflenet"}
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
          "squeezenet", "vgg19", "zfnet512"]


def _runner_input(shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def test_the_wheel_ships_the_nine_models():
    shipped = sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(LIGHT) if f.endswith(".onnx"))
    assert shipped == MODELS


@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m in FAST else pytest.mark.slow) for m in MODELS])
def test_light_model_matches_expected_output_and_onnxruntime(name):
    import onnxruntime as ort

    path = os.path.join(LIGHT, f"light_{name}.onnx")
    graph = from_onnx(path)
    ((iname, itype),) = graph.inputs.items()
    assert len(itype.shape) == 4 and itype.shape[1] == 3  # the model's own NCHW layout at the boundary
    x = _runner_input(itype.shape)
    (out_name,) = graph.outputs
    ours = run(graph, {iname: x})[out_name]
    expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    rtol = TOL.get(name, 1e-3)
    np.testing.assert_allclose(ours, expected, rtol=rtol, atol=1e-7)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ours, sess.run(None, {iname: x})[0], rtol=rtol, atol=1e-7)
    # Every conv runs NHWC: transposes only at the boundary (one for the NCHW input, one if the
    # output is 4-D) and the model's own (ShuffleNet's channel shuffles, done on NHWC data).
    counts = graph.op_counts()
    onnx_counts = collections.Counter(n.op_type for n in onnx.load(path).graph.node)
    assert counts["conv2d"] == onnx_counts["Conv"]
    assert counts.get("transpose", 0) == 1 + (len(expected.shape) == 4) + onnx_counts.get("Transpose", 0)
    assert "batch_norm" not in counts or name == "densenet121"  # every BN after a conv is folded


def _with_random_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """The light models fill every weight with one constant, so all channels are equal and a wrong
    channel order (e.g. flattening an NHWC map as if it were NCHW) would go unnoticed. Replace each
    ConstantOfShape weight by seeded random values (He-scaled; 1-D parameters in [0.5, 1.5] so
    batch-norm variances stay positive)."""
    rng = np.random.default_rng(seed)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    keep = []
    for node in m.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = tuple(int(d) for d in inits[node.input[0]])
            if len(shape) == 1:
                arr = rng.uniform(0.5, 1.5, shape)
            else:
                arr = rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))
            m.graph.initializer.append(numpy_helper.from_array(arr.astype(np.float32), node.output[0]))
        else:
            keep.append(node)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    return m


@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m in FAST else pytest.mark.slow) for m in MODELS])
def test_light_model_with_random_weights_matches_onnxruntime(name):
    import onnxruntime as ort

    model = _with_random_weights(onnx.load(os.path.join(LIGHT, f"light_{name}.onnx")))
    # Compare the logits before the final Softmax (a peaked softmax hides or exaggerates errors).
    last = model.graph.node[-1]
    if last.op_type == "Softmax":
        model.graph.node.pop()
        del model.graph.output[:]
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(last.input[0]))
    graph = from_onnx(model)
    ((iname, itype),) = graph.inputs.items()
    x = np.random.default_rng(1).standard_normal(itype.shape).astype(np.float32)
    ours = run(graph, {iname: x})[graph.outputs[0]]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    ref = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, {iname: x})[0]
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0
    np.testing.assert_allclose(ours, ref, rtol=1e-3, atol=1e-4 * np.abs(ref).max())
