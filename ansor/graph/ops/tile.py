"""Tile, ``x`` repeated along each axis: ONNX ``Tile`` on non-constant data with constant repeats
(``numpy.tile`` with one repeat count per axis)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te
from compute.expr import const

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter, plain_export
from ..op_rules import OpDef, ints_attr, register_op
from ..te_ops import LowerCtx
from ..torch_peer import plain_torch


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    if x.ndim == 0:
        raise GraphError("tile: input must have at least one axis, got a scalar")
    reps = ints_attr(attrs.get("repeats"), x.ndim, "tile repeats")
    return TensorType(tuple(d * r for d, r in zip(x.shape, reps)), x.dtype), {"repeats": reps}


def _lower(ctx: LowerCtx, node: Any, xs: list[Any]) -> Any:
    x = xs[0]
    reps = node.attrs["repeats"]

    def body(*i: Any) -> Any:
        # an axis repeated once reads straight through; others wrap around the input's extent
        return x[tuple(v if r == 1 else te.floormod(v, const(n, v.dtype)) for v, n, r in zip(i, x.shape, reps))]

    return te.compute(node.type.shape, body, name=ctx.name("tile"), tag="injective")


def _export(e: Exporter, node: Any, xs: list[str]) -> str:
    return e.node("Tile", [xs[0], e.init(np.array(node.attrs["repeats"], np.int64), "s")])


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    reps = [int(r) for r in imp.const_of(node, 1, "repeats").reshape(-1)]
    src, out = node.input[0], node.output[0]
    if len(reps) != len(imp.val(src).shape) or any(r < 0 for r in reps):
        raise imp.err(node, f"repeats {reps} must be one count >= 0 per axis of the input "
                            f"(rank {len(imp.val(src).shape)})")
    imp.set_plain(out, imp.b.add_node("tile", [imp.plain(src)], {"repeats": tuple(reps)}, out))


TILE = register_op(OpDef(
    "tile", (1, 1), "injective", _infer, "x repeated repeats[d] times along each axis d",
    reference=lambda x, repeats: np.tile(x, repeats), lower=_lower, export=plain_export(_export),
    torch=plain_torch(lambda r, n, x: x.repeat(*n.attrs["repeats"])), onnx={"Tile": _import}))
