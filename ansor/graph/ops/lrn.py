"""``lrn``: local response normalisation across the channels of ``axis`` (ONNX ``LRN``: the sum
of squares over the window ``[c - floor((size-1)/2), c + ceil((size-1)/2)]``, then
``x / (bias + alpha / size * sum) ** beta``); ``torch.nn.functional.local_response_norm``.

A 4-D input is normalised NHWC on its last axis; export and the PyTorch peer support only that
case (the only one ONNX has).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compute import te
from compute.expr import const
from compute.tensor import Tensor

from ..ir import display_name
from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import Exporter
from ..op_rules import OpDef, norm_axis, register_op
from ..te_ops import LowerCtx, padded
from ..torch_peer import Runner, UnsupportedForTorch, Value


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    size = attrs.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GraphError(f"lrn: size must be a positive integer, got {size!r}")
    return x, {"size": size, "alpha": float(attrs.get("alpha", 1e-4)), "beta": float(attrs.get("beta", 0.75)),
               "bias": float(attrs.get("bias", 1.0)), "axis": norm_axis(attrs.get("axis", -1), x.ndim, "lrn axis")}


def _reference(x, size: int, alpha: float, beta: float, bias: float, axis: int) -> np.ndarray:
    sq = np.moveaxis(x.astype(np.float64) ** 2, axis, -1)
    c = sq.shape[-1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    csum = np.concatenate([np.zeros((*sq.shape[:-1], 1)), np.cumsum(sq, axis=-1)], axis=-1)
    idx = np.arange(c)
    s = csum[..., np.minimum(idx + hi + 1, c)] - csum[..., np.maximum(idx - lo, 0)]
    return x / np.moveaxis((bias + alpha / size * s) ** beta, -1, axis)


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    a = node.attrs
    ax, size = a["axis"], a["size"]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = te.compute(x.shape, lambda *i: x[i] * x[i], name=ctx.name("lrn_sq"), tag="elemwise")
    pads = [(lo, hi) if d == ax else (0, 0) for d in range(x.ndim)]
    sqp = padded(ctx, sq, pads, 0.0)
    r = te.reduce_axis((0, size), "r")
    s = te.compute(x.shape, lambda *i: te.sum(sqp[tuple(v + r if d == ax else v for d, v in enumerate(i))], axis=r),
                   name=ctx.name("lrn_sum"), tag="reduce")
    bias, scale, beta = (const(a["bias"], x.dtype), const(a["alpha"] / size, x.dtype), const(a["beta"], x.dtype))
    return te.compute(x.shape, lambda *i: x[i] / te.pow(bias + scale * s[i], beta), name=ctx.name("lrn"),
                      tag="elemwise")


def _export(e: Exporter, n: Node) -> None:
    a = n.attrs
    if len(n.type.shape) != 4 or a["axis"] != 3:
        raise GraphError(f"node {display_name(n.name)}: lrn over axis {a['axis']} has no ONNX export")
    e.nchw[n.name] = e.node("LRN", [e.get_nchw(n.inputs[0])], size=a["size"], alpha=a["alpha"],
                            beta=a["beta"], bias=a["bias"])


def _torch(r: Runner, node: Node, xs: list[Value]) -> Value:
    a = node.attrs
    if a["axis"] != 3 or xs[0].t.dim() != 4:
        raise UnsupportedForTorch(f"node {display_name(node.name)}: lrn over axis {a['axis']}")
    return Value(r.F.local_response_norm(xs[0].image(), a["size"], a["alpha"], a["beta"], a["bias"]), True)


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    src, out = node.input[0], node.output[0]
    if int(attrs.get("size", 0)) < 1:
        raise imp.err(node, "required attribute size is missing or not positive")
    kw = dict(size=int(attrs["size"]), alpha=float(attrs.get("alpha", 1e-4)), beta=float(attrs.get("beta", 0.75)),
              bias=float(attrs.get("bias", 1.0)))
    if len(imp.val(src).shape) == 4:
        imp.set_nhwc(out, imp.b.lrn(imp.nhwc(src), axis=-1, name=imp.name_for(out, True), **kw))
    else:
        imp.set_plain(out, imp.b.lrn(imp.plain(src), axis=1, name=out, **kw))


LRN = register_op(OpDef(
    "lrn", (1, 1), "opaque", _infer, "local response normalisation across channels (ONNX LRN)",
    reference=_reference, lower=_lower, export=_export, torch=_torch, onnx={"LRN": _import}))
