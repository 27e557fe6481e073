"""Split (ansor/graph/ops/split.py: one ``split`` node per output) against onnxruntime: sizes as
attribute (opset 11) or input (13), num_outputs (18), equal parts, negative axes, int64 data, and
a channel split of a convolution's output, which stays NHWC."""
import numpy as np
import pytest
from onnx import helper

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


def test_split_equal_parts_three_outputs():
    g = check_everywhere([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1)], {"x": rand(2, 9, 5)},
                         outputs=("a", "b", "c"))
    assert g.op_counts() == {"split": 3}


def test_split_sizes_attribute_opset11_negative_axis():
    check_everywhere([helper.make_node("Split", ["x"], ["a", "b"], axis=-1, split=[2, 5])], {"x": rand(2, 3, 7)},
                     outputs=("a", "b"), opset=11)


def test_split_sizes_input_opset13_int64_data():
    x = np.arange(2 * 11, dtype=np.int64).reshape(2, 11) * 3 - 7
    check_everywhere([helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=1)], {"x": x},
                     {"s": np.array([4, 1, 6], np.int64)}, outputs=("a", "b", "c"),
                     opset=13, out_dtypes={"a": "int64", "b": "int64", "c": "int64"})


def test_split_num_outputs_opset18_uneven():
    # 7 into 3 parts: 3, 3, 1
    g = check_everywhere([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)],
                         {"x": rand(7, 2, 3)}, outputs=("a", "b", "c"), opset=18)
    assert [n.type.shape[0] for n in g.nodes] == [3, 3, 1]


def test_split_channels_of_a_convolution_stays_nhwc():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Split", ["c"], ["s0", "s1"], axis=1, split=[2, 3]),
             helper.make_node("Relu", ["s0"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5)}, {"w": rand(5, 3, 3, 3, seed=1), "w2": rand(4, 2, 1, 1, seed=2)},
                         outputs=("y", "s1"), opset=11, rtol=1e-4)
    assert g.op_counts().get("transpose") == 3  # the input, and the two NCHW outputs


@pytest.mark.parametrize("opset, attrs, inits, message", [
    (13, {}, {"s": np.array([4, 4], np.int64)}, r"Mismatch between the sum of 'split' \(8\)"),
    (18, {"num_outputs": 5}, {}, r"num_outputs 5 must equal the number of outputs \(2\)")])
def test_split_bad_sizes_name_the_node(opset, attrs, inits, message):
    model = model_of([helper.make_node("Split", ["x", *inits], ["a", "b"], axis=1, name="sp", **attrs)],
                     {"x": rand(2, 9)}, inits, outputs=("a", "b"), opset=opset)
    with pytest.raises(OnnxImportError, match=r"node sp \(Split\): " + message):
        from_onnx(model)


def test_split_of_a_shape_is_folded_and_feeds_a_reshape():
    # Shape -> Split -> Concat -> Reshape: the split parts must stay constants for the Reshape
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Split", ["s", "k"], ["lead", "rest"]),
             helper.make_node("Concat", ["lead", "m1"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(2, 3, 5)}, {"k": np.array([1, 2], np.int64), "m1": np.array([-1], np.int64)},
                         opset=13)
    assert g.op_counts() == {"reshape": 1}
