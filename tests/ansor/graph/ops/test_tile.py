"""Tile (ansor/graph/ops/tile.py) against onnxruntime: odd shapes, repeats of 1 on some axes,
and int64 data between elementwise ops."""
import numpy as np
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


def test_tile_3d():
    g = check_everywhere([helper.make_node("Tile", ["x", "r"], ["y"])], {"x": rand(2, 3, 5)},
                         {"r": np.array([1, 3, 2], np.int64)})
    assert g.nodes[-1].type.shape == (2, 9, 10)


def test_tile_int64_between_adds():
    x = (np.arange(7, dtype=np.int64) - 3).reshape(1, 7)
    nodes = [helper.make_node("Add", ["x", "x"], ["r"]), helper.make_node("Tile", ["r", "n"], ["t"]),
             helper.make_node("Add", ["t", "t"], ["y"])]
    check_everywhere(nodes, {"x": x}, {"n": np.array([2, 3], np.int64)}, out_dtypes={"y": "int64"})


def test_constant_tile_is_folded():
    nodes = [helper.make_node("Tile", ["c", "n"], ["t"]), helper.make_node("Add", ["x", "t"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(4, 6)}, {"c": rand(2, 3, seed=1), "n": np.array([2, 2], np.int64)})
    assert g.op_counts() == {"add": 1}
