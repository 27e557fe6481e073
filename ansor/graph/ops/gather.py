"""Gather, ``take(data, indices, axis)``: ONNX ``Gather`` on a non-constant operand (a token
embedding ``Gather(W[vocab, d], ids[b, t])``, a ViT class token ``Gather(x, 0, axis=1)``).

The output is ``data.shape[:axis] + indices.shape + data.shape[axis+1:]``; negative indices count
from the back of ``axis`` as in ONNX. Indices are data (untrusted input: token ids), and a
compiled kernel does not check what it reads, so an index outside ``[-n, n)`` is **clamped** into
that range (then wrapped): onnxruntime raises instead, we read the first or last row. The numpy
reference, the ONNX export (a ``Clip`` before the ``Gather``) and the PyTorch peer clamp the same
way, so all agree. Constant indices out of range are an import error (onnxruntime's answer).
All-constant Gathers (shape arithmetic) are folded at import (``frontend/onnx_fold.py``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, cast, const

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter
from ..op_rules import OpDef, norm_axis, register_op
from ..te_ops import LowerCtx
from ..torch_peer import Runner, Value

_INDEX_DTYPES = ("int32", "int64")


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    data, idx = ts
    if idx.dtype not in _INDEX_DTYPES:
        raise GraphError(f"gather: indices must be int32 or int64, got {idx}")
    if data.ndim == 0:
        raise GraphError("gather: data must have at least one axis, got a scalar")
    axis = norm_axis(attrs.get("axis", 0), data.ndim, "gather axis")
    if data.shape[axis] == 0:
        raise GraphError(f"gather: axis {axis} of {data} is empty, there is nothing to gather")
    shape = data.shape[:axis] + idx.shape + data.shape[axis + 1:]
    return TensorType(shape, data.dtype), {"axis": axis}


def _safe_indices(idx: np.ndarray, n: int) -> np.ndarray:
    """Indices clamped into [-n, n) and wrapped into [0, n): what the kernel computes."""
    return np.mod(np.clip(idx.astype(np.int64), -n, n - 1), n)


def _reference(data: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    return np.take(data, _safe_indices(idx, data.shape[axis]), axis=axis)


def _safe_index(v: Expr, n: int) -> Expr:
    # clamp then floormod: interval arithmetic proves the result in [0, n), so the bounds
    # analysis (compute/access_bounds.py) needs no data to accept the read
    if n > (1 << 31) - 1 and v.dtype != "int64":  # the bounds below must fit the index's dtype
        v = cast(v, "int64")
    d = v.dtype
    return te.floormod(te.min(te.max(v, const(-n, d)), const(n - 1, d)), const(n, d))


def _lower(ctx: LowerCtx, node: Any, xs: list[Any]) -> Any:
    data, idx = xs
    axis, k = node.attrs["axis"], idx.ndim
    n = data.shape[axis]

    def body(*i: Any) -> Expr:
        pos = _safe_index(idx[i[axis:axis + k]], n)
        return data[(*i[:axis], pos, *i[axis + k:])]

    return te.compute(node.type.shape, body, name=ctx.name("gather"), tag="injective")


def _export(e: Exporter, node: Any) -> None:
    data, idx = (e.get_plain(v) for v in node.inputs)
    axis = node.attrs["axis"]
    n = e.graph.type_of(node.inputs[0]).shape[axis]
    dtype = e.graph.type_of(node.inputs[1]).dtype
    lo, hi = e.init(np.array(-n, dtype), "c"), e.init(np.array(n - 1, dtype), "c")
    e.plain[node.name] = e.node("Gather", [data, e.node("Clip", [idx, lo, hi])], axis=axis)


def _torch(r: Runner, node: Any, xs: list[Value]) -> Value:
    data, idx = (v.plain() for v in xs)
    axis = node.attrs["axis"]
    n = data.shape[axis]
    flat = r.torch.remainder(r.torch.clamp(idx.reshape(-1).long(), -n, n - 1), n)
    return Value(data.index_select(axis, flat).reshape(node.type.shape))


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    data, idx = node.input[0], node.input[1]
    shape = imp.val(data).shape
    if not shape:
        raise imp.err(node, "data must have at least one axis, got a scalar")
    axis = norm_axis(attrs.get("axis", 0), len(shape), "Gather axis")
    ids = imp.val(idx).const
    n = shape[axis]
    if ids is not None and ids.size and (ids.min() < -n or ids.max() >= n):
        raise imp.err(node, f"Gather indices must be in [{-n}, {n - 1}] (axis {axis} of {list(shape)})")
    out = node.output[0]
    imp.set_plain(out, imp.b.add_node("gather", [imp.plain(data), imp.plain(idx)], {"axis": axis}, out))


GATHER = register_op(OpDef(
    "gather", (2, 2), "injective", _infer,
    "take(data, indices, axis): indices clamped into [-n, n), negative from the back",
    reference=_reference, lower=_lower, export=_export, torch=_torch, onnx={"Gather": _import}))
