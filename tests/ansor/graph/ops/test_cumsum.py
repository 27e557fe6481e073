"""CumSum (ansor/graph/ops/cumsum.py) against onnxruntime: each of exclusive x reverse on an odd
float shape and a negative axis, int64 data (position ids from a mask), an axis of length 1."""
import numpy as np
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum_modes_float(exclusive, reverse):
    g = check_everywhere([helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=exclusive, reverse=reverse)],
                         {"x": rand(2, 7, 5)}, {"a": np.array(-2, np.int64)}, rtol=1e-5)
    assert g.op_counts() == {"cumsum": 1}


def test_cumsum_int64_position_ids_from_mask():
    # HF's position ids: cumsum(mask, axis=1) * mask - 1
    mask = np.array([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]], dtype=np.int64)
    nodes = [helper.make_node("CumSum", ["m", "a"], ["c"]), helper.make_node("Mul", ["c", "m"], ["p"]),
             helper.make_node("Sub", ["p", "one"], ["y"])]
    check_everywhere(nodes, {"m": mask}, {"a": np.array(1, np.int32), "one": np.array(1, np.int64)},
                     out_dtypes={"y": "int64"})


def test_cumsum_axis_of_length_one_exclusive_is_zero():
    check_everywhere([helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=1)], {"x": rand(3, 1)},
                     {"a": np.array([1], np.int64)})
