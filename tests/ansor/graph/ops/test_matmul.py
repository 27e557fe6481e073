"""MatMul (ansor/graph/ops/matmul.py) against onnxruntime in all its parts: batched with
broadcasting, and with a constant 2-D right side (a dense over the flattened leading axes)."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("a_shape, b_shape", [((2, 3, 5, 7), (2, 1, 7, 4)), ((5, 7), (3, 7, 4)), ((3, 1, 5, 7), (2, 7, 4))])
def test_batched_matmul_of_variables(a_shape, b_shape):
    g = check_everywhere([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": rand(*a_shape), "b": rand(*b_shape, seed=1)})
    assert g.op_counts() == {"matmul": 1}


def test_matmul_with_a_constant_right_side_is_a_dense():
    g = check_everywhere([helper.make_node("MatMul", ["a", "w"], ["y"])], {"a": rand(2, 3, 5, 7)},
                         {"w": rand(7, 4, seed=1)})
    assert g.op_counts()["dense"] == 1
    assert g.type_of(g.outputs[0]).shape == (2, 3, 5, 4)
