"""The one-input elementwise math ops: relu, sigmoid, tanh, exp, sqrt, erf, neg (ONNX ``Relu``,
``Sigmoid``, ``Tanh``, ``Exp``, ``Sqrt``, ``Erf``, ``Neg``).

Any dtype is accepted (ONNX allows integer Relu and Neg). Each keeps its input's layout on
import, export and in the PyTorch peer (an NHWC image stays NHWC between convolutions).
``erf``'s reference is the operator library's float64 ``erf`` (scipy is not a dependency).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, const
from compute.reference import erf as _erf64

from ..ir_types import Node, TensorType
from ..onnx_export import elementwise_export
from ..op_rules import OpDef, register_op
from ..te_ops import unary_lower
from ..torch_peer import Runner, elementwise_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    return ts[0], {}


def _import(op: str) -> Callable[[Any, Any, dict[str, Any]], None]:
    def rule(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
        imp.layout_preserving(node, op, {})
    return rule


def _declare(name: str, reference: Callable[..., np.ndarray], expr: Callable[[Expr, Node], Expr],
             onnx_type: str, torch: Callable[[Runner, Node, Any], Any]) -> None:
    register_op(OpDef(
        name, (1, 1), "elemwise", _infer, reference=reference, lower=unary_lower(expr),
        export=elementwise_export(lambda e, n, x: e.node(onnx_type, [x])), torch=elementwise_torch(torch),
        onnx={onnx_type: _import(name)}, expr=expr))


_declare("relu", lambda x: np.maximum(x, 0).astype(x.dtype), lambda v, n: te.max(v, const(0, v.dtype)),
         "Relu", lambda r, n, t: r.F.relu(t))
_declare("sigmoid", lambda x: 1.0 / (1.0 + np.exp(-x)), lambda v, n: te.sigmoid(v),
         "Sigmoid", lambda r, n, t: r.torch.sigmoid(t))
_declare("tanh", np.tanh, lambda v, n: te.tanh(v), "Tanh", lambda r, n, t: r.torch.tanh(t))
_declare("exp", np.exp, lambda v, n: te.exp(v), "Exp", lambda r, n, t: r.torch.exp(t))
_declare("sqrt", np.sqrt, lambda v, n: te.sqrt(v), "Sqrt", lambda r, n, t: r.torch.sqrt(t))
_declare("erf", lambda x: _erf64(x.astype(np.float64)).astype(x.dtype), lambda v, n: te.erf(v),
         "Erf", lambda r, n, t: r.torch.erf(t))
_declare("neg", np.negative, lambda v, n: -v, "Neg", lambda r, n, t: -t)
