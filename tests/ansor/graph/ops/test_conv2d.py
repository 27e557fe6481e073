"""Conv (ansor/graph/ops/conv2d.py) against onnxruntime in all its parts: strides, dilations,
asymmetric and auto_pad padding, groups and depthwise (multiplier 1 and 2), with a bias."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("attrs, ci, co, group", [
    ({"strides": [2, 1], "pads": [1, 0, 2, 1]}, 3, 5, 1),
    ({"dilations": [2, 1], "pads": [2, 1, 2, 1]}, 4, 6, 2),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, 3, 4, 1),
    ({"auto_pad": "SAME_LOWER"}, 3, 4, 1),
    ({"pads": [1, 1, 1, 1]}, 6, 6, 6),       # depthwise
    ({"pads": [1, 1, 1, 1]}, 3, 6, 3),       # depthwise, multiplier 2
])
def test_conv(attrs, ci, co, group):
    g = check_everywhere([helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, **attrs)],
                         {"x": rand(2, ci, 9, 7)}, {"w": rand(co, ci // group, 3, 3, seed=1), "b": rand(co, seed=2)},
                         rtol=1e-4)
    assert g.op_counts()["conv2d"] == 1
