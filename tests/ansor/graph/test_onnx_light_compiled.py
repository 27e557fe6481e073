"""The nine real models the onnx wheel ships (onnx/backend/test/data/light) compiled with
``compile_network`` (every task untuned) and run natively: the outputs match the expected output
shipped beside each model and onnxruntime on the same input.

Input and tolerances are the onnx backend test runner's (see test_onnx_light_models.py): input
``arange(n).reshape(shape) / n`` in float32, rtol 1e-3 (DenseNet-121 2e-3). SqueezeNet and
ShuffleNet compile in a few seconds and run in the fast suite; the others are slow.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import ansor
from ansor.frontend import from_onnx

from .test_onnx_light_models import FAST, LIGHT, MODELS, TOL, _runner_input


@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m in FAST else pytest.mark.slow) for m in MODELS])
def test_compiled_light_model_matches_expected_output_and_onnxruntime(name):
    import onnxruntime as ort

    path = os.path.join(LIGHT, f"light_{name}.onnx")
    graph = from_onnx(path)
    ((iname, itype),) = graph.inputs.items()
    x = _runner_input(itype.shape)
    lib = ansor.compile_network(graph, verbose=False)
    (out_name,) = graph.outputs
    ours = lib.run({iname: x})[out_name]
    expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    rtol = TOL.get(name, 1e-3)
    assert ours.shape == expected.shape and ours.dtype == expected.dtype
    np.testing.assert_allclose(ours, expected, rtol=rtol, atol=1e-7)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ours, sess.run(None, {iname: x})[0], rtol=rtol, atol=1e-7)


def test_compiled_concat_reads_each_input_in_its_own_range():
    # Three inputs of different widths along the channel axis, one of them a computed value:
    # each output channel must come from exactly one input (the lowering once selected the first
    # input for every index, reading it out of bounds).
    from ansor.graph import GraphBuilder, run

    b = GraphBuilder()
    xs = [b.input(f"x{i}", (1, 3, 3, c)) for i, c in enumerate((2, 5, 3))]
    g = b.build(b.concat([xs[0], b.relu(xs[1]), xs[2]], axis=3))
    rng = np.random.default_rng(0)
    feed = {n: rng.standard_normal(t.shape).astype(np.float32) for n, t in g.inputs.items()}
    out = ansor.compile_network(g, verbose=False).run(feed)
    np.testing.assert_array_equal(out[g.outputs[0]], run(g, feed)[g.outputs[0]])
