"""One check for an operator in all its homes' parts: a small ONNX model of it, run by
onnxruntime (the oracle), must give the same outputs through our import + numpy reference, our
compiled (untuned) network, our ONNX export run by onnxruntime, and the PyTorch peer."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

import ansor
from ansor.frontend import from_onnx
from ansor.graph import Graph, run, to_onnx
from ansor.graph.torch_peer import to_torch

_ELEM = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int64"): TensorProto.INT64,
         np.dtype("float16"): TensorProto.FLOAT16, np.dtype("bool"): TensorProto.BOOL,
         np.dtype("int32"): TensorProto.INT32}


def model_of(nodes: Sequence, inputs: Mapping[str, np.ndarray], inits: Mapping[str, np.ndarray] | None = None,
             outputs: Sequence[str] = ("y",), opset: int = 17, out_dtypes: Mapping[str, str] | None = None):
    """A one-graph model: graph inputs from ``inputs`` (shapes and dtypes of the arrays); outputs
    are float32 unless ``out_dtypes`` says otherwise."""
    graph = helper.make_graph(
        list(nodes), "op_check",
        [helper.make_tensor_value_info(n, _ELEM[a.dtype], a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(o, _ELEM[np.dtype((out_dtypes or {}).get(o, "float32"))], None)
         for o in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _ort(model, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, dict(feeds))


def _close(got: np.ndarray, want: np.ndarray, rtol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != onnxruntime's {want.shape}"
    if want.dtype.kind in "fc":
        scale = max(float(np.abs(want.astype(np.float64)).max(initial=0.0)), 1e-30)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=rtol * scale, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def check_everywhere(nodes: Sequence, inputs: Mapping[str, np.ndarray],
                     inits: Mapping[str, np.ndarray] | None = None, outputs: Sequence[str] = ("y",),
                     opset: int = 17, rtol: float = 1e-5, compiled: bool = True,
                     out_dtypes: Mapping[str, str] | None = None) -> Graph:
    """Import the model of ``nodes`` and check reference, compiled network, export and PyTorch
    peer against onnxruntime (relative to each output's largest magnitude); returns the graph."""
    model = model_of(nodes, inputs, inits, outputs, opset, out_dtypes)
    want = _ort(model, inputs)
    graph = from_onnx(model)
    feeds = {name: inputs[name] for name in graph.inputs}
    got = run(graph, feeds)
    for name, w in zip(outputs, want):
        _close(got[name], w, rtol, f"reference, output {name}")
    if compiled:
        out = ansor.compile_network(graph, verbose=False).run(feeds)
        for name, w in zip(outputs, want):
            _close(out[name], w, rtol, f"compiled network, output {name}")
    exported = _ort(to_onnx(graph), {f"input_{i}": feeds[n] for i, n in enumerate(graph.inputs)})
    for name, e, w in zip(outputs, exported, want):
        _close(e, w, rtol, f"exported model in onnxruntime, output {name}")
    with torch.inference_mode():
        peer = to_torch(graph)(*[torch.from_numpy(np.require(feeds[n], requirements="C")) for n in graph.inputs])
    for name, p, w in zip(outputs, peer, want):
        _close(p.numpy(), w, rtol, f"PyTorch peer, output {name}")
    return graph
