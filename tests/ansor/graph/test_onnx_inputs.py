"""``from_onnx(model, shape=..., batch=...)``: the Python API's side of sizing dynamic inputs
(the command line's is tests/ansor/test_network_shapes.py)."""
from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from ansor.frontend import from_onnx  # noqa: E402
from ansor.frontend.onnx import OnnxImportError, ShapeArgumentError  # noqa: E402


def _model(inputs: dict[str, list]) -> onnx.ModelProto:
    """One Relu per input, each its own output."""
    vis = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n, dims in inputs.items()]
    outs = [helper.make_tensor_value_info(f"{n}_out", TensorProto.FLOAT, None) for n in inputs]
    nodes = [helper.make_node("Relu", [n], [f"{n}_out"]) for n in inputs]
    return helper.make_model(helper.make_graph(nodes, "m", vis, outs), opset_imports=[helper.make_opsetid("", 17)])


def test_batch_fills_every_dynamic_first_dimension():
    g = from_onnx(_model({"a": ["n", 3], "b": ["batch", 2, 2], "c": [4, 5]}), batch=6)
    assert {n: t.shape for n, t in g.inputs.items()} == {"a": (6, 3), "b": (6, 2, 2), "c": (4, 5)}


def test_shape_wins_over_batch():
    g = from_onnx(_model({"a": ["n", 3], "b": ["n", 2]}), shape={"a": (2, 3)}, batch=5)
    assert g.inputs["a"].shape == (2, 3) and g.inputs["b"].shape == (5, 2)


def test_the_error_names_the_dimensions_and_the_arguments():
    with pytest.raises(ShapeArgumentError) as e:
        from_onnx(_model({"ids": ["batch", "seq"]}), batch=1)
    msg = str(e.value)
    assert msg == ("<ModelProto>: input 'ids' has a dynamic dimension 1 ('seq') (declared ['batch', 'seq']); "
                   "give it with shape={'ids': (1, 1)}")  # batch= alone cannot size 'seq'
    assert e.value.cli_message.endswith("give it with --shape ids=1x1")
    with pytest.raises(ShapeArgumentError, match=r"dynamic dimensions 0 \('batch'\), 1 \('seq'\).*"
                                                 r"shape=\{'ids': \(1, 1\)\}$"):
        from_onnx(_model({"ids": ["batch", "seq"]}))
    assert isinstance(e.value, OnnxImportError)  # callers catching the import's errors still do


@pytest.mark.parametrize("batch", [0, -1, 1.5, True, "2"])
def test_bad_batch(batch):
    with pytest.raises(ShapeArgumentError, match="batch= must be a positive integer"):
        from_onnx(_model({"a": ["n", 3]}), batch=batch)


def test_batch_against_a_fixed_batch():
    with pytest.raises(ShapeArgumentError, match=r"batch=2: no input has a dynamic first dimension, and "
                                                 r"input a's is 1: the model's batch is fixed"):
        from_onnx(_model({"a": [1, 3]}), batch=2)
    assert from_onnx(_model({"a": [1, 3]}), batch=1).inputs["a"].shape == (1, 3)


def test_a_zero_size_dimension_is_named_as_such_not_as_dynamic():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 0])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"input x declares a zero-size dimension 1 \(\[3, 0\]\); "
                                              r"empty tensors are not supported"):
        from_onnx(model)
