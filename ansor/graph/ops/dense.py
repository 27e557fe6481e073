"""``dense``: data ``[M, K]`` times weight ``[N, K]`` transposed, ``[M, N]`` (TVM's convention;
``torch.nn.functional.linear``). ONNX ``Gemm`` imports as it when B is constant.

Import: ``alpha`` is folded into the constant weight and ``beta`` into a constant C; a Gemm
reading a feature map flattened in NHWC order (VGG, AlexNet; ``reshape.py``) permutes its weight
rows to that order instead of transposing the map; a Gemm of two variables is a ``matmul``. The
lowering binds a constant weight transposed (``[K, N]``) so that the output columns vectorize.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compute import ops, te
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import plain_export
from ..op_rules import OpDef, register_op, same_dtype
from ..te_ops import LowerCtx
from ..torch_peer import plain_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    data, weight = ts
    if data.ndim != 2 or weight.ndim != 2 or data.shape[1] != weight.shape[1]:
        raise GraphError(f"dense: need data [M, K] and weight [N, K], got {data} and {weight}")
    return TensorType((data.shape[0], weight.shape[0]), same_dtype(ts)), {}


def _reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x.astype(np.float64) @ w.T.astype(np.float64)


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    data, weight = xs
    k = next((i for i, p in enumerate(ctx.placeholders) if p is weight), None)
    bound = None if k is None else ctx.inputs[k]
    if id(weight) in ctx.read_once and isinstance(bound, str) and bound in ctx.constants:
        # A constant weight [N, K] (ONNX Gemm transB, PyTorch Linear) is bound transposed, as
        # [K, N], once at compile time: the output columns then read it contiguously, so they
        # vectorize (on [N, K] each lane would gather from a row 4*K bytes away).
        w_t = np.ascontiguousarray(ctx.constants[bound].T)
        wt = te.placeholder(w_t.shape, weight.dtype, weight.name)
        ctx.placeholders[k] = wt
        ctx.inputs[k] = w_t
        rk = te.reduce_axis((0, data.shape[1]), "k")
        return te.compute((data.shape[0], w_t.shape[1]), lambda i, j: te.sum(data[i, rk] * wt[rk, j], axis=rk),
                          name=ctx.name("dense"), tag="dense")
    return ops.dense(data, weight, name=ctx.name("dense"))


def _scaled(w: np.ndarray, alpha: float) -> np.ndarray:
    return np.ascontiguousarray(w * np.asarray(alpha, w.dtype) if alpha != 1.0 else w)


def _import_gemm(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    ta, tb = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    out = node.output[0]
    aval, bval = imp.val(node.input[0]), imp.val(node.input[1])
    if bval.const is not None and aval.flat_nhwc is not None and not ta:
        flat, _, c = aval.flat_nhwc
        w = bval.const if tb else bval.const.T  # [N, K], K in (c, h, w) order -> (h, w, c) order
        w = _scaled(w.reshape(w.shape[0], c, -1).transpose(0, 2, 1).reshape(w.shape[0], -1), alpha)
        y = imp.b.dense(flat, imp.b.constant(w, name=f"{node.input[1]}:dense", copy=False), name=f"{out}:dense")
    elif bval.const is not None:
        a = imp.plain(node.input[0])
        w = _scaled(bval.const if tb else bval.const.T, alpha)  # dense wants [N, K]
        if ta:
            a = imp.b.transpose(a, (1, 0), name=f"{out}:a_t")
        y = imp.b.dense(a, imp.b.constant(w, name=f"{node.input[1]}:dense", copy=False), name=f"{out}:dense")
    else:
        y = imp.b.matmul(imp.plain(node.input[0]), imp.plain(node.input[1]), transpose_a=ta, transpose_b=tb,
                         name=f"{out}:matmul")
        if alpha != 1.0:
            y = imp.b.mul(y, np.float32(alpha), name=f"{out}:alpha")
    if len(node.input) > 2 and node.input[2] and beta != 0.0:
        cval = imp.val(node.input[2])
        c = (imp.b.constant((cval.const * np.asarray(beta, cval.const.dtype)), name=node.input[2])
             if cval.const is not None else imp.plain(node.input[2]))
        if cval.const is None and beta != 1.0:
            c = imp.b.mul(c, np.float32(beta), name=f"{out}:beta")
        y = imp.b.add(y, c, name=out)
    imp.set_plain(out, y)


DENSE = register_op(OpDef(
    "dense", (2, 2), "out_elemwise_fusable", _infer, "data [M, K] @ weight[N, K]^T -> [M, N]",
    reference=_reference, lower=_lower, export=plain_export(lambda e, n, xs: e.node("Gemm", xs, transB=1)),
    torch=plain_torch(lambda r, n, x, w: r.F.linear(x, w)), onnx={"Gemm": _import_gemm}))
