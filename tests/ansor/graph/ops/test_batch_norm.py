"""BatchNormalization (ansor/graph/ops/batch_norm.py) against onnxruntime in all its parts: folded
into the conv before it (with and without a bias), kept after a conv with two readers, on a 3-D
input and with variable parameters."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


def _bn_inits(c, seed=10):
    return {"gamma": rand(c, seed=seed, low=0.5, high=1.5), "beta": rand(c, seed=seed + 1),
            "mean": rand(c, seed=seed + 2), "var": rand(c, seed=seed + 3, low=0.5, high=2.0)}


@pytest.mark.parametrize("bias", [True, False])
def test_batch_norm_folded_into_the_conv(bias):
    conv_in = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["y"], epsilon=1e-3)]
    inits = {"w": rand(5, 3, 3, 3, seed=1), "b": rand(5, seed=2), **_bn_inits(5)}
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5)}, inits, rtol=1e-4)
    assert "batch_norm" not in g.op_counts()


def test_batch_norm_kept_where_it_cannot_fold():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"]),
             helper.make_node("Add", ["n", "c"], ["y"])]  # the conv's output has a second reader
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5)}, {"w": rand(5, 3, 3, 3, seed=1), **_bn_inits(5)}, rtol=1e-4)
    assert g.op_counts()["batch_norm"] == 1


def test_batch_norm_of_a_3d_input():
    g = check_everywhere([helper.make_node("BatchNormalization", ["x", "gamma", "beta", "mean", "var"], ["y"])],
                         {"x": rand(2, 5, 7)}, _bn_inits(5), rtol=1e-4)
    assert g.op_counts() == {"batch_norm": 1}


def test_batch_norm_with_variable_parameters():
    ins = {"x": rand(2, 4, 5, 3), **_bn_inits(4)}  # all graph inputs: nothing to fold
    g = check_everywhere([helper.make_node("BatchNormalization", ["x", "gamma", "beta", "mean", "var"], ["y"])],
                         ins, rtol=1e-4)
    assert g.op_counts()["batch_norm"] == 1
