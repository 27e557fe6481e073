"""ReduceMean (ansor/graph/ops/reduce_mean.py) against onnxruntime in all its parts: axes as an
attribute and as an input, keepdims, and the no-op of empty axes."""
import numpy as np
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, -1], 0), (None, 1), (None, 0)])
@pytest.mark.parametrize("opset", [17, 18])
def test_reduce_mean(axes, keepdims, opset):
    names, inits, attrs = ["x"], {}, {"keepdims": keepdims}
    if axes is not None and opset >= 18:
        names.append("a")
        inits["a"] = np.array(axes, np.int64)
    elif axes is not None:
        attrs["axes"] = axes
    check_everywhere([helper.make_node("ReduceMean", names, ["y"], **attrs)], {"x": rand(2, 3, 5)}, inits, opset=opset)


def test_reduce_mean_of_no_axes_with_noop_passes_the_value():
    g = check_everywhere([helper.make_node("ReduceMean", ["x"], ["y"], noop_with_empty_axes=1)], {"x": rand(2, 3)},
                         opset=18)
    assert "reduce_mean" not in g.op_counts()
