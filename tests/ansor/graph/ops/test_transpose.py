"""Transpose (ansor/graph/ops/transpose.py) against onnxruntime in all its parts: of a graph input
and of an NHWC image (composed with the NHWC -> NCHW permutation)."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("perm", [None, [0, 2, 3, 1], [1, 0, 3, 2]])
def test_transpose_of_an_image_and_of_a_graph_input(perm):
    attrs = {} if perm is None else {"perm": perm}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Transpose", ["c"], ["y"], **attrs)]
    check_everywhere(nodes, {"x": rand(2, 3, 5, 7)}, {"w": rand(4, 3, 1, 1, seed=1)}, rtol=1e-4)
    check_everywhere([helper.make_node("Transpose", ["x"], ["y"], **attrs)], {"x": rand(2, 3, 5, 7)})
