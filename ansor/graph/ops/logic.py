"""The logical operators Not, And, Or and Xor on bool tensors computed at run time (all-constant
ones are folded at import); And, Or and Xor broadcast as numpy."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir_types import GraphError, TensorType
from ..onnx_export import elementwise_export
from ..op_kit_broadcast import broadcast_export, broadcast_import, broadcast_infer, broadcast_lower, broadcast_torch
from ..op_rules import OpDef, register_op
from ..te_ops import unary_lower
from ..torch_peer import elementwise_torch


def _bools(name: str) -> Callable[[Sequence[TensorType]], str]:
    def rule(ts: Sequence[TensorType]) -> str:
        if any(t.dtype != "bool" for t in ts):
            raise GraphError(f"{name}: inputs must be bool, got {', '.join(map(str, ts))}")
        return "bool"
    return rule


def _not_infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    return TensorType(ts[0].shape, _bools("not")(ts)), {}


def _not_import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    imp.layout_preserving(node, "not", {})


NOT = register_op(OpDef(
    "not", (1, 1), "elemwise", _not_infer, "logical not",
    reference=np.logical_not, lower=unary_lower(lambda v, n: ~v),
    export=elementwise_export(lambda e, n, x: e.node("Not", [x])),
    torch=elementwise_torch(lambda r, n, t: r.torch.logical_not(t)), onnx={"Not": _not_import}))


def _logic(name: str, onnx_type: str, numpy_fn: Callable, body: Callable, torch_name: str) -> OpDef:
    return register_op(OpDef(
        name, (2, 2), "broadcast", broadcast_infer(name, _bools(name)), f"logical {name} (broadcast)",
        reference=numpy_fn, lower=broadcast_lower(lambda node, a, b: body(a, b)),
        export=broadcast_export(lambda e, n, xs: e.node(onnx_type, xs)),
        torch=broadcast_torch(lambda r, n, a, b: getattr(r.torch, torch_name)(a, b)),
        onnx={onnx_type: broadcast_import(name)}))


AND = _logic("and", "And", np.logical_and, lambda a, b: a & b, "logical_and")
OR = _logic("or", "Or", np.logical_or, lambda a, b: a | b, "logical_or")
XOR = _logic("xor", "Xor", np.logical_xor, lambda a, b: a != b, "logical_xor")
