"""The comparisons Equal, Less, LessOrEqual, Greater and GreaterOrEqual on tensors computed at run
time (all-constant ones are folded at import): numpy-broadcasting, bool results.

Floats compare as IEEE ordered predicates (NaN compares false, as numpy and onnxruntime); Equal
also takes bools, the ordered comparisons only numbers (the ONNX type constraints).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..ir_types import GraphError, TensorType
from ..op_kit_broadcast import broadcast_export, broadcast_import, broadcast_infer, broadcast_lower, broadcast_torch
from ..op_rules import OpDef, register_op, same_dtype


def _dtype_rule(name: str, bools: bool) -> Callable[[Sequence[TensorType]], str]:
    def rule(ts: Sequence[TensorType]) -> str:
        dtype = same_dtype(ts)
        if dtype == "bool" and not bools:
            raise GraphError(f"{name}: compares numbers, got {ts[0]} and {ts[1]}")
        return "bool"
    return rule


def _compare(name: str, onnx_type: str, numpy_fn: Callable, body: Callable, torch_name: str, doc: str) -> OpDef:
    return register_op(OpDef(
        name, (2, 2), "broadcast", broadcast_infer(name, _dtype_rule(name, name == "equal")), doc,
        reference=numpy_fn, lower=broadcast_lower(lambda node, a, b: body(a, b)),
        export=broadcast_export(lambda e, n, xs: e.node(onnx_type, xs)),
        torch=broadcast_torch(lambda r, n, a, b: getattr(r.torch, torch_name)(a, b)),
        onnx={onnx_type: broadcast_import(name)}))


EQUAL = _compare("equal", "Equal", np.equal, lambda a, b: a == b, "eq", "a == b")
LESS = _compare("less", "Less", np.less, lambda a, b: a < b, "lt", "a < b")
LESS_EQUAL = _compare("less_equal", "LessOrEqual", np.less_equal, lambda a, b: a <= b, "le", "a <= b")
GREATER = _compare("greater", "Greater", np.greater, lambda a, b: a > b, "gt", "a > b")
GREATER_EQUAL = _compare("greater_equal", "GreaterOrEqual", np.greater_equal, lambda a, b: a >= b, "ge", "a >= b")
