"""Each ONNX operator the importer supports, on a small graph, against onnx's ReferenceEvaluator
(our import + numpy interpreter must agree), including the opset- and flag-dependent semantics."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .onnx_util import check, rand

mk = helper.make_node


# ---- convolution --------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs, cin, cout, groups", [
    ({"pads": [1, 1, 1, 1]}, 3, 4, 1),
    ({"strides": [2, 2], "pads": [0, 1, 2, 1]}, 3, 5, 1),
    ({"dilations": [2, 2], "pads": [2, 2, 2, 2]}, 2, 3, 1),
    ({"dilations": [1, 2], "strides": [2, 1]}, 2, 3, 1),
    ({"group": 2, "pads": [1, 1, 1, 1]}, 4, 6, 2),
    ({"group": 4, "pads": [1, 1, 1, 1], "strides": [2, 2]}, 4, 4, 4),     # depthwise
    ({"group": 3, "pads": [1, 1, 1, 1]}, 3, 6, 3),                       # depthwise, multiplier 2
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, 3, 4, 1),
    ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, 3, 4, 1),
    ({"auto_pad": "VALID"}, 3, 4, 1),
])
def test_conv(attrs, cin, cout, groups):
    x, w, b = rand(1, cin, 9, 8), rand(cout, cin // groups, 3, 3, seed=1), rand(cout, seed=2)
    g = check([mk("Conv", ["x", "w", "b"], ["y"], **attrs)], {"x": x}, {"w": w, "b": b})
    assert g.op_counts().get("conv2d") == 1


def test_conv_without_bias_batch_two():
    check([mk("Conv", ["x", "w"], ["y"], kernel_shape=[1, 3], pads=[0, 1, 0, 1])],
          {"x": rand(2, 3, 5, 6)}, {"w": rand(4, 3, 1, 3, seed=3)})


def test_batch_norm_folds_into_conv():
    c = 4
    inits = {"w": rand(c, 3, 3, 3, seed=1), "b": rand(c, seed=2), "s": rand(c, seed=3, low=0.5, high=2),
             "bb": rand(c, seed=4), "m": rand(c, seed=5), "v": rand(c, seed=6, low=0.1, high=2)}
    for bias in (True, False):
        nodes = [mk("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                 mk("BatchNormalization", ["c", "s", "bb", "m", "v"], ["y"], epsilon=1e-3)]
        g = check(nodes, {"x": rand(1, 3, 6, 6)}, inits)
        assert "batch_norm" not in g.op_counts(), g  # folded into the conv's weights and bias
        assert g.op_counts() == {"transpose": 2, "conv2d": 1, "add": 1}


def test_batch_norm_not_folded_when_conv_output_is_shared():
    c = 3
    inits = {"w": rand(c, 2, 1, 1, seed=1), "s": rand(c, seed=3), "bb": rand(c, seed=4),
             "m": rand(c, seed=5), "v": rand(c, seed=6, low=0.1, high=2)}
    nodes = [mk("Conv", ["x", "w"], ["c"]), mk("BatchNormalization", ["c", "s", "bb", "m", "v"], ["bn"]),
             mk("Add", ["bn", "c"], ["y"])]
    g = check(nodes, {"x": rand(1, 2, 4, 4)}, inits)
    assert g.op_counts()["batch_norm"] == 1


def test_batch_norm_standalone_2d_and_4d():
    p = {"s": rand(3, seed=3), "bb": rand(3, seed=4), "m": rand(3, seed=5), "v": rand(3, seed=6, low=0.1, high=2)}
    check([mk("BatchNormalization", ["x", "s", "bb", "m", "v"], ["y"])], {"x": rand(2, 3)}, p)
    check([mk("BatchNormalization", ["x", "s", "bb", "m", "v"], ["y"])], {"x": rand(2, 3, 4, 5)}, p)


# ---- dense / matmul ---------------------------------------------------------------------------------

@pytest.mark.parametrize("alpha, beta, ta, tb", [(1.0, 1.0, 0, 0), (0.5, 2.0, 0, 1), (1.5, 0.0, 1, 0),
                                                 (2.0, -1.0, 1, 1)])
@pytest.mark.parametrize("const_b", [True, False])
def test_gemm(alpha, beta, ta, tb, const_b):
    a = rand(5, 3) if ta else rand(3, 5)
    b = rand(4, 5, seed=1) if tb else rand(5, 4, seed=1)
    inputs, inits = {"a": a}, {"c": rand(4, seed=2)}
    (inits if const_b else inputs)["b"] = b
    check([mk("Gemm", ["a", "b", "c"], ["y"], alpha=alpha, beta=beta, transA=ta, transB=tb)], inputs, inits)


def test_gemm_without_c():
    check([mk("Gemm", ["a", "b"], ["y"], transB=1)], {"a": rand(2, 6)}, {"b": rand(3, 6, seed=1)})


@pytest.mark.parametrize("a_shape, b_shape, const_b", [
    ((4, 6), (6, 5), True), ((2, 3, 6), (6, 5), True), ((2, 3, 4, 6), (6, 5), True),
    ((2, 3, 4, 6), (2, 3, 6, 5), False), ((2, 1, 3, 4), (5, 4, 6), False), ((3, 4), (2, 4, 5), False),
])
def test_matmul(a_shape, b_shape, const_b):
    inputs, inits = {"a": rand(*a_shape)}, {}
    (inits if const_b else inputs)["b"] = rand(*b_shape, seed=1)
    g = check([mk("MatMul", ["a", "b"], ["y"])], inputs, inits)
    assert ("dense" in g.op_counts()) == const_b


# ---- softmax: opset-dependent semantics --------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
def test_softmax(opset, axis):
    kw = {} if axis is None else {"axis": axis}
    check([mk("Softmax", ["x"], ["y"], **kw)], {"x": rand(2, 3, 4) * 3}, opset=opset,
          oracle="ort" if opset < 13 else "reference")


def test_softmax_opsets_differ_where_they_should():
    """Opset 11, axis=1 on [2,3,4] normalises over 12 values per batch; opset 13 over 3."""
    from ansor.frontend import from_onnx
    from ansor.graph import run

    from .onnx_util import make_model
    x = {"x": rand(2, 3, 4)}
    y11 = run(from_onnx(make_model([mk("Softmax", ["x"], ["y"], axis=1)], x, opset=11)), x)["y"]
    y13 = run(from_onnx(make_model([mk("Softmax", ["x"], ["y"], axis=1)], x, opset=13)), x)["y"]
    np.testing.assert_allclose(y11.sum(axis=(1, 2)), 1.0, rtol=1e-5)
    np.testing.assert_allclose(y13.sum(axis=1), 1.0, rtol=1e-5)


def test_softmax_after_conv_stays_nhwc():
    g = check([mk("Conv", ["x", "w"], ["c"]), mk("Softmax", ["c"], ["y"], axis=1)],
              {"x": rand(1, 3, 4, 4)}, {"w": rand(5, 3, 1, 1, seed=1)}, opset=13)
    assert g.op_counts()["transpose"] == 2


# ---- elementwise ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_binary_broadcast(op):
    check([mk(op, ["a", "b"], ["y"])], {"a": rand(2, 3, 4), "b": rand(3, 1, seed=1, low=0.5, high=2)})


def test_pow_and_sum():
    check([mk("Pow", ["a", "p"], ["y"])], {"a": rand(3, 4, low=0.1, high=2)}, {"p": np.array(2.0, np.float32)})
    check([mk("Pow", ["a", "p"], ["y"])], {"a": rand(3, 4, low=0.1, high=2)}, {"p": np.array(0.5, np.float32)})
    check([mk("Sum", ["a", "b", "c"], ["y"])], {"a": rand(3, 4), "b": rand(4, seed=1), "c": rand(3, 1, seed=2)})


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Neg"])
def test_unary(op):
    check([mk(op, ["x"], ["y"])], {"x": rand(3, 5) * 2})


def test_sqrt():
    check([mk("Sqrt", ["x"], ["y"])], {"x": rand(3, 5, low=0, high=4)})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    check([mk("Gelu", ["x"], ["y"], approximate=approximate)], {"x": rand(4, 6) * 3}, opset=20)


def test_clip_opset6_attributes_and_opset13_inputs():
    check([mk("Clip", ["x"], ["y"], min=0.0, max=6.0)], {"x": rand(4, 5) * 10}, opset=6)
    check([mk("Clip", ["x", "lo", "hi"], ["y"])], {"x": rand(4, 5) * 10},
          {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}, opset=13)
    check([mk("Clip", ["x", "", "hi"], ["y"])], {"x": rand(4, 5) * 10}, {"hi": np.array(1, np.float32)}, opset=13)


def test_nchw_elementwise_with_per_channel_constant_after_conv():
    """DenseNet's pattern: a [C,1,1] constant (via Unsqueeze) broadcast against an NCHW conv output."""
    nodes = [mk("Conv", ["x", "w"], ["c"]), mk("Unsqueeze", ["s", "ax"], ["s3"]),
             mk("Mul", ["c", "s3"], ["m"]), mk("Add", ["m", "x2"], ["y"])]
    g = check(nodes, {"x": rand(1, 3, 5, 5), "x2": rand(1, 4, 5, 5, seed=3)},
              {"w": rand(4, 3, 1, 1, seed=1), "s": rand(4, seed=2), "ax": np.array([1, 2], np.int64)})
    assert "mul" in g.op_counts()


# ---- normalisation, reductions -------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm(axis):
    shape = (2, 3, 8)
    norm = shape[axis % 3:]
    check([mk("LayerNormalization", ["x", "g", "b"], ["y"], axis=axis, epsilon=1e-5)], {"x": rand(*shape) * 4},
          {"g": rand(*norm, seed=1), "b": rand(*norm, seed=2)})


def test_layer_norm_without_bias():
    check([mk("LayerNormalization", ["x", "g"], ["y"])], {"x": rand(3, 8)}, {"g": rand(8, seed=1)})


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_mean(keepdims):
    check([mk("ReduceMean", ["x"], ["y"], axes=[-1], keepdims=keepdims)], {"x": rand(2, 3, 4)}, opset=13)
    check([mk("ReduceMean", ["x", "ax"], ["y"], keepdims=keepdims)], {"x": rand(2, 3, 4)},
          {"ax": np.array([0, 2], np.int64)}, opset=18)
    check([mk("ReduceMean", ["x"], ["y"], keepdims=keepdims)], {"x": rand(2, 3, 4)}, opset=13)


def test_lrn():
    # onnxruntime as the oracle: the reference evaluator's LRN loops over the batch axis where it
    # means the channels (onnx 1.23), so every channel past the batch size gets no normalisation.
    check([mk("LRN", ["x"], ["y"], size=5, alpha=1e-2, beta=0.75, bias=2.0)], {"x": rand(1, 7, 3, 3) * 3},
          oracle="ort")
    check([mk("LRN", ["x"], ["y"], size=3, alpha=0.1)], {"x": rand(2, 6, 2, 3)}, oracle="ort")


# ---- pooling ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 0]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    # ceil mode with padding that counts: the overhang past the padding never does
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1, "count_include_pad": 1},
    {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1, "count_include_pad": 1},
])
def test_pool(op, attrs):
    if op == "MaxPool":
        attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    check([mk(op, ["x"], ["y"], **attrs)], {"x": rand(1, 3, 8, 9)}, opset=13)


def test_global_average_pool():
    check([mk("GlobalAveragePool", ["x"], ["y"])], {"x": rand(2, 3, 5, 4)})


# ---- data movement and constant subgraphs ------------------------------------------------------------------

def test_reshape_flatten_transpose_concat():
    check([mk("Reshape", ["x", "s"], ["y"])], {"x": rand(2, 3, 4)}, {"s": np.array([0, -1], np.int64)})
    for axis in (0, 2, 4, -1, -3):
        check([mk("Flatten", ["x"], ["y"], axis=axis)], {"x": rand(2, 3, 4, 5)})
        check([mk("Flatten", ["c"], ["y"], axis=axis)], {}, {"c": rand(2, 3, 4, 5)})  # folded at import
    check([mk("Transpose", ["x"], ["y"], perm=[2, 0, 1])], {"x": rand(2, 3, 4)})
    check([mk("Concat", ["a", "b"], ["y"], axis=-1)], {"a": rand(2, 3), "b": rand(2, 5, seed=1)})


def test_layout_aware_ops_after_conv():
    """Transpose/Concat/Flatten of NHWC-kept conv outputs give the NCHW answer."""
    w = {"w": rand(4, 3, 1, 1, seed=1), "w2": rand(2, 3, 1, 1, seed=2)}
    x = {"x": rand(1, 3, 4, 5)}
    check([mk("Conv", ["x", "w"], ["c"]), mk("Transpose", ["c"], ["y"], perm=[0, 2, 1, 3])], x, w)
    g = check([mk("Conv", ["x", "w"], ["c"]), mk("Conv", ["x", "w2"], ["d"]), mk("Concat", ["c", "d"], ["y"], axis=1)],
              x, w)
    assert g.op_counts()["transpose"] == 2  # one in, one out: the concat runs in NHWC
    check([mk("Conv", ["x", "w"], ["c"]), mk("Flatten", ["c"], ["y"])], x, w)
    check([mk("Conv", ["x", "w"], ["c"]), mk("GlobalAveragePool", ["c"], ["p"]), mk("Flatten", ["p"], ["y"])], x, w)


def test_channel_shuffle():
    """ShuffleNet: Reshape -> Transpose -> Reshape between convs."""
    nodes = [mk("Conv", ["x", "w"], ["c"]), mk("Reshape", ["c", "s1"], ["r"]),
             mk("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]), mk("Reshape", ["t", "s2"], ["u"]),
             mk("Conv", ["u", "w2"], ["y"])]
    inits = {"w": rand(6, 3, 1, 1, seed=1), "w2": rand(2, 6, 1, 1, seed=2),
             "s1": np.array([1, 2, 3, 4, 5], np.int64), "s2": np.array([1, 6, 4, 5], np.int64)}
    g = check(nodes, {"x": rand(1, 3, 4, 5)}, inits)
    # NCHW input, the shuffle itself (one transpose of the channel axes in NHWC), NCHW output.
    assert g.op_counts()["transpose"] == 3
    # The split and the shuffled values read by layout-agnostic ops and as graph outputs.
    nodes += [mk("Neg", ["r"], ["nr"]), mk("Neg", ["t"], ["nt"])]
    check(nodes, {"x": rand(1, 3, 4, 5)}, inits, outputs=("y", "r", "t", "nr", "nt", "u"))
    # A transpose that also swaps H and W, then the merge.
    nodes2 = nodes[:2] + [mk("Transpose", ["r"], ["t"], perm=[0, 2, 1, 4, 3]), mk("Reshape", ["t", "s3"], ["y"])]
    check(nodes2, {"x": rand(1, 3, 4, 5)}, {**inits, "s3": np.array([1, 6, 5, 4], np.int64)})


def test_pad_opsets():
    check([mk("Pad", ["x"], ["y"], pads=[0, 1, 2, 0], value=1.5)], {"x": rand(2, 3)}, opset=2)
    check([mk("Pad", ["x", "p", "v"], ["y"])], {"x": rand(2, 3)},
          {"p": np.array([1, 0, 0, 2], np.int64), "v": np.array(-1.0, np.float32)}, opset=13)


def test_slice_squeeze_unsqueeze():
    consts = {"st": np.array([1, 0], np.int64), "en": np.array([3, 100], np.int64),
              "ax": np.array([0, 2], np.int64), "stp": np.array([1, 2], np.int64)}
    check([mk("Slice", ["x", "st", "en", "ax", "stp"], ["y"])], {"x": rand(4, 3, 5)}, consts, opset=13)
    check([mk("Unsqueeze", ["x", "a"], ["u"]), mk("Squeeze", ["u", "a"], ["y"])], {"x": rand(2, 3)},
          {"a": np.array([0, 3], np.int64)}, opset=13)
    check([mk("Unsqueeze", ["x"], ["u"], axes=[1]), mk("Squeeze", ["u"], ["y"], axes=[1])], {"x": rand(2, 3)}, opset=11)


def test_constant_subgraph_feeding_reshape_is_folded():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, plus Constant/ConstantOfShape: all folded."""
    nodes = [
        mk("Shape", ["x"], ["shp"]),
        mk("Constant", [], ["zero"], value=helper.make_tensor("z", 7, [], [0])),
        mk("Gather", ["shp", "zero"], ["n"]),
        mk("Unsqueeze", ["n", "ax0"], ["n1"]),
        mk("Constant", [], ["minus1"], value_ints=[-1]),
        mk("Concat", ["n1", "minus1"], ["newshape"], axis=0),
        mk("Reshape", ["x", "newshape"], ["flat"]),
        mk("ConstantOfShape", ["cshape"], ["bias"], value=helper.make_tensor("v", 1, [1], [0.25])),
        mk("Add", ["flat", "bias"], ["y"]),
    ]
    g = check(nodes, {"x": rand(2, 3, 4)}, {"ax0": np.array([0], np.int64), "cshape": np.array([12], np.int64)},
              opset=13)
    assert set(g.op_counts()) == {"reshape", "add"}


def test_dropout_and_identity():
    check([mk("Dropout", ["x"], ["d"], ratio=0.5), mk("Identity", ["d"], ["y"])], {"x": rand(3, 4)}, opset=11)


def test_input_passed_straight_to_output():
    check([mk("Identity", ["x"], ["y"])], {"x": rand(3, 4)})


def test_imported_graph_keeps_nchw_at_the_boundary():
    """NCHW in, NCHW out; conv -> relu -> pool chain runs NHWC with one transpose each side."""
    nodes = [mk("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), mk("Relu", ["c"], ["r"]),
             mk("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    g = check(nodes, {"x": rand(1, 3, 8, 8)}, {"w": rand(4, 3, 3, 3, seed=1), "b": rand(4, seed=2)})
    assert g.inputs["x"].shape == (1, 3, 8, 8) and g.type_of("y").shape == (1, 4, 4, 4)
    assert g.op_counts()["transpose"] == 2
    assert g.node(g.nodes[1].name).op == "conv2d" and g.nodes[1].attrs["padding"] == (1, 1, 1, 1)


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("flatten", ["Flatten", "Reshape"])
def test_classifier_after_flattened_feature_map_needs_no_transpose(trans_b, flatten):
    """VGG's head: conv -> flatten [N, C*H*W] -> Gemm. The Gemm weight is permuted to NHWC order
    at import, so the only transposes are the input's (the output is 2-D)."""
    k = 5 * 3 * 4
    nodes = [mk("Conv", ["x", "w"], ["c"]),
             mk("Flatten", ["c"], ["f"]) if flatten == "Flatten" else mk("Reshape", ["c", "s"], ["f"]),
             mk("Gemm", ["f", "g", "bias"], ["y"], transB=trans_b, alpha=0.5)]
    inits = {"w": rand(5, 2, 1, 1, seed=1), "g": rand(*((7, k) if trans_b else (k, 7)), seed=2),
             "bias": rand(7, seed=3), "s": np.array([2, -1], np.int64)}
    g = check(nodes, {"x": rand(2, 2, 3, 4)}, inits)
    assert g.op_counts()["transpose"] == 1


def test_flattened_feature_map_read_by_other_ops():
    nodes = [mk("Conv", ["x", "w"], ["c"]), mk("Flatten", ["c"], ["f"]), mk("Relu", ["f"], ["r"]),
             mk("Gemm", ["f", "g"], ["y"], transB=1)]
    check(nodes, {"x": rand(1, 2, 3, 4)}, {"w": rand(5, 2, 1, 1, seed=1), "g": rand(3, 60, seed=2)},
          outputs=("y", "r", "f"))
