"""Pad (ansor/graph/ops/pad.py) against onnxruntime in all its parts: constant, reflect and edge
modes on odd shapes, every axis (batch included), the opset-18 axes input, between convolutions,
and the one-line errors for what onnxruntime refuses too."""
import numpy as np
import pytest
from onnx import helper

from ansor.frontend.onnx import OnnxImportError, from_onnx

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


def _pad(mode, pads, x, opset=18, value=None, axes=None):
    names, inits = ["x", "p"], {"p": np.array(pads, np.int64)}
    if value is not None or axes is not None:
        names.append("v" if value is not None else "")
        if value is not None:
            inits["v"] = np.array(value, np.float32)
    if axes is not None:
        names.append("a")
        inits["a"] = np.array(axes, np.int64)
    return check_everywhere([helper.make_node("Pad", names, ["y"], mode=mode)], {"x": x}, inits, opset=opset)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_modes_on_every_axis_of_an_odd_shape(mode):
    g = _pad(mode, [1, 2, 0, 4, 1, 1, 2, 6], rand(2, 3, 5, 7, low=-3, high=3))
    assert g.op_counts() == {"pad": 1}


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_pad_modes_at_the_largest_reflect_and_with_axes(mode):
    _pad(mode, [0, 2, 6, 2, 0, 4], rand(3, 3, 7))         # reflect's limit: size - 1 per side
    _pad(mode, [2, 3, 1, 4], rand(2, 5, 3, 7), axes=[-1, 1])  # opset 18 axes, negative too


def test_pad_constant_value_and_old_opset():
    _pad("constant", [0, 1, 2, 3, 0, 1], rand(2, 3, 5), value=2.5)
    check_everywhere([helper.make_node("Pad", ["x"], ["y"], mode="edge", pads=[1, 0, 2, 3])],
                     {"x": rand(3, 5)}, opset=2)


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_pad_between_convolutions(mode):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Pad", ["c", "p"], ["r"], mode=mode),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    check_everywhere(nodes, {"x": rand(2, 3, 9, 7)},
                     {"w": rand(5, 3, 3, 3, seed=1), "w2": rand(4, 5, 3, 3, seed=2),
                      "p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)}, rtol=1e-4)


def test_reflect_past_the_edge_and_wrap_are_one_line_errors():
    too_far = model_of([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect", name="pd")],
                       {"x": rand(2, 3, 5)}, {"p": np.array([0, 0, 5, 0, 0, 0], np.int64)}, opset=18)
    with pytest.raises(OnnxImportError, match=r"node pd \(Pad\): .*reflect pads \(5, 0\) of axis 2 must be at "
                                              r"most 4 \(the axis has 5 element\(s\)\)"):
        from_onnx(too_far)
    wrap = model_of([helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap", name="pw")],
                    {"x": rand(2, 3, 5)}, {"p": np.array([0, 0, 1, 0, 0, 1], np.int64)}, opset=19)
    with pytest.raises(OnnxImportError, match=r"node pw \(Pad\): Pad mode 'wrap' is not supported"):
        from_onnx(wrap)
