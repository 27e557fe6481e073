"""``identity``: the value unchanged (ONNX ``Identity``; ``Dropout`` at inference).

On import an ``Identity`` or ``Dropout`` node makes no graph node: its output is the same value
as its input, in every layout the importer holds it in. The graph op itself is made where a
value must be computed under a new name (a graph output that is a constant, a one-input ``Sum``).
"""
from __future__ import annotations

from typing import Any

from ..ir_types import TensorType
from ..onnx_export import elementwise_export
from ..op_rules import OpDef, register_op
from ..te_ops import unary_lower
from ..torch_peer import elementwise_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    return ts[0], {}


def alias(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    """The import rule of ``Identity`` and ``Dropout`` (whose mask output must be unused)."""
    imp.single_output(node)
    imp.alias(node.output[0], node.input[0])


IDENTITY = register_op(OpDef(
    "identity", (1, 1), "elemwise", _infer, "the input unchanged",
    reference=lambda x: x.copy(), lower=unary_lower(lambda v, n: v),
    export=elementwise_export(lambda e, n, x: e.node("Identity", [x])),
    torch=elementwise_torch(lambda r, n, t: t), onnx={"Identity": alias, "Dropout": alias},
    expr=lambda v, n: v))
