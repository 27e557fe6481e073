"""The pools (ansor/graph/ops/pool.py) against onnxruntime in all their parts: kernels, strides,
asymmetric and auto_pad padding, ceil mode, count_include_pad, and global average pooling."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere

_CASES = [
    {"kernel_shape": [3, 3], "strides": [2, 2]},
    {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [2, 0, 0, 2]},   # padding wider than PyTorch allows
]


@pytest.mark.parametrize("attrs", _CASES)
@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_pool(op_type, attrs):
    check_everywhere([helper.make_node(op_type, ["x"], ["y"], **attrs)], {"x": rand(2, 3, 9, 7)})


@pytest.mark.parametrize("attrs", _CASES[1:3] + _CASES[5:])
def test_average_pool_counting_the_padding(attrs):
    check_everywhere([helper.make_node("AveragePool", ["x"], ["y"], count_include_pad=1, **attrs)],
                     {"x": rand(2, 3, 9, 7)})


def test_global_average_pool():
    g = check_everywhere([helper.make_node("GlobalAveragePool", ["x"], ["y"])], {"x": rand(2, 5, 9, 7)})
    assert g.op_counts()["global_avg_pool"] == 1
