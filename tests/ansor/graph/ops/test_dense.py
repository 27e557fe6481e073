"""Gemm (ansor/graph/ops/dense.py) against onnxruntime in all its parts: transposes, alpha and
beta, a bias, two variables (a matmul), and a Gemm after a flatten of an NHWC feature map (its
weight rows permuted instead of a transpose)."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("attrs", [{}, {"transB": 1}, {"transA": 1, "alpha": 0.5, "beta": 2.0}, {"beta": 0.0}])
def test_gemm_constant_weight(attrs):
    a = rand(7, 5) if attrs.get("transA") else rand(5, 7)
    w = rand(3, 7, seed=1) if attrs.get("transB") else rand(7, 3, seed=1)
    g = check_everywhere([helper.make_node("Gemm", ["a", "w", "c"], ["y"], **attrs)], {"a": a},
                         {"w": w, "c": rand(3, seed=2)})
    assert g.op_counts()["dense"] == 1


def test_gemm_of_two_variables_and_a_variable_bias():
    g = check_everywhere([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, alpha=1.5, beta=0.5)],
                         {"a": rand(7, 5), "b": rand(7, 3, seed=1), "c": rand(5, 3, seed=2)})
    assert g.op_counts()["matmul"] == 1


def test_gemm_after_flattening_a_feature_map():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Flatten", ["c"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1, alpha=0.5)]
    g = check_everywhere(nodes, {"x": rand(2, 3, 7, 5)},
                         {"w": rand(4, 3, 3, 3, seed=1), "fc": rand(6, 4 * 5 * 3, seed=2), "fb": rand(6, seed=3)},
                         rtol=1e-4)
    assert g.op_counts().get("transpose") == 1  # only the NCHW input: the weight rows were permuted
