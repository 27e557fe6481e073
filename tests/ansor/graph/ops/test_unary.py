"""The elementwise math ops (ansor/graph/ops/unary.py) against onnxruntime in all their parts, on
odd shapes, integer Relu and Neg, and between convolutions where they keep the NHWC layout."""
import numpy as np
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Sqrt": "sqrt", "Erf": "erf",
          "Neg": "neg"}


@pytest.mark.parametrize("op_type", sorted(_UNARY))
def test_unary(op_type):
    low = 0.0 if op_type == "Sqrt" else -3.0
    g = check_everywhere([helper.make_node(op_type, ["x"], ["y"])], {"x": rand(2, 5, 7, low=low, high=3)})
    assert g.op_counts() == {_UNARY[op_type]: 1}


def test_integer_relu_and_neg():
    x = np.arange(-7, 8, dtype=np.int32).reshape(3, 5)
    check_everywhere([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])], {"x": x},
                     out_dtypes={"y": "int32"}, opset=14)


@pytest.mark.parametrize("op_type", ["Relu", "Sigmoid", "Tanh", "Erf"])
def test_unary_between_convolutions_stays_nhwc(op_type):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(op_type, ["c"], ["a"]),
             helper.make_node("Conv", ["a", "w2"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(1, 3, 9, 7)}, {"w": rand(5, 3, 3, 3, seed=1), "w2": rand(4, 5, 1, 1, seed=2)},
                         rtol=1e-4)
    assert g.op_counts().get("transpose") == 2
