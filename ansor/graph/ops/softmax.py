"""``softmax`` along one axis (ONNX ``Softmax``: along ``axis`` from opset 13; before it, of the
input flattened to 2-D at ``axis``).

Lowered as four stages (max, exp, sum, divide) so that it is stable for large inputs; the
reference sums in float64. A softmax over the channels of an NHWC image stays NHWC on import.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from compute import te
from compute.tensor import Tensor

from ..ir_types import Node, TensorType
from ..onnx_export import plain_export
from ..onnx_import_kit import NCHW_AXIS_IN_NHWC, axis_in
from ..op_rules import OpDef, float_input, norm_axis, register_op
from ..te_ops import LowerCtx, full_index, keep_index, reduced_shape
from ..torch_peer import plain_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    float_input(ts[0], "softmax input")
    return ts[0], {"axis": norm_axis(attrs.get("axis", -1), ts[0].ndim, "softmax axis")}


def _reference(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True, dtype=np.float64)


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    ax = node.attrs["axis"]
    red = reduced_shape(x.shape, [ax])
    k1 = te.reduce_axis((0, x.shape[ax]), "k")
    mx = te.compute(red, lambda *i: te.max(x[full_index(i, [ax], [k1])], axis=k1), name=ctx.name("softmax_max"),
                    tag="reduce")
    ex = te.compute(x.shape, lambda *i: te.exp(x[i] - mx[keep_index(i, [ax])]), name=ctx.name("softmax_exp"),
                    tag="broadcast")
    k2 = te.reduce_axis((0, x.shape[ax]), "k")
    sm = te.compute(red, lambda *i: te.sum(ex[full_index(i, [ax], [k2])], axis=k2), name=ctx.name("softmax_sum"),
                    tag="reduce")
    return te.compute(x.shape, lambda *i: ex[i] / sm[keep_index(i, [ax])], name=ctx.name("softmax"), tag="broadcast")


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    src, out = node.input[0], node.output[0]
    shape = imp.val(src).shape
    rank = len(shape)
    if imp.opset >= 13:
        axis = axis_in(attrs.get("axis", -1), rank, "Softmax axis")
        if imp.is_nhwc(src):
            imp.set_nhwc(out, imp.b.softmax(imp.nhwc(src), axis=NCHW_AXIS_IN_NHWC[axis], name=imp.name_for(out, True)))
        else:
            imp.set_plain(out, imp.b.softmax(imp.plain(src), axis=axis, name=out))
        return
    # Before opset 13: flatten to 2-D at `axis` (default 1), softmax the rows, restore the shape.
    axis = axis_in(attrs.get("axis", 1), rank, "Softmax axis")
    if axis == rank - 1 or all(d == 1 for d in shape[axis + 1:]):
        if imp.is_nhwc(src) and rank == 4:
            imp.set_nhwc(out, imp.b.softmax(imp.nhwc(src), axis=NCHW_AXIS_IN_NHWC[axis], name=imp.name_for(out, True)))
        else:
            imp.set_plain(out, imp.b.softmax(imp.plain(src), axis=axis, name=out))
        return
    flat = imp.b.reshape(imp.plain(src), (math.prod(shape[:axis]), math.prod(shape[axis:])), name=f"{out}:flat")
    sm = imp.b.softmax(flat, axis=1, name=f"{out}:softmax")
    imp.set_plain(out, imp.b.reshape(sm, shape, name=out))


SOFTMAX = register_op(OpDef(
    "softmax", (1, 1), "opaque", _infer, "softmax along one axis",
    reference=_reference, lower=_lower,
    export=plain_export(lambda e, n, xs: e.node("Softmax", xs, axis=n.attrs["axis"])),
    torch=plain_torch(lambda r, n, x: r.torch.softmax(x, n.attrs["axis"])), onnx={"Softmax": _import}))
