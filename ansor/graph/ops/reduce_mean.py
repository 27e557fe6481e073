"""``reduce_mean``: the mean over ``axes`` (all when None), keeping them as 1s or not (ONNX
``ReduceMean``: axes as an attribute before opset 18 and as a constant input from it on; with
none given and ``noop_with_empty_axes`` the value passes unchanged). The reference sums in float64.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, IterVar, const
from compute.tensor import Tensor

from ..ir_types import Node, TensorType
from ..onnx_export import plain_export
from ..onnx_import_kit import axes_input
from ..op_rules import OpDef, norm_axis, register_op
from ..te_ops import LowerCtx, full_index
from ..torch_peer import plain_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    axes = attrs.get("axes")
    axes = tuple(range(x.ndim)) if axes is None else tuple(sorted({norm_axis(a, x.ndim, "reduce_mean axis") for a in axes}))
    keep = bool(attrs.get("keepdims", True))
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
    return TensorType(shape, x.dtype), {"axes": axes, "keepdims": keep}


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    axes, keep = list(node.attrs["axes"]), node.attrs["keepdims"]
    inv = const(1.0 / math.prod(x.shape[d] for d in axes), x.dtype)
    ks = [te.reduce_axis((0, x.shape[d]), f"k{d}") for d in axes]
    kept = [d for d in range(x.ndim) if d not in axes]

    def body(*i: IterVar) -> Expr:
        if keep:
            idx = full_index(i, axes, ks)
        else:
            full: dict[int, Any] = dict(zip(kept, i))
            full.update(zip(axes, ks))
            idx = tuple(full[d] for d in range(x.ndim))
        return te.sum(x[idx] * inv, axis=ks)

    return te.compute(node.type.shape, body, name=ctx.name("reduce_mean"), tag="reduce")


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    axes = axes_input(imp, node, attrs, 18)
    if axes is None and attrs.get("noop_with_empty_axes", 0):
        imp.alias(node.output[0], node.input[0])
        return
    out = node.output[0]
    imp.set_plain(out, imp.b.reduce_mean(imp.plain(node.input[0]), axes, bool(attrs.get("keepdims", 1)), name=out))


REDUCE_MEAN = register_op(OpDef(
    "reduce_mean", (1, 1), "reduce", _infer, "mean over axes",
    reference=lambda x, axes, keepdims: x.astype(np.float64).mean(axis=axes, keepdims=keepdims), lower=_lower,
    export=plain_export(lambda e, n, xs: e.node("ReduceMean", [*xs, e.ints(n.attrs["axes"])],
                                                keepdims=int(n.attrs["keepdims"]))),
    torch=plain_torch(lambda r, n, x: x.mean(n.attrs["axes"], keepdim=n.attrs["keepdims"])),
    onnx={"ReduceMean": _import}))
