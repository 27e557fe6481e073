"""Expand (ansor/graph/ops/expand.py) against onnxruntime: broadcasting to a larger rank, the
bidirectional case (a target dimension 1 keeps the input's), int64 data; and Range, which is
folded at import (a non-constant Range is an import error naming the node)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere


def test_expand_to_higher_rank():
    g = check_everywhere([helper.make_node("Expand", ["x", "s"], ["y"])], {"x": rand(3, 1)},
                         {"s": np.array([2, 3, 5], np.int64)})
    assert g.op_counts() == {"expand": 1}


def test_expand_bidirectional_keeps_larger_input_dims():
    # target [3, 1] against x [2, 1, 7]: output [2, 3, 7]
    g = check_everywhere([helper.make_node("Expand", ["x", "s"], ["y"])], {"x": rand(2, 1, 7)},
                         {"s": np.array([3, 1], np.int64)})
    assert g.nodes[-1].type.shape == (2, 3, 7)


def test_expand_attention_mask_int64():
    mask = np.array([[1, 1, 0, 1, 0]], dtype=np.int64).reshape(1, 1, 1, 5)
    check_everywhere([helper.make_node("Expand", ["m", "s"], ["y"])], {"m": mask},
                     {"s": np.array([2, 3, 5, 5], np.int64)}, out_dtypes={"y": "int64"})


@pytest.mark.parametrize("start, limit, delta, dtype", [(0, 7, 1, np.int64), (9, -4, -3, np.int64),
                                                          (0.5, 3.0, 0.7, np.float32)])
def test_constant_range_is_folded(start, limit, delta, dtype):
    n = len(np.arange(start, limit, delta))
    nodes = [helper.make_node("Range", ["a", "b", "c"], ["r"]), helper.make_node("Add", ["x", "r"], ["y"])]
    inits = {k: np.array(v, dtype) for k, v in (("a", start), ("b", limit), ("c", delta))}
    x = (np.arange(2 * n).reshape(2, n) - 3).astype(dtype)
    g = check_everywhere(nodes, {"x": x}, inits, out_dtypes={"y": np.dtype(dtype).name})
    assert g.op_counts() == {"add": 1}


def test_non_constant_range_names_the_node():
    nodes = [helper.make_node("Range", ["a", "b", "c"], ["y"], name="positions")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("b", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
                              [helper.make_tensor("a", TensorProto.INT64, [], [0]),
                               helper.make_tensor("c", TensorProto.INT64, [], [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"node positions \(Range\): supported only on constant inputs"):
        from_onnx(model)
