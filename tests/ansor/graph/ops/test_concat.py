"""Concat (ansor/graph/ops/concat.py) of non-constant data against onnxruntime in all its parts:
graph inputs on every axis (negative too), three inputs, a constant beside a variable, and NHWC
images after convolutions joined on channels, on a spatial axis and with a graph input."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_concat_of_graph_inputs(axis):
    shapes = [[2, 3, 5], [2, 3, 5], [2, 3, 5]]
    for s, n in zip(shapes, (1, 2, 3)):
        s[axis] = n
    ins = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    g = check_everywhere([helper.make_node("Concat", list(ins), ["y"], axis=axis)], ins)
    assert g.op_counts() == {"concat": 1}


def test_concat_of_a_constant_and_a_variable():
    check_everywhere([helper.make_node("Concat", ["x", "c"], ["y"], axis=1)], {"x": rand(3, 4)},
                     {"c": rand(3, 2, seed=5)})


@pytest.mark.parametrize("axis", [1, 2, -1])
def test_concat_of_images_after_convolutions(axis):
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b"], ["y"], axis=axis)]
    check_everywhere(nodes, {"x": rand(2, 3, 7, 5)}, {"w": rand(4, 3, 3, 3, seed=1), "w2": rand(4, 3, 3, 3, seed=2)},
                     rtol=1e-4)


def test_concat_of_an_image_and_a_graph_input():
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"]),
             helper.make_node("Concat", ["a", "z"], ["y"], axis=1)]
    check_everywhere(nodes, {"x": rand(2, 3, 7, 5), "z": rand(2, 2, 5, 3, seed=3)}, {"w": rand(4, 3, 3, 3, seed=1)},
                     rtol=1e-4)
