"""Slice (ansor/graph/ops/slice.py) of non-constant data against onnxruntime in all its parts:
negative and out-of-range bounds, steps, negative and omitted axes, the attribute form of opset
< 10, a slice of an NHWC image's channels after a conv, and negative steps refused in one line."""
import numpy as np
import pytest
from onnx import helper

from ansor.frontend.onnx import OnnxImportError, from_onnx

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


def _slice(x, starts, ends, axes=None, steps=None, opset=17):
    inits = {"s": np.array(starts, np.int64), "e": np.array(ends, np.int64)}
    names = ["x", "s", "e"]
    if axes is not None or steps is not None:
        names.append("a" if axes is not None else "")
        if axes is not None:
            inits["a"] = np.array(axes, np.int64)
    if steps is not None:
        names.append("t")
        inits["t"] = np.array(steps, np.int64)
    return check_everywhere([helper.make_node("Slice", names, ["y"])], {"x": x}, inits, opset=opset)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [4], None, None),                              # first axis only
    ([1, -4, 0], [3, -1, 100], [0, 1, 2], None),         # negative and clamped bounds
    ([0, 2], [5, 1000], [-1, 1], [2, 3]),                # negative axis, steps
    ([-100, 3], [100, 4], [2, 0], [4, 1]),               # out of range on both sides
])
def test_slice_of_a_graph_input(starts, ends, axes, steps):
    g = _slice(rand(5, 7, 9), starts, ends, axes, steps)
    assert g.op_counts() == {"slice": 1}


def test_slice_attributes_before_opset_10():
    check_everywhere([helper.make_node("Slice", ["x"], ["y"], starts=[1, -3], ends=[3, 100], axes=[0, 2])],
                     {"x": rand(5, 7, 9)}, opset=9)


def test_slice_of_an_nhwc_image_after_a_conv():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Slice", ["c", "s", "e", "a", "t"], ["y"])]
    check_everywhere(nodes, {"x": rand(2, 3, 9, 7)},
                     {"w": rand(7, 3, 3, 3, seed=1), "s": np.array([1, 0], np.int64), "e": np.array([6, 5], np.int64),
                      "a": np.array([1, -1], np.int64), "t": np.array([2, 2], np.int64)}, rtol=1e-4)


def test_negative_step_is_a_one_line_error():
    model = model_of([helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"], name="sl")], {"x": rand(5, 7)},
                     {"s": np.array([4], np.int64), "e": np.array([0], np.int64), "a": np.array([0], np.int64),
                      "t": np.array([-1], np.int64)})
    with pytest.raises(OnnxImportError, match=r"node sl \(Slice\): only positive slice steps are supported, got -1"):
        from_onnx(model)
