"""Cast (ansor/graph/ops/cast.py) against onnxruntime in all its parts: float to integer and back."""
from onnx import TensorProto, helper

from ..onnx_util import rand
from ..op_check import check_everywhere


def test_cast_float_to_int_and_back():
    nodes = [helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT32),
             helper.make_node("Cast", ["i"], ["y"], to=TensorProto.FLOAT)]
    check_everywhere(nodes, {"x": rand(3, 5, low=-9, high=9)})
    check_everywhere([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64)], {"x": rand(3, 5, low=-9, high=9)},
                     out_dtypes={"y": "int64"})
