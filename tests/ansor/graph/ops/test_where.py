"""Where (ansor/graph/ops/where.py) against onnxruntime: a bool input condition broadcast with
both branches, int64 branches, the attention-mask form ``Where(Greater(x, 0), x, -1e9)``, and a
graph mixing a comparison, Where and an activation after a convolution (x -> Greater -> Where ->
LeakyRelu), compiled."""
import numpy as np
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


def test_where_broadcast_all_three():
    cond = np.random.default_rng(1).random((5, 1)) < 0.5
    g = check_everywhere([helper.make_node("Where", ["c", "x", "y0"], ["y"])],
                         {"c": cond, "x": rand(2, 1, 7), "y0": rand(7, seed=2)})
    assert g.op_counts() == {"where": 1}


def test_where_int64():
    rng = np.random.default_rng(2)
    check_everywhere([helper.make_node("Where", ["c", "a", "b"], ["y"])],
                     {"c": rng.random((3, 5)) < 0.5, "a": rng.integers(-9, 9, (3, 5)), "b": rng.integers(-9, 9, (5,))},
                     out_dtypes={"y": "int64"})


def test_where_attention_mask_from_input():
    nodes = [helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("Where", ["pos", "x", "neg"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    x = rand(2, 3, 7, low=-1, high=1)
    x[:, :, 0] = 0.5  # every row keeps one position
    g = check_everywhere(nodes, {"x": x}, {"zero": np.array(0, np.float32), "neg": np.array(-1e9, np.float32)})
    assert g.op_counts().get("greater") == 1 and g.op_counts().get("where") == 1


def test_greater_where_leaky_relu_after_convolution():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Greater", ["c", "zero"], ["pos"]),
             helper.make_node("Where", ["pos", "c", "alt"], ["wh"]),
             helper.make_node("LeakyRelu", ["wh"], ["y"], alpha=0.2)]
    inits = {"w": rand(5, 3, 3, 3, seed=1), "zero": np.array(0.1, np.float32), "alt": rand(5, 1, 1, seed=3, low=-2)}
    g = check_everywhere(nodes, {"x": rand(2, 3, 9, 7)}, inits, rtol=1e-4)
    counts = g.op_counts()
    assert counts.get("greater") == 1 and counts.get("where") == 1 and counts.get("leaky_relu") == 1
    assert counts.get("transpose") == 2  # the image stays NHWC through all three


def test_where_bool_input_condition_meets_nhwc_image():
    # the 4-D bool input is transposed to NHWC to meet the convolution's image
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Where", ["m", "c", "zero"], ["y"])]
    m = np.random.default_rng(5).random((2, 5, 6, 4)) < 0.5
    check_everywhere(nodes, {"x": rand(2, 3, 6, 4), "m": m}, {"w": rand(5, 3, 1, 1, seed=1), "zero": np.zeros(1, np.float32)})


def test_scalars():
    # 0-d values all the way (the PyTorch peer once got them as [1])
    a, b = np.array(0.5, np.float32), np.array(-1.25, np.float32)
    nodes = [helper.make_node("Greater", ["a", "b"], ["g"]), helper.make_node("Mod", ["a", "b"], ["m"], fmod=1),
             helper.make_node("Where", ["g", "m", "b"], ["y"])]
    check_everywhere(nodes, {"a": a, "b": b})
