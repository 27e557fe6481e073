"""Expand, numpy broadcasting of ``x`` to a shape: ONNX ``Expand`` on non-constant data (a mask or
position ids broadcast to the batch). The target shape is a constant (exporters compute it with
Shape arithmetic, folded at import); broadcasting is bidirectional as in ONNX: the output shape
is the broadcast of ``x``'s shape and the target, so a target dimension 1 keeps ``x``'s."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter, plain_export
from ..op_rules import OpDef, broadcast_shapes, register_op
from ..te_ops import LowerCtx, broadcast_index
from ..torch_peer import plain_torch


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    try:
        shape = tuple(int(d) for d in attrs.get("shape", ()))
    except (TypeError, ValueError):
        raise GraphError(f"expand: shape must be a sequence of integers, got {attrs.get('shape')!r}") from None
    if broadcast_shapes(x.shape, shape) != shape:
        raise GraphError(f"expand: {x} does not broadcast to {list(shape)}")
    return TensorType(shape, x.dtype), {"shape": shape}


def _lower(ctx: LowerCtx, node: Any, xs: list[Any]) -> Any:
    x, shape = xs[0], node.type.shape
    return te.compute(shape, lambda *i: x[broadcast_index(x, i, shape)], name=ctx.name("expand"), tag="broadcast")


def _export(e: Exporter, node: Any, xs: list[str]) -> str:
    return e.node("Expand", [xs[0], e.init(np.array(node.attrs["shape"], np.int64), "s")])


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    target = imp.const_of(node, 1, "the target shape")
    dims = [int(d) for d in target.reshape(-1)]
    if any(d < 0 for d in dims):
        raise imp.err(node, f"Expand to shape {dims}: negative dimension")
    src, out = node.input[0], node.output[0]
    shape = broadcast_shapes(imp.val(src).shape, dims)
    imp.set_plain(out, imp.b.add_node("expand", [imp.plain(src)], {"shape": shape}, out))


EXPAND = register_op(OpDef(
    "expand", (1, 1), "broadcast", _infer, "numpy broadcasting of x to shape",
    reference=lambda x, shape: np.broadcast_to(x, shape).copy(), lower=_lower,
    export=plain_export(_export), torch=plain_torch(lambda r, n, x: x.expand(*n.attrs["shape"])),
    onnx={"Expand": _import}))
