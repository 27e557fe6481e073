"""Helpers for the ONNX import tests: build a one-graph model with ``onnx.helper`` and check our
import + numpy interpreter against ``onnx.reference.ReferenceEvaluator``."""
from __future__ import annotations

import numpy as np
import onnx  # in the test extra: these tests run, never skip
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ansor.frontend import from_onnx
from ansor.graph import Graph, run

_ELEM = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int64"): TensorProto.INT64}


def make_model(nodes, inputs: dict[str, np.ndarray], inits: dict[str, np.ndarray] | None = None,
               outputs=("y",), opset: int = 17) -> "onnx.ModelProto":
    """A model whose graph inputs are ``inputs`` (shapes from the arrays), initializers ``inits``."""
    graph = helper.make_graph(
        list(nodes), "test",
        [helper.make_tensor_value_info(n, _ELEM[a.dtype], a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(nodes, inputs, inits=None, outputs=("y",), opset=17, rtol=1e-5, atol=1e-5, oracle="reference") -> Graph:
    """Import and run; assert every output matches the oracle: onnx's ReferenceEvaluator, or
    onnxruntime (``oracle="ort"``) where the former is wrong (it applies Softmax per axis at every
    opset, ignoring the flatten-at-axis semantics before opset 13). Returns the graph."""
    model = make_model(nodes, inputs, inits, outputs, opset)
    if oracle == "ort":
        import onnxruntime as ort
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        expected = sess.run(None, inputs)
    else:
        expected = ReferenceEvaluator(model).run(None, inputs)
    graph = from_onnx(model)
    got = run(graph, inputs)
    for name, exp in zip(outputs, expected):
        np.testing.assert_allclose(got[name], exp, rtol=rtol, atol=atol, err_msg=f"output {name}")
        assert got[name].shape == exp.shape
    return graph


def rand(*shape, seed=0, low=-1.0, high=1.0) -> np.ndarray:
    return np.random.default_rng(seed + len(shape) * 7 + sum(shape)).uniform(low, high, shape).astype(np.float32)
