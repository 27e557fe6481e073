"""Softmax (ansor/graph/ops/softmax.py) against onnxruntime in all its parts: every axis at opset
13 and the flatten-at-axis form before it, and on the channels of an NHWC image."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax(axis, opset):
    check_everywhere([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], {"x": rand(2, 3, 5, low=-5, high=5)},
                     opset=opset)


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_of_image_channels(opset):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Softmax", ["c"], ["y"], axis=1)]
    check_everywhere(nodes, {"x": rand(2, 3, 1, 1) if opset < 13 else rand(2, 3, 5, 4)}, {"w": rand(6, 3, 1, 1, seed=1)},
                     opset=opset, rtol=1e-4)
