"""The reductions of ansor/graph/ops/reduce.py against onnxruntime: every kind over one, several
or all axes, keepdims, axes as an input (opset 13 for ReduceSum, 18 for the rest) or attribute
(before), noop_with_empty_axes, integer inputs, and after a Conv where it stays NHWC."""
import numpy as np
import pytest
from onnx import helper

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of

OPS = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
       "ReduceLogSumExp"]


def _x(op):
    if op == "ReduceProd":  # a product of 70 values near 1 stays finite
        return rand(2, 3, 7, 5, low=0.7, high=1.4)
    return rand(2, 3, 7, 5, low=-3, high=3) * (30 if op == "ReduceLogSumExp" else 1)


def _check(op, axes, keepdims=1, opset=18, x=None, **attrs):
    x = _x(op) if x is None else x
    since = 13 if op == "ReduceSum" else 18
    inits = {}
    if opset >= since:
        ins = ["x", "axes"] if axes is not None else ["x"]
        if axes is not None:
            inits["axes"] = np.array(axes, np.int64)
    else:
        ins = ["x"]
        if axes is not None:
            attrs["axes"] = axes
    nodes = [helper.make_node(op, ins, ["y"], keepdims=keepdims, **attrs)]
    return check_everywhere(nodes, {"x": x}, inits, opset=opset, rtol=1e-5,
                            out_dtypes={"y": str(x.dtype)} if x.dtype != np.float32 else None)


@pytest.mark.parametrize("op", OPS)
def test_kinds_over_axes(op):
    g = _check(op, [1])
    assert g.op_counts() == {"reduce": 1}
    _check(op, [-1, 2], keepdims=0)
    _check(op, [0, 3], keepdims=1)
    _check(op, None, keepdims=0)  # all axes: a 0-d result


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceL2", "ReduceProd"])
def test_axes_as_attribute_before_the_input_opset(op):
    _check(op, [2, 1], keepdims=0, opset=12 if op == "ReduceSum" else 17)
    _check(op, None, opset=11)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMin"])
def test_noop_with_empty_axes(op):
    g = _check(op, None, noop_with_empty_axes=1)
    assert "reduce" not in g.op_counts()
    _check(op, [], noop_with_empty_axes=0)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
def test_integers(op):
    x = np.random.default_rng(5).integers(-3 if op != "ReduceProd" else 1, 4, (2, 3, 7, 5)).astype(np.int64)
    _check(op, [1, 3], x=x)
    _check(op, [2], keepdims=0, x=x.astype(np.int32))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceLogSumExp"])
def test_after_a_conv_stays_nhwc(op):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(op, ["c", "axes"], ["r"]),
             helper.make_node("Mul", ["c", "r"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5)}, {"w": rand(4, 3, 3, 3, seed=1), "axes": np.array([1], np.int64)},
                         opset=18, rtol=1e-4)
    assert g.op_counts().get("transpose") == 2  # only at the graph's NCHW boundary


def test_axes_must_be_constant():
    model = model_of([helper.make_node("ReduceMax", ["x", "a"], ["y"], name="rm")],
                     {"x": rand(2, 3, 5), "a": np.array([1], np.int64)}, opset=18)
    with pytest.raises(OnnxImportError, match=r"node rm \(ReduceMax\): axes \(input 1\) must be a constant"):
        from_onnx(model)
