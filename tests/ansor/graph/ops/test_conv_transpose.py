"""ConvTranspose (ansor/graph/ops/conv_transpose.py) against onnxruntime: U-Net's upsampling
(stride 2, kernel 2 or 3, output_padding), groups, dilation, asymmetric and large padding,
output_shape and auto_pad, a weight that is not a constant, and after a Conv where it runs on
NHWC images."""
import pytest
from onnx import helper

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


def _ct(**attrs):
    return [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)]


def test_unet_stride2_kernel2_with_bias():
    g = check_everywhere(_ct(strides=[2, 2]), {"x": rand(2, 3, 7, 5)},
                         {"w": rand(3, 4, 2, 2, seed=1), "b": rand(4, seed=2)}, rtol=1e-4)
    assert g.op_counts()["conv_transpose2d"] == 1


def test_stride2_kernel3_pads1_output_padding1():
    check_everywhere(_ct(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]), {"x": rand(2, 3, 7, 5)},
                     {"w": rand(3, 5, 3, 3, seed=1), "b": rand(5, seed=2)}, rtol=1e-4)


def test_groups_and_uneven_strides():
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=3, strides=[2, 1], pads=[1, 0, 0, 1])]
    check_everywhere(nodes, {"x": rand(2, 6, 7, 5)}, {"w": rand(6, 2, 3, 2, seed=1)}, rtol=1e-4)


def test_dilation_asymmetric_pads_output_padding():
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], dilations=[2, 2],
                              pads=[2, 0, 1, 3], output_padding=[2, 1])]
    check_everywhere(nodes, {"x": rand(2, 3, 7, 5)}, {"w": rand(3, 4, 3, 3, seed=1)}, rtol=1e-4)


def test_padding_beyond_the_kernel_reach():
    # pads > dilation*(kernel-1): the spread input is cropped, not padded
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[3, 2, 4, 3])]
    check_everywhere(nodes, {"x": rand(1, 3, 7, 5)}, {"w": rand(3, 2, 2, 3, seed=1)}, rtol=1e-4)


@pytest.mark.parametrize("attrs", [dict(output_shape=[15, 10], strides=[2, 2]),
                                   dict(output_shape=[14, 11], strides=[2, 2], output_padding=[1, 1]),
                                   dict(auto_pad="SAME_UPPER", strides=[2, 2]),
                                   dict(auto_pad="SAME_LOWER", strides=[2, 2]),
                                   dict(auto_pad="VALID", strides=[2, 3])])
def test_output_shape_and_auto_pad(attrs):
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)]
    check_everywhere(nodes, {"x": rand(1, 3, 7, 5)}, {"w": rand(3, 2, 3, 3, seed=1)}, rtol=1e-4)


def test_weight_not_a_constant():
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], group=1)]
    check_everywhere(nodes, {"x": rand(2, 3, 5, 7), "w": rand(3, 2, 3, 3, seed=1)}, rtol=1e-4)
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], group=3)]
    check_everywhere(nodes, {"x": rand(2, 3, 5, 7), "w": rand(3, 2, 3, 3, seed=1)}, rtol=1e-4)


def test_after_a_conv_stays_nhwc():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("ConvTranspose", ["r", "wt", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                              output_padding=[1, 1])]
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5)},
                         {"w": rand(5, 3, 3, 3, seed=1), "wt": rand(5, 3, 3, 3, seed=2), "b": rand(3, seed=3)},
                         rtol=1e-4)
    assert g.op_counts().get("transpose") == 2  # only at the graph's NCHW boundary


def test_bad_input_names_the_node():
    model = model_of([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up")],
                     {"x": rand(2, 3, 7)}, {"w": rand(3, 2, 3)})
    with pytest.raises(OnnxImportError, match=r"node up \(ConvTranspose\): only 2-D"):
        from_onnx(model)
