"""A BERT-style encoder layer as exporters write it (layer norm decomposed into ReduceMean, Sub,
Pow, Sqrt, Div; erf GELU; heads split with Reshape shapes computed by Shape/Gather/Concat), and
the same layer with the fused LayerNormalization/Gelu ops: imported and run against onnx's
reference evaluator."""
from __future__ import annotations

import numpy as np
from onnx import helper

from .onnx_util import check

mk = helper.make_node
S, H, HEADS = 6, 16, 4


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    w = {k: (rng.standard_normal(s) * 0.3).astype(np.float32) for k, s in
         {"wq": (H, H), "wk": (H, H), "wv": (H, H), "wo": (H, H), "w1": (H, 4 * H), "w2": (4 * H, H),
          "bq": (H,), "bk": (H,), "bv": (H,), "bo": (H,), "b1": (4 * H,), "b2": (H,)}.items()}
    w.update({"gamma": rng.uniform(0.5, 1.5, H).astype(np.float32), "beta": rng.uniform(-0.1, 0.1, H).astype(np.float32),
              "two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
              "half": np.array(0.5, np.float32), "one": np.array(1.0, np.float32),
              "sqrt2": np.array(np.sqrt(2.0), np.float32), "scale": np.array(np.sqrt(H // HEADS), np.float32),
              "i0": np.array(0, np.int64), "i1": np.array(1, np.int64), "ax0": np.array([0], np.int64),
              "heads": np.array([HEADS, H // HEADS], np.int64), "hidden": np.array([H], np.int64)})
    return w


def _split_heads(src: str, out: str, perm: list[int]) -> list:
    # shape = concat(Shape(x)[0], Shape(x)[1], [HEADS, H/HEADS]) -> Reshape -> Transpose
    return [mk("Shape", [src], [f"{out}_shape"]),
            mk("Gather", [f"{out}_shape", "i0"], [f"{out}_b"]), mk("Gather", [f"{out}_shape", "i1"], [f"{out}_s"]),
            mk("Unsqueeze", [f"{out}_b", "ax0"], [f"{out}_b1"]), mk("Unsqueeze", [f"{out}_s", "ax0"], [f"{out}_s1"]),
            mk("Concat", [f"{out}_b1", f"{out}_s1", "heads"], [f"{out}_newshape"], axis=0),
            mk("Reshape", [src, f"{out}_newshape"], [f"{out}_4d"]),
            mk("Transpose", [f"{out}_4d"], [out], perm=perm)]


def _layer_norm(x: str, out: str, fused: bool) -> list:
    if fused:
        return [mk("LayerNormalization", [x, "gamma", "beta"], [out], axis=-1, epsilon=1e-5)]
    return [mk("ReduceMean", [x], [f"{out}_mean"], axes=[-1]), mk("Sub", [x, f"{out}_mean"], [f"{out}_d"]),
            mk("Pow", [f"{out}_d", "two"], [f"{out}_sq"]), mk("ReduceMean", [f"{out}_sq"], [f"{out}_var"], axes=[-1]),
            mk("Add", [f"{out}_var", "eps"], [f"{out}_ve"]), mk("Sqrt", [f"{out}_ve"], [f"{out}_std"]),
            mk("Div", [f"{out}_d", f"{out}_std"], [f"{out}_n"]), mk("Mul", [f"{out}_n", "gamma"], [f"{out}_g"]),
            mk("Add", [f"{out}_g", "beta"], [out])]


def _gelu(x: str, out: str, fused: bool) -> list:
    if fused:
        return [mk("Gelu", [x], [out])]
    return [mk("Div", [x, "sqrt2"], [f"{out}_s"]), mk("Erf", [f"{out}_s"], [f"{out}_e"]),
            mk("Add", [f"{out}_e", "one"], [f"{out}_p"]), mk("Mul", [x, f"{out}_p"], [f"{out}_m"]),
            mk("Mul", [f"{out}_m", "half"], [out])]


def _encoder(fused: bool) -> list:
    nodes = []
    for p in "qkv":
        nodes += [mk("MatMul", ["x", f"w{p}"], [f"{p}_mm"]), mk("Add", [f"{p}_mm", f"b{p}"], [p])]
    nodes += _split_heads("q", "qh", [0, 2, 1, 3]) + _split_heads("k", "kh", [0, 2, 3, 1])
    nodes += _split_heads("v", "vh", [0, 2, 1, 3])
    nodes += [mk("MatMul", ["qh", "kh"], ["scores"]), mk("Div", ["scores", "scale"], ["scaled"]),
              mk("Softmax", ["scaled"], ["probs"], axis=-1), mk("MatMul", ["probs", "vh"], ["ctx4"]),
              mk("Transpose", ["ctx4"], ["ctx_t"], perm=[0, 2, 1, 3]),
              mk("Shape", ["x"], ["xshape"]), mk("Slice", ["xshape", "i0_1", "two_1"], ["bs"]),
              mk("Concat", ["bs", "hidden"], ["ctx_shape"], axis=0), mk("Reshape", ["ctx_t", "ctx_shape"], ["ctx"]),
              mk("MatMul", ["ctx", "wo"], ["att_mm"]), mk("Add", ["att_mm", "bo"], ["att"]),
              mk("Add", ["att", "x"], ["res1"])]
    nodes += _layer_norm("res1", "ln1", fused)
    nodes += [mk("MatMul", ["ln1", "w1"], ["f1_mm"]), mk("Add", ["f1_mm", "b1"], ["f1"])]
    nodes += _gelu("f1", "g", fused)
    nodes += [mk("MatMul", ["g", "w2"], ["f2_mm"]), mk("Add", ["f2_mm", "b2"], ["f2"]), mk("Add", ["f2", "ln1"], ["res2"]),
              mk("Tanh", ["res2"], ["t"])]
    nodes += _layer_norm("t", "y", fused)
    return nodes


def _consts():
    w = _weights()
    w.update({"i0_1": np.array([0], np.int64), "two_1": np.array([2], np.int64)})
    return w


def test_encoder_layer_decomposed_ops():
    x = np.random.default_rng(3).standard_normal((2, S, H)).astype(np.float32)
    g = check(_encoder(fused=False), {"x": x}, _consts(), opset=17, rtol=1e-4, atol=1e-4)
    counts = g.op_counts()
    assert counts["dense"] == 6 and counts["matmul"] == 2 and counts["erf"] == 1
    # The Shape/Gather/Unsqueeze/Concat/Slice chains were folded: only the data reshapes remain.
    # 2 per 3-D x 2-D MatMul (flatten to dense and back), 3 head splits, 1 head merge.
    assert counts["reshape"] == 6 * 2 + 3 + 1 and "gather" not in counts


def test_encoder_layer_fused_layer_norm_and_gelu():
    x = np.random.default_rng(4).standard_normal((1, S, H)).astype(np.float32)
    g = check(_encoder(fused=True), {"x": x}, _consts(), opset=20, rtol=1e-4, atol=1e-4)
    assert g.op_counts()["layer_norm"] == 2 and g.op_counts()["gelu"] == 1
