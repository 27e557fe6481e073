"""Identity and Dropout (ansor/graph/ops/identity.py) against onnxruntime in all their parts:
between convolutions they make no node (the value passes on in its NHWC layout); of a graph
input whose result is a graph output, an identity node."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


@pytest.mark.parametrize("op_type", ["Identity", "Dropout"])
def test_identity_between_convolutions_is_no_node(op_type):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(op_type, ["c"], ["a"]),
             helper.make_node("Conv", ["a", "w2"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(1, 3, 9, 7)}, {"w": rand(5, 3, 3, 3, seed=1), "w2": rand(4, 5, 1, 1, seed=2)},
                         rtol=1e-4)
    assert g.op_counts() == {"transpose": 2, "conv2d": 2}


def test_identity_of_a_graph_input_is_an_identity_node():
    g = check_everywhere([helper.make_node("Identity", ["x"], ["y"])], {"x": rand(3, 5)})
    assert g.op_counts() == {"identity": 1}
