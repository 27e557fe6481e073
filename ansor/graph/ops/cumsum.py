"""CumSum, the running sum along one axis: ONNX ``CumSum`` (``exclusive`` leaves out the element
itself, ``reverse`` sums from the back), on float and integer data; the axis is a constant input.

The lowering is one reduction over the whole axis with a guard (``k <= i``, ``k < i``, ``k >= i``
or ``k > i``): quadratic in the axis length, but one stage the tuner schedules like any other
(relay's scan-free formulation). The reference accumulates floats in float64 and rounds once.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter, plain_export
from ..op_rules import OpDef, norm_axis, register_op
from ..te_ops import LowerCtx
from ..torch_peer import Runner, plain_torch


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    if x.ndim == 0 or x.dtype == "bool":
        raise GraphError(f"cumsum: input must be a numeric tensor with at least one axis, got {x}")
    axis = norm_axis(attrs.get("axis", 0), x.ndim, "cumsum axis")
    return x, {"axis": axis, "exclusive": bool(attrs.get("exclusive", False)),
               "reverse": bool(attrs.get("reverse", False))}


def _reference(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    acc = x.astype(np.float64) if x.dtype.kind == "f" else x
    if reverse:
        acc = np.flip(acc, axis)
    out = np.cumsum(acc, axis=axis, dtype=acc.dtype)
    if exclusive:  # shift by one: the first running sum is empty
        out = np.concatenate([np.zeros_like(np.take(out, [0], axis=axis)),
                              np.take(out, range(out.shape[axis] - 1), axis=axis)], axis=axis)
    if reverse:
        out = np.flip(out, axis)
    return out.astype(x.dtype)


def _lower(ctx: LowerCtx, node: Any, xs: list[Any]) -> Any:
    x = xs[0]
    a = node.attrs
    axis = a["axis"]
    k = te.reduce_axis((0, x.shape[axis]), "k")
    keep = {(False, False): lambda i: k <= i, (True, False): lambda i: k < i,
            (False, True): lambda i: k >= i, (True, True): lambda i: k > i}[(a["exclusive"], a["reverse"])]

    def body(*i: Any) -> Any:
        return te.sum(x[(*i[:axis], k, *i[axis + 1:])], axis=k, where=keep(i[axis]))

    return te.compute(x.shape, body, name=ctx.name("cumsum"), tag="reduce")


def _export(e: Exporter, node: Any, xs: list[str]) -> str:
    a = node.attrs
    axis = e.init(np.array(a["axis"], np.int64), "c")
    return e.node("CumSum", [xs[0], axis], exclusive=int(a["exclusive"]), reverse=int(a["reverse"]))


def _torch(r: Runner, node: Any, x: Any) -> Any:
    a = node.attrs
    axis, n = a["axis"], x.shape[a["axis"]]
    if a["reverse"]:
        x = x.flip(axis)
    out = r.torch.cumsum(x, axis)
    if a["exclusive"]:
        out = r.torch.cat([r.torch.zeros_like(out.narrow(axis, 0, 1)), out.narrow(axis, 0, n - 1)], axis)
    return out.flip(axis) if a["reverse"] else out


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    axis = imp.const_of(node, 1, "axis")
    if axis is None or axis.size != 1:
        raise imp.err(node, "axis (input 1) must be a constant scalar")
    src, out = node.input[0], node.output[0]
    ax = norm_axis(int(axis.reshape(-1)[0]), len(imp.val(src).shape), "CumSum axis")
    imp.set_plain(out, imp.b.add_node("cumsum", [imp.plain(src)], {
        "axis": ax, "exclusive": bool(attrs.get("exclusive", 0)), "reverse": bool(attrs.get("reverse", 0))}, out))


CUMSUM = register_op(OpDef(
    "cumsum", (1, 1), "opaque", _infer, "running sum along axis (exclusive, reverse as in ONNX)",
    reference=_reference, lower=_lower, export=plain_export(_export), torch=plain_torch(_torch),
    onnx={"CumSum": _import}))
