"""Resize and Upsample (ansor/graph/ops/resize.py) against onnxruntime: every nearest_mode and
coordinate_transformation_mode, nearest and bilinear, up and down, scales or sizes (and opset
18's axes), opset 10 and Upsample's truncating nearest, on plain NCHW input and after a Conv
where it runs on NHWC images; non-constant scales and unsupported modes are import errors."""
import numpy as np
import pytest
from onnx import helper

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of

X = rand(2, 3, 7, 5)


def _resize(scales=None, sizes=None, opset=13, **attrs):
    inits = {"roi": np.zeros(0, np.float32), "scales": np.asarray(scales if scales is not None else [], np.float32)}
    ins = ["x", "roi", "scales"]
    if sizes is not None:
        inits["sizes"] = np.asarray(sizes, np.int64)
        ins.append("sizes")
    return check_everywhere([helper.make_node("Resize", ins, ["y"], **attrs)], {"x": X}, inits, opset=opset, rtol=1e-5)


@pytest.mark.parametrize("nearest", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"])
def test_nearest_modes(nearest, coord):
    # scales 2 and 1.5 up, then 0.6 and 0.5 down: ties at .5 fall on some rows
    _resize([1, 1, 2.0, 1.5], mode="nearest", nearest_mode=nearest, coordinate_transformation_mode=coord)
    _resize([1, 1, 0.6, 0.5], mode="nearest", nearest_mode=nearest, coordinate_transformation_mode=coord)


@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"])
def test_bilinear(coord):
    g = _resize([1, 1, 2.0, 1.7], mode="linear", coordinate_transformation_mode=coord)
    assert g.op_counts()["resize2d"] == 1
    _resize([1, 1, 0.45, 0.8], mode="linear", coordinate_transformation_mode=coord)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_sizes(mode):
    _resize(sizes=[2, 3, 11, 13], mode=mode)
    _resize(sizes=[2, 3, 1, 4], mode=mode, coordinate_transformation_mode="pytorch_half_pixel")
    _resize(sizes=[2, 3, 3, 1], mode=mode, coordinate_transformation_mode="align_corners")


def test_opset18_axes_and_half_pixel_symmetric():
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], axes=[2, 3], mode="linear",
                              coordinate_transformation_mode="half_pixel_symmetric")]
    check_everywhere(nodes, {"x": X}, {"sizes": np.array([9, 4], np.int64)}, opset=19)
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], axes=[3, 2], mode="nearest")]
    check_everywhere(nodes, {"x": X}, {"scales": np.array([2.5, 1.5], np.float32)}, opset=18)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_opset10_resize(mode):
    for scales in ([1, 1, 2.0, 3.0], [1, 1, 0.5, 0.7]):
        nodes = [helper.make_node("Resize", ["x", "scales"], ["y"], mode=mode)]
        check_everywhere(nodes, {"x": X}, {"scales": np.array(scales, np.float32)}, opset=10)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample(mode):
    nodes = [helper.make_node("Upsample", ["x", "scales"], ["y"], mode=mode)]
    check_everywhere(nodes, {"x": X}, {"scales": np.array([1, 1, 2.0, 1.5], np.float32)}, opset=9)
    nodes = [helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=[1.0, 1.0, 2.0, 3.0])]
    check_everywhere(nodes, {"x": X}, opset=7)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_after_a_conv_stays_nhwc(mode):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c", "", "scales"], ["r"], mode=mode),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    g = check_everywhere(nodes, {"x": X}, {"w": rand(5, 3, 3, 3, seed=1), "w2": rand(4, 5, 1, 1, seed=2),
                                            "scales": np.array([1, 1, 2.0, 2.0], np.float32)}, rtol=1e-4)
    assert g.op_counts().get("transpose") == 2  # only at the graph's NCHW boundary


def _import_error(nodes, inits, match, inputs=None, opset=13):
    with pytest.raises(OnnxImportError, match=match):
        from_onnx(model_of(nodes, inputs or {"x": X}, inits, opset=opset))


def test_errors_name_the_node():
    _import_error([helper.make_node("Resize", ["x", "", "s"], ["y"], name="up")], {},
                  r"node up \(Resize\): scales \(input 2\) must be a constant",
                  inputs={"x": X, "s": np.array([1, 1, 2, 2], np.float32)})
    _import_error([helper.make_node("Resize", ["x", "roi", "s"], ["y"], name="up",
                                    coordinate_transformation_mode="tf_crop_and_resize")],
                  {"roi": np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32), "s": np.array([1, 1, 2, 2], np.float32)},
                  r"node up \(Resize\): coordinate_transformation_mode 'tf_crop_and_resize' is not supported")
    _import_error([helper.make_node("Resize", ["x", "", "s"], ["y"], name="up", mode="cubic")],
                  {"s": np.array([1, 1, 2, 2], np.float32)}, r"node up \(Resize\): mode 'cubic'")
    _import_error([helper.make_node("Resize", ["x", "", "s"], ["y"], name="up")],
                  {"s": np.array([1, 2, 2, 2], np.float32)}, r"node up \(Resize\): only the spatial axes")
