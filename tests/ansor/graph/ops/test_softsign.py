"""Softsign (the one-file operator of ansor/graph/ops/softsign.py) against onnxruntime: alone on
an odd 3-D shape, and between convolutions where it runs on NHWC images."""
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


def test_softsign_plain():
    g = check_everywhere([helper.make_node("Softsign", ["x"], ["y"])], {"x": rand(3, 5, 7, low=-4, high=4)})
    assert g.op_counts() == {"softsign": 1}


def test_softsign_between_convolutions_stays_nhwc():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Softsign", ["c"], ["s"]),
             helper.make_node("Conv", ["s", "w2"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(1, 3, 9, 7)}, {"w": rand(5, 3, 3, 3, seed=1), "w2": rand(4, 5, 1, 1, seed=2)},
                         rtol=1e-4)
    assert g.op_counts().get("transpose") == 2  # only at the graph's NCHW boundary
