"""The broadcasting arithmetic (ansor/graph/ops/binary.py) against onnxruntime in all its parts:
each op with numpy broadcasting on odd shapes, Sum of three inputs, and bias/residual operands
next to NHWC images between convolutions (lower-rank constants lifted, no extra transposes)."""
import numpy as np
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere

_OPS = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Max": "maximum", "Min": "minimum"}


@pytest.mark.parametrize("op_type", sorted(_OPS))
def test_binary_broadcasting(op_type):
    a = rand(2, 1, 5, low=0.5, high=2.0)
    b = rand(3, 1, seed=1, low=0.5, high=2.0)
    g = check_everywhere([helper.make_node(op_type, ["a", "b"], ["y"])], {"a": a, "b": b})
    assert g.op_counts() == {_OPS[op_type]: 1}


def test_pow_of_two_and_a_constant_exponent():
    check_everywhere([helper.make_node("Pow", ["a", "e"], ["y"])], {"a": rand(3, 7)}, {"e": np.array(2.0, np.float32)})
    check_everywhere([helper.make_node("Pow", ["a", "e"], ["y"])], {"a": rand(3, 7, low=0.1, high=3)},
                     {"e": np.array([0.5, 1.5, 3.0, -1.0, 2.0, 0.0, 1.0], np.float32)})


def test_sum_of_three_inputs():
    g = check_everywhere([helper.make_node("Sum", ["a", "b", "c"], ["y"])],
                         {"a": rand(2, 3), "b": rand(3, seed=1), "c": rand(2, 1, seed=2)})
    assert g.op_counts() == {"add": 2}


def test_bias_scale_and_residual_next_to_images():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["c", "s"], ["m"]),           # [C, 1, 1] constant
             helper.make_node("Add", ["m", "x2"], ["r"]),          # residual: a graph input image
             helper.make_node("Sub", ["r", "k"], ["d"]),           # a scalar constant
             helper.make_node("Max", ["d", "c"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5), "x2": rand(2, 4, 7, 5, seed=3)},
                         {"w": rand(4, 3, 3, 3, seed=1), "s": rand(4, 1, 1, seed=2), "k": np.array(0.25, np.float32)},
                         rtol=1e-4)
    assert g.op_counts().get("transpose") == 3  # the two NCHW inputs and the output
