"""Gelu (ansor/graph/ops/gelu.py), ONNX opset 20, against onnxruntime in all its parts: both
``approximate`` forms and the default, on an odd shape and between convolutions (NHWC), and an
unknown form refused in one line."""
import pytest
from onnx import helper

from ansor.frontend.onnx import OnnxImportError, from_onnx

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
def test_gelu_opset_20(approximate):
    attrs = {} if approximate is None else {"approximate": approximate}
    g = check_everywhere([helper.make_node("Gelu", ["x"], ["y"], **attrs)], {"x": rand(2, 5, 7, low=-5, high=5)},
                         opset=20, rtol=1e-5)
    assert g.op_counts() == {"gelu": 1}
    assert g.nodes[0].attrs == {"approximate": approximate or "none"}


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_between_convolutions(approximate):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Gelu", ["c"], ["g"], approximate=approximate),
             helper.make_node("Conv", ["g", "w2"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(2, 3, 9, 7)}, {"w": rand(5, 3, 3, 3, seed=1), "w2": rand(4, 5, 1, 1, seed=2)},
                         opset=20, rtol=1e-4)
    assert g.op_counts().get("transpose") == 2  # only at the graph's NCHW boundary


def test_unknown_approximation_is_a_one_line_error():
    model = model_of([helper.make_node("Gelu", ["x"], ["y"], approximate="fast", name="ge")], {"x": rand(3, 4)},
                     opset=20)
    with pytest.raises(OnnxImportError, match=r"node ge \(Gelu\): .*approximate must be 'none' or 'tanh', got 'fast'"):
        from_onnx(model)
