"""Reshape, Flatten, Squeeze and Unsqueeze (ansor/graph/ops/reshape.py) against onnxruntime in all
their parts, with the importer's NHWC tricks: a flattened feature map, a 1x1 map reshaped
without a transpose, and a channel shuffle as one transpose of NHWC data."""
import numpy as np
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


def _i64(*v):
    return np.array(v, np.int64)


@pytest.mark.parametrize("shape", [(5, -1), (0, 0, -1), (3, 2, 5, 7)])
def test_reshape_of_a_graph_input(shape):
    check_everywhere([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": rand(3, 2, 35)}, {"s": _i64(*shape)})


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten(axis):
    check_everywhere([helper.make_node("Flatten", ["x"], ["y"], axis=axis)], {"x": rand(2, 3, 5)})


def test_squeeze_and_unsqueeze_both_forms():
    check_everywhere([helper.make_node("Unsqueeze", ["x", "a"], ["u"]), helper.make_node("Squeeze", ["u", "b"], ["y"])],
                     {"x": rand(3, 1, 5)}, {"a": _i64(0, -1), "b": _i64(2, 0)}, opset=13)
    check_everywhere([helper.make_node("Unsqueeze", ["x"], ["u"], axes=[1]), helper.make_node("Squeeze", ["u"], ["y"])],
                     {"x": rand(3, 5)}, opset=11)


@pytest.mark.parametrize("spatial", [(5, 3), (1, 1)])
def test_flatten_of_a_feature_map(spatial):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Flatten", ["c"], ["f"]),
             helper.make_node("Relu", ["f"], ["y"])]
    check_everywhere(nodes, {"x": rand(2, 3, *spatial)}, {"w": rand(4, 3, 1, 1, seed=1)}, rtol=1e-4)


def test_channel_shuffle_is_one_transpose_of_nhwc_data():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Reshape", ["c", "s1"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t", "s2"], ["u"]),
             helper.make_node("Conv", ["u", "w2"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(2, 3, 5, 7)},
                         {"w": rand(6, 3, 1, 1, seed=1), "w2": rand(4, 6, 1, 1, seed=2),
                          "s1": _i64(2, 2, 3, 5, 7), "s2": _i64(2, 6, 5, 7)}, rtol=1e-4)
    assert g.op_counts().get("transpose") == 3  # the NCHW boundary twice, the shuffle once
