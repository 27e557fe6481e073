"""Clip (ansor/graph/ops/clip.py) against onnxruntime in all its parts: bounds as inputs (each
optional) and as the attributes of opset < 11."""
import numpy as np
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("bounds", [(-0.5, 0.75), (None, 0.5), (0.0, None), (None, None)])
def test_clip(bounds):
    names, inits = ["x"], {}
    for name, v in zip(("lo", "hi"), bounds):
        names.append(name if v is not None else "")
        if v is not None:
            inits[name] = np.array(v, np.float32)
    while names[-1] == "":
        names.pop()
    check_everywhere([helper.make_node("Clip", names, ["y"])], {"x": rand(3, 5, 7, low=-2, high=2)}, inits)


def test_clip_attributes_before_opset_11():
    check_everywhere([helper.make_node("Clip", ["x"], ["y"], min=0.0, max=6.0)], {"x": rand(3, 5, low=-9, high=9)},
                     opset=6)
