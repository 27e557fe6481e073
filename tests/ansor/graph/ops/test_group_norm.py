"""InstanceNormalization and GroupNormalization (ansor/graph/ops/group_norm.py) against
onnxruntime: 3-D and 4-D inputs, per-group scale and bias (opset 18, constant or not) and per
channel (opset 21), epsilon, and after a Conv where it runs on NHWC images."""
import pytest
from onnx import helper

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


@pytest.mark.parametrize("shape", [(2, 3, 7, 5), (2, 3, 7)])
def test_instance_norm(shape):
    nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)]
    g = check_everywhere(nodes, {"x": rand(*shape, low=-2, high=3)}, {"s": rand(3, seed=1), "b": rand(3, seed=2)},
                         rtol=1e-4)
    assert g.op_counts()["group_norm"] == 1


@pytest.mark.parametrize("groups", [1, 2, 3, 6])
def test_group_norm_opset18_per_group(groups):
    nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups)]
    check_everywhere(nodes, {"x": rand(2, 6, 7, 5, low=-2, high=3)},
                     {"s": rand(groups, seed=1), "b": rand(groups, seed=2)}, opset=18, rtol=1e-4)


def test_group_norm_opset18_scale_not_a_constant():
    nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=0.01)]
    check_everywhere(nodes, {"x": rand(2, 6, 5, 3), "s": rand(2, seed=1)}, {"b": rand(2, seed=2)}, opset=18,
                     rtol=1e-4)


@pytest.mark.parametrize("groups", [2, 3])
def test_group_norm_opset21_per_channel(groups):
    nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups)]
    check_everywhere(nodes, {"x": rand(2, 6, 7, 5, low=-2, high=3)}, {"s": rand(6, seed=1), "b": rand(6, seed=2)},
                     opset=21, rtol=1e-4)


@pytest.mark.parametrize("op", ["InstanceNormalization", "GroupNormalization"])
def test_after_a_conv_stays_nhwc(op):
    extra = {"num_groups": 2} if op == "GroupNormalization" else {}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(op, ["c", "s", "b"], ["n"], **extra),
             helper.make_node("Relu", ["n"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5)},
                         {"w": rand(4, 3, 3, 3, seed=1), "s": rand(4, seed=2), "b": rand(4, seed=3)},
                         opset=21, rtol=1e-4)
    assert g.op_counts().get("transpose") == 2  # only at the graph's NCHW boundary


def test_errors_name_the_node():
    model = model_of([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4, name="gn")],
                     {"x": rand(2, 6, 7, 5)}, {"s": rand(6), "b": rand(6)}, opset=21)
    with pytest.raises(OnnxImportError, match=r"node gn \(GroupNormalization\): num_groups 4 must divide"):
        from_onnx(model)
    model = model_of([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="in")],
                     {"x": rand(2, 6)}, {"s": rand(6), "b": rand(6)})
    with pytest.raises(OnnxImportError, match=r"node in \(InstanceNormalization\): the input must be"):
        from_onnx(model)
