"""PRelu, ``x if x >= 0 else slope * x`` with a slope broadcast to x (ONNX ``PRelu``: the slope
broadcasts unidirectionally, so the output has x's shape; typically [C, 1, 1] per channel of an
NCHW image, or a scalar).

On an NHWC image (after a convolution) the import keeps the image NHWC: a constant [C, 1, 1]
slope is lifted to [1, C, 1, 1] and transposed with it to [1, 1, 1, C], so it follows the
channel axis (``op_kit_broadcast.broadcast_import``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, const

from ..ir_types import GraphError, TensorType
from ..op_kit_broadcast import broadcast_export, broadcast_import, broadcast_lower, broadcast_torch
from ..op_rules import OpDef, broadcast_shapes, register_op, same_dtype


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    x, slope = ts
    dtype = same_dtype(ts)
    if dtype == "bool":
        raise GraphError(f"prelu: inputs must be numbers, got {x} and {slope}")
    if attrs:
        raise GraphError(f"prelu: unknown attribute(s) {', '.join(sorted(attrs))}")
    try:
        ok = broadcast_shapes(x.shape, slope.shape) == x.shape
    except GraphError:
        ok = False
    if not ok:
        raise GraphError(f"prelu: slope {list(slope.shape)} does not broadcast to the input's shape "
                         f"{list(x.shape)}")
    return x, {}


def _expr(x: Expr, slope: Expr) -> Expr:
    return te.if_then_else(x < const(0, x.dtype), x * slope, x)


def _export(e: Any, n: Any, xs: list[str]) -> str:
    if n.type.dtype.startswith("float"):
        return e.node("PRelu", xs)
    # onnxruntime has no integer PRelu (the spec allows it): the same as Where(x < 0, x * s, x)
    zero = e.init(np.zeros((), n.type.dtype), "c")
    return e.node("Where", [e.node("Less", [xs[0], zero]), e.node("Mul", xs), xs[0]])


PRELU = register_op(OpDef(
    "prelu", (2, 2), "broadcast", _infer, "x if x >= 0 else slope * x (slope broadcast to x)",
    reference=lambda x, slope: np.where(x < 0, x * slope, x),
    lower=broadcast_lower(lambda node, x, slope: _expr(x, slope)),
    export=broadcast_export(_export),
    torch=broadcast_torch(lambda r, n, x, slope: r.torch.where(x < 0, x * slope, x)),
    onnx={"PRelu": broadcast_import("prelu")},
    expr=_expr))
