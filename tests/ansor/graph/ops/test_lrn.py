"""LRN (ansor/graph/ops/lrn.py) against onnxruntime in all its parts, on NHWC images."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("size", [1, 3, 5])  # onnxruntime refuses even sizes
def test_lrn(size):
    check_everywhere([helper.make_node("LRN", ["x"], ["y"], size=size, alpha=1e-2, beta=0.6, bias=1.5)],
                     {"x": rand(2, 7, 5, 3, low=-3, high=3)}, rtol=1e-4)
