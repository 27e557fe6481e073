"""``clip``: clamp to [min, max] (ONNX ``Clip``, bounds as attributes before opset 11 and as
constant inputs from it on; relu6 is clip(0, 6)); ``torch.clamp``.

A bound the model leaves out is the type's numeric_limits lowest()/max(), as the ONNX spec and
onnxruntime say: a float input's +-inf is clamped to the largest finite value, not passed through.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, const

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import Exporter, elementwise_export
from ..op_rules import OpDef, register_op
from ..te_ops import unary_lower
from ..torch_peer import elementwise_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    lo, hi = attrs.get("min", -math.inf), attrs.get("max", math.inf)
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)) or lo > hi:
        raise GraphError(f"clip: min/max must be numbers with min <= max, got {lo!r}, {hi!r}")
    return ts[0], {"min": float(lo), "max": float(hi)}


def _reference(x: np.ndarray, min: float, max: float) -> np.ndarray:  # noqa: A002 - the attribute names
    return np.clip(x, min, max).astype(x.dtype)


def _expr(v: Expr, node: Node) -> Expr:
    lo, hi = node.attrs["min"], node.attrs["max"]
    if math.isfinite(hi):
        v = te.min(v, const(hi, v.dtype))
    if math.isfinite(lo):
        v = te.max(v, const(lo, v.dtype))
    return v


def _export(e: Exporter, n: Node, x: str) -> str:
    lo = e.init(np.array(n.attrs["min"], n.type.dtype), "c")
    hi = e.init(np.array(n.attrs["max"], n.type.dtype), "c")
    return e.node("Clip", [x, lo, hi])


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    dtype = np.dtype(imp.val(node.input[0]).dtype)
    lo_d, hi_d = ((float(np.finfo(dtype).min), float(np.finfo(dtype).max)) if dtype.kind == "f"
                  else (-math.inf, math.inf))  # an integer has no inf to clamp
    if imp.opset < 11:
        lo, hi = attrs.get("min", lo_d), attrs.get("max", hi_d)
    else:
        lo_a, hi_a = imp.const_of(node, 1, "min"), imp.const_of(node, 2, "max")
        for what, a in (("min", lo_a), ("max", hi_a)):
            if a is not None and a.size != 1:
                raise imp.err(node, f"{what} must be a scalar, got shape {list(a.shape)}")
        lo = lo_d if lo_a is None else float(lo_a.reshape(-1)[0])
        hi = hi_d if hi_a is None else float(hi_a.reshape(-1)[0])
    imp.layout_preserving(node, "clip", {"min": float(lo), "max": float(hi)})


CLIP = register_op(OpDef(
    "clip", (1, 1), "elemwise", _infer, "clamp to [min, max] (relu6 is clip(0, 6))",
    reference=_reference, lower=unary_lower(_expr), export=elementwise_export(_export),
    torch=elementwise_torch(lambda r, n, t: r.torch.clamp(t, n.attrs["min"], n.attrs["max"])),
    onnx={"Clip": _import}, expr=_expr))
