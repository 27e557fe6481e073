"""Conv (ansor/graph/ops/conv2d.py) against onnxruntime in all its parts: strides, dilations,
asymmetric and auto_pad padding, groups and depthwise (multiplier 1 and 2), with a bias."""
import pytest
from onnx import helper

from ansor.frontend.onnx import OnnxImportError, from_onnx

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


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


@pytest.mark.parametrize("attrs", [{"pads": [1, 1]}, {"strides": [2], "pads": [1, 0], "dilations": [2]},
                                   {"group": 2}, {"auto_pad": "SAME_UPPER", "strides": [2]}])
def test_conv1d_as_a_height_one_conv2d(attrs):
    # Whisper's stem: 1-D Conv over [N, C, L], imported as the 2-D conv of an image of height 1
    g = check_everywhere([helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)], {"x": rand(2, 4, 11)},
                         {"w": rand(6, 4 // attrs.get("group", 1), 3, seed=1), "b": rand(6, seed=2)}, rtol=1e-4)
    assert g.op_counts()["conv2d"] == 1


def test_conv1d_with_2d_attributes_is_an_error_naming_the_node():
    model = model_of([helper.make_node("Conv", ["x", "w"], ["y"], strides=[1, 1])], {"x": rand(1, 2, 5)},
                     {"w": rand(3, 2, 3, seed=1)})
    with pytest.raises(OnnxImportError, match=r"node y \(Conv\): .*strides"):
        from_onnx(model)
