"""ArgMax and ArgMin (ansor/graph/ops/argmax.py) against onnxruntime: each axis, keepdims, ties
broken first or last (select_last_index), integer inputs, and after a Conv where it stays NHWC."""
import numpy as np
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere

INT64 = {"y": "int64"}


def _ties(shape):
    """Few distinct values, so every row has ties."""
    return np.random.default_rng(3).integers(0, 3, shape).astype(np.float32)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_axes_keepdims_and_ties(op, last):
    x = _ties((2, 3, 7, 5))
    for axis, keep in ((1, 1), (-1, 0), (2, 1), (0, 0)):
        g = check_everywhere([helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keep, select_last_index=last)],
                             {"x": x}, out_dtypes=INT64)
        assert g.op_counts() == {op.lower(): 1}
    check_everywhere([helper.make_node(op, ["x"], ["y"], select_last_index=last)], {"x": rand(2, 3, 7, 5)},
                     out_dtypes=INT64)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_integer_input(op):
    x = np.random.default_rng(1).integers(-2, 3, (3, 7)).astype(np.int64)
    check_everywhere([helper.make_node(op, ["x"], ["y"], axis=1, select_last_index=1)], {"x": x}, out_dtypes=INT64)
    check_everywhere([helper.make_node(op, ["x"], ["y"], axis=0, keepdims=0)], {"x": x.astype(np.int32)},
                     out_dtypes=INT64)


def test_after_a_conv_stays_nhwc():
    # a segmentation head: the class of each pixel
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("ArgMax", ["c"], ["y"], axis=1)]
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5)}, {"w": rand(4, 3, 3, 3, seed=1)}, rtol=1e-4, out_dtypes=INT64)
    assert g.op_counts().get("transpose") == 2  # only at the graph's NCHW boundary
