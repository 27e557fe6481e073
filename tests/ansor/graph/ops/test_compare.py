"""The comparisons (ansor/graph/ops/compare.py) against onnxruntime on tensors computed at run
time: float (with ties and NaN), int64 and bool operands, broadcasting, and after a convolution;
a comparison of constants (a causal mask from Range) is folded at import."""
import numpy as np
import pytest
from onnx import helper

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of

OPS = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]
GRAPH_OP = {"Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
            "GreaterOrEqual": "greater_equal"}


@pytest.mark.parametrize("op", OPS)
def test_compare_float_broadcast_with_ties_and_nan(op):
    a = np.round(rand(2, 5, 7, low=-3, high=3))  # small integers: many equal pairs
    a[0, 0, 0] = np.nan
    b = np.round(rand(5, 1, seed=1, low=-3, high=3))
    g = check_everywhere([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, out_dtypes={"y": "bool"})
    assert g.op_counts() == {GRAPH_OP[op]: 1}


@pytest.mark.parametrize("op", OPS)
def test_compare_int64(op):
    rng = np.random.default_rng(3)
    a, b = rng.integers(-4, 5, (3, 7)).astype(np.int64), rng.integers(-4, 5, (7,)).astype(np.int64)
    check_everywhere([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, out_dtypes={"y": "bool"})


def test_equal_bool():
    rng = np.random.default_rng(4)
    a, b = rng.random((2, 3, 5)) < 0.5, rng.random((3, 1)) < 0.5
    check_everywhere([helper.make_node("Equal", ["a", "b"], ["y"])], {"a": a, "b": b}, out_dtypes={"y": "bool"})


def test_compare_after_convolution():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Greater", ["c", "t"], ["y"])]
    check_everywhere(nodes, {"x": rand(2, 3, 9, 7)}, {"w": rand(5, 3, 3, 3, seed=1), "t": rand(5, 1, 1, seed=2)},
                     out_dtypes={"y": "bool"})


def test_causal_mask_from_range_is_folded():
    # scores [2, 5, 5]; mask[i, j] = j <= i from Range and Unsqueeze of constants: folded at import
    nodes = [helper.make_node("Range", ["zero", "n", "one"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "ax1"], ["rows"]),
             helper.make_node("Unsqueeze", ["r", "ax0"], ["cols"]),
             helper.make_node("LessOrEqual", ["cols", "rows"], ["mask"]),
             helper.make_node("Where", ["mask", "x", "neg"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    inits = {"zero": np.array(0, np.int64), "n": np.array(5, np.int64), "one": np.array(1, np.int64),
             "ax0": np.array([0], np.int64), "ax1": np.array([1], np.int64), "neg": np.array(-1e9, np.float32)}
    g = check_everywhere(nodes, {"x": rand(2, 5, 5, low=-4, high=4)}, inits)
    counts = g.op_counts()
    assert "less_equal" not in counts and counts.get("where") == 1


def test_legacy_broadcast_before_opset_7_is_refused():
    node = helper.make_node("Greater", ["a", "b"], ["y"], broadcast=1, axis=0)
    model = model_of([node], {"a": rand(5, 3), "b": rand(5, seed=1)}, opset=6, out_dtypes={"y": "bool"})
    with pytest.raises(OnnxImportError, match=r"\(Greater\): legacy broadcast"):
        from_onnx(model)
