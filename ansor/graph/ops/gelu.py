"""GELU, ``x * Phi(x)``: ONNX ``Gelu`` (opset 20) with ``approximate`` 'none' (the erf form) or
'tanh'; ``torch.nn.functional.gelu``.

The reference computes in float64; the export spells the formula out in Mul/Add/Erf (or Tanh)
nodes.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, const
from compute.reference import erf as _erf64

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import Exporter, elementwise_export
from ..op_rules import OpDef, float_input, register_op
from ..onnx_import_kit import attr_str
from ..te_ops import unary_lower
from ..torch_peer import elementwise_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    float_input(ts[0], "gelu input")
    approx = attrs.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise GraphError(f"gelu: approximate must be 'none' or 'tanh', got {approx!r}")
    return ts[0], {"approximate": approx}


def _reference(x: np.ndarray, approximate: str) -> np.ndarray:
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        y = 0.5 * x64 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        y = 0.5 * x64 * (1.0 + _erf64(x64 / math.sqrt(2.0)))
    return y.astype(x.dtype)


def _expr(v: Expr, node: Node) -> Expr:
    dtype = v.dtype
    half, one = const(0.5, dtype), const(1.0, dtype)
    if node.attrs["approximate"] == "tanh":
        c = const(math.sqrt(2.0 / math.pi), dtype)
        return half * v * (one + te.tanh(c * (v + const(0.044715, dtype) * v * v * v)))
    return half * v * (one + te.erf(v * const(1.0 / math.sqrt(2.0), dtype)))


def _export(e: Exporter, n: Node, x: str) -> str:
    half, one = e.init(np.array(0.5, np.float32), "c"), e.init(np.array(1.0, np.float32), "c")
    if n.attrs["approximate"] == "tanh":
        c3 = e.init(np.array(0.044715, np.float32), "c")
        k = e.init(np.array(math.sqrt(2.0 / math.pi), np.float32), "c")
        cube = e.node("Mul", [e.node("Mul", [x, x]), x])
        inner = e.node("Mul", [k, e.node("Add", [x, e.node("Mul", [c3, cube])])])
        t = e.node("Tanh", [inner])
    else:
        t = e.node("Erf", [e.node("Mul", [x, e.init(np.array(1 / math.sqrt(2.0), np.float32), "c")])])
    return e.node("Mul", [e.node("Mul", [half, x]), e.node("Add", [one, t])])


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    imp.layout_preserving(node, "gelu", {"approximate": attr_str(attrs.get("approximate", b"none"))})


GELU = register_op(OpDef(
    "gelu", (1, 1), "elemwise", _infer, "GELU; approximate='none' (erf form) or 'tanh'",
    reference=_reference, lower=unary_lower(_expr), export=elementwise_export(_export),
    torch=elementwise_torch(lambda r, n, t: r.F.gelu(t, approximate=n.attrs["approximate"])),
    onnx={"Gelu": _import}, expr=_expr))
