"""Gather on non-constant operands (ansor/graph/ops/gather.py) against onnxruntime: an embedding
table read by int64 token ids, a token picked from activations, any axis and rank, negative
indices; ids out of range are clamped (onnxruntime raises there: checked against numpy)."""
import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx import helper

import ansor
from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError
from ansor.graph import run, to_onnx
from ansor.graph.torch_peer import to_torch

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


def test_gather_embedding_table():
    ids = np.array([[0, 4, -1], [6, -7, 2]], dtype=np.int64)
    g = check_everywhere([helper.make_node("Gather", ["w", "ids"], ["y"])], {"ids": ids}, {"w": rand(7, 5)})
    assert g.op_counts() == {"gather": 1}


def test_gather_class_token_scalar_index():
    # ViT's head: x[:, 0] as Gather(x, 0, axis=1) with a 0-d constant index
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Gather", ["r", "i"], ["y"], axis=1)]
    g = check_everywhere(nodes, {"x": rand(2, 5, 7)}, {"i": np.array(0, dtype=np.int64)})
    assert g.nodes[-1].type.shape == (2, 7)


def test_gather_both_operands_inputs_negative_axis():
    x = rand(2, 3, 11, 5)
    ids = np.array([[[-11, 10], [3, 0], [5, -2]]], dtype=np.int64)  # [1, 3, 2]
    g = check_everywhere([helper.make_node("Gather", ["x", "ids"], ["y"], axis=-2)], {"x": x, "ids": ids})
    assert g.nodes[-1].type.shape == (2, 3, 1, 3, 2, 5)


def test_gather_int32_indices_axis0_of_int64_data():
    x = np.arange(13 * 3, dtype=np.int64).reshape(13, 3) - 20
    ids = np.array([12, -13, 4, 4, 0], dtype=np.int32)
    check_everywhere([helper.make_node("Gather", ["x", "ids"], ["y"])], {"x": x, "ids": ids},
                     out_dtypes={"y": "int64"})


def test_gather_ids_out_of_range_are_clamped_everywhere():
    # onnxruntime raises on these; every part of ours clamps into [-n, n) (row n-1 or row 0)
    w = rand(7, 5)
    ids = np.array([[7, 1000, -8], [-(1 << 62), 3, (1 << 62)]], dtype=np.int64)
    want = w[[[6, 6, 0], [0, 3, 6]]]
    graph = from_onnx(model_of([helper.make_node("Gather", ["w", "ids"], ["y"])], {"ids": ids}, {"w": w}))
    np.testing.assert_array_equal(run(graph, {"ids": ids})["y"], want)
    np.testing.assert_array_equal(ansor.compile_network(graph, verbose=False).run({"ids": ids})["y"], want)
    sess = ort.InferenceSession(to_onnx(graph).SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess.run(None, {"input_0": ids})[0], want)
    with torch.inference_mode():
        np.testing.assert_array_equal(to_torch(graph)(torch.from_numpy(ids))[0].numpy(), want)


def test_gather_constant_index_out_of_range_is_an_import_error():
    model = model_of([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": rand(2, 5)},
                     {"i": np.array([1, 5], dtype=np.int64)})
    with pytest.raises(OnnxImportError, match=r"node .*\(Gather\): Gather indices must be in \[-5, 4\]"):
        from_onnx(model)


def test_gather_embedding_plus_position_then_layer_norm():
    # a transformer's input block: token + position embeddings, then LayerNormalization
    vocab, t, d = 31, 6, 8
    ids = np.array([[1, 30, 7, 0, 7, 12], [29, 3, 3, 18, 0, 5]], dtype=np.int64)
    nodes = [helper.make_node("Gather", ["wte", "ids"], ["tok"]),
             helper.make_node("Add", ["tok", "wpe"], ["e"]),
             helper.make_node("LayerNormalization", ["e", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5)]
    inits = {"wte": rand(vocab, d, seed=1), "wpe": rand(t, d, seed=2), "gamma": rand(d, seed=3),
             "beta": rand(d, seed=4)}
    g = check_everywhere(nodes, {"ids": ids}, inits, rtol=1e-4)
    assert g.op_counts()["gather"] == 1
