"""The index of the largest or smallest element along an axis: ONNX ``ArgMax`` and ``ArgMin``,
``torch.argmax``/``argmin``; int64 indices.

Graph ops ``argmax`` and ``argmin`` with ``axis``, ``keepdims`` and ``select_last_index``: among
equal extremes the first index is taken, or the last with ``select_last_index`` (as onnxruntime
does). The compute library has no index-carrying reducer, so the lowering takes the extreme
first, then the smallest (or largest) index whose element equals it; the comparison is exact,
the extreme being one of the elements.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, IterVar, cast, const
from compute.tensor import Tensor

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter, plain_export
from ..op_rules import OpDef, norm_axis, register_op
from ..te_ops import LowerCtx
from ..torch_peer import Runner, plain_torch

_NCHW_AXIS_IN_NHWC = (0, 3, 1, 2)


def _infer_for(op: str) -> Any:
    def infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
        x = ts[0]
        if x.dtype == "bool" or x.ndim == 0:
            raise GraphError(f"{op}: input must be a number tensor of rank >= 1, got {x}")
        axis = norm_axis(attrs.get("axis", 0), x.ndim, f"{op} axis")
        keep = bool(attrs.get("keepdims", True))
        shape = tuple(1 if d == axis else n for d, n in enumerate(x.shape) if keep or d != axis)
        return TensorType(shape, "int64"), {"axis": axis, "keepdims": keep,
                                            "select_last_index": bool(attrs.get("select_last_index", False))}
    return infer


def _reference_for(op: str) -> Any:
    pick = np.argmax if op == "argmax" else np.argmin

    def reference(x: np.ndarray, axis: int, keepdims: bool, select_last_index: bool) -> np.ndarray:
        if select_last_index:  # the first of the reversed axis is the last of the axis
            idx = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis)
        else:
            idx = pick(x, axis=axis)
        return (np.expand_dims(idx, axis) if keepdims else idx).astype(np.int64)
    return reference


def _lower_for(op: str) -> Any:
    def lower(ctx: LowerCtx, node: Any, xs: list[Tensor]) -> Tensor:
        x = xs[0]
        a = node.attrs
        ax, keep, last = a["axis"], a["keepdims"], a["select_last_index"]
        n = x.shape[ax]
        red = tuple(1 if d == ax else s for d, s in enumerate(x.shape))

        def at(i: Sequence[Any], k: Any) -> tuple:
            return tuple(k if d == ax else v for d, v in enumerate(i))

        k1 = te.reduce_axis((0, n), "k")
        ext = te.compute(red, lambda *i: (te.max if op == "argmax" else te.min)(x[at(i, k1)], axis=k1),
                         name=ctx.name(f"{op}_value"), tag="reduce")
        k2 = te.reduce_axis((0, n), "k")
        miss = const(-1 if last else n, "int64")

        def index(*i: IterVar) -> Expr:
            full = list(i) if keep else [*i[:ax], const(0, "int32"), *i[ax:]]
            hit = te.if_then_else(x[at(full, k2)] == ext[at(full, const(0, "int32"))], cast(k2, "int64"), miss)
            return (te.max if last else te.min)(hit, axis=k2)

        return te.compute(node.type.shape, index, name=ctx.name(op), tag="reduce")
    return lower


def _torch_for(op: str) -> Any:
    def peer(r: Runner, node: Any, x: Any) -> Any:
        a = node.attrs
        fn = r.torch.argmax if op == "argmax" else r.torch.argmin
        if a["select_last_index"]:
            idx = x.shape[a["axis"]] - 1 - fn(x.flip(a["axis"]), dim=a["axis"], keepdim=a["keepdims"])
        else:
            idx = fn(x, dim=a["axis"], keepdim=a["keepdims"])
        return idx.to(r.torch.int64)
    return peer


def _export_for(onnx_op: str) -> Any:
    def build(e: Exporter, n: Any, xs: list[str]) -> str:
        a = n.attrs
        return e.node(onnx_op, xs, axis=a["axis"], keepdims=int(a["keepdims"]),
                      select_last_index=int(a["select_last_index"]))
    return plain_export(build)


def _import_for(op: str) -> Any:
    def rule(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
        src, out = node.input[0], node.output[0]
        rank = len(imp.val(src).shape)
        a = {"axis": norm_axis(int(attrs.get("axis", 0)), rank, f"{node.op_type} axis"),
             "keepdims": bool(attrs.get("keepdims", 1)), "select_last_index": bool(attrs.get("select_last_index", 0))}
        if imp.is_nhwc(src) and a["keepdims"]:  # an NHWC image keeps its layout
            y = imp.b.add_node(op, [imp.nhwc(src)], {**a, "axis": _NCHW_AXIS_IN_NHWC[a["axis"]]},
                               imp.name_for(out, True))
            imp.set_nhwc(out, y)
        else:
            imp.set_plain(out, imp.b.add_node(op, [imp.plain(src)], a, out))
    return rule


for _op, _onnx in (("argmax", "ArgMax"), ("argmin", "ArgMin")):
    register_op(OpDef(
        _op, (1, 1), "reduce", _infer_for(_op),
        f"int64 index of the {_op[3:]}imum along an axis (the first among equals, or the last)",
        reference=_reference_for(_op), lower=_lower_for(_op), export=_export_for(_onnx), torch=plain_torch(_torch_for(_op)),
        onnx={_onnx: _import_for(_op)}))
