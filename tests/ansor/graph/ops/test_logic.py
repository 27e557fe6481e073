"""Not, And, Or and Xor (ansor/graph/ops/logic.py) against onnxruntime on bool tensors computed at
run time (inputs and comparisons), broadcasting, and on an NHWC image's comparison."""
import numpy as np
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


def _bools(shape, seed):
    return np.random.default_rng(seed).random(shape) < 0.5


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic_broadcast(op):
    g = check_everywhere([helper.make_node(op, ["a", "b"], ["y"])], {"a": _bools((2, 5, 7), 1), "b": _bools((5, 1), 2)},
                         out_dtypes={"y": "bool"})
    assert g.op_counts() == {op.lower(): 1}


def test_not():
    g = check_everywhere([helper.make_node("Not", ["a"], ["y"])], {"a": _bools((3, 7), 3)}, out_dtypes={"y": "bool"})
    assert g.op_counts() == {"not": 1}


def test_logic_of_comparisons_after_convolution():
    # in band = (c > -0.2) and not (c >= 0.3), xor'd with a per-channel flag, on the NHWC image
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Greater", ["c", "lo"], ["g"]),
             helper.make_node("GreaterOrEqual", ["c", "hi"], ["h"]),
             helper.make_node("Not", ["h"], ["nh"]),
             helper.make_node("And", ["g", "nh"], ["band"]),
             helper.make_node("Xor", ["band", "flag"], ["z"]),
             helper.make_node("Or", ["z", "band"], ["y"])]
    inits = {"w": rand(5, 3, 1, 1, seed=1), "lo": np.array(-0.2, np.float32), "hi": np.array(0.3, np.float32),
             "flag": np.array([True, False, True, True, False]).reshape(5, 1, 1)}
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5)}, inits, out_dtypes={"y": "bool"})
    assert g.op_counts().get("transpose") == 2  # in at the input, out at the output


def test_logic_of_constants_is_folded():
    nodes = [helper.make_node("And", ["a", "b"], ["ab"]), helper.make_node("Xor", ["ab", "b"], ["x1"]),
             helper.make_node("Or", ["x1", "a"], ["o"]), helper.make_node("Not", ["o"], ["m"]),
             helper.make_node("Where", ["m", "x", "zero"], ["y"])]
    inits = {"a": np.array([True, False, False, True, False]), "b": np.array([True, True, False, False, True]),
             "zero": np.zeros(1, np.float32)}
    g = check_everywhere(nodes, {"x": rand(3, 5)}, inits)
    assert set(g.op_counts()) == {"where"}
