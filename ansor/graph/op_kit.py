"""Building blocks for the operator modules of ``ansor/graph/ops/``: one call declares a whole
operator of a common kind.

``elementwise_unary`` makes the complete ``OpDef`` of a one-input elementwise op from its numpy
reference, its scalar tensor-expression body, its ONNX op type, the ONNX node(s) it exports as and
its PyTorch function; layouts are handled once here (an NHWC image stays NHWC through it on
import, export and in the PyTorch peer), so an operator module says only what is its own.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .ir_types import TensorType
from .onnx_export import Exporter, elementwise_export
from .op_rules import OpDef, float_input, register_op
from .te_ops import unary_lower
from .torch_peer import Runner, elementwise_torch

AttrRule = Callable[[TensorType, dict[str, Any]], dict[str, Any]]


def elementwise_unary(name: str, *, reference: Callable[..., Any], expr: Callable[..., Any],
                      onnx_type: str, torch: Callable[[Runner, Any, Any], Any],
                      export: Callable[[Exporter, Any, str], str] | None = None,
                      onnx_attrs: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
                      attrs: AttrRule | None = None, doc: str = "") -> OpDef:
    """Register a float elementwise op ``name`` and return its ``OpDef``.

    ``reference(x, **attrs)``: numpy; ``expr(value, node)``: the scalar body; ``onnx_type``: the
    ONNX op imported as this op and, unless ``export`` says otherwise, exported as it (with the
    node's attributes); ``torch(runner, node, tensor)``: the PyTorch peer; ``onnx_attrs(attrs)``:
    the graph attributes from the ONNX node's; ``attrs(input_type, attrs)``: checks and normalises
    the graph attributes (default: none allowed).
    """
    def infer(ts: Sequence[TensorType], given: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
        float_input(ts[0], f"{name} input")
        return ts[0], (attrs(ts[0], given) if attrs is not None else {})

    def import_rule(imp: Any, node: Any, onnx_given: dict[str, Any]) -> None:
        imp.layout_preserving(node, name, onnx_attrs(onnx_given) if onnx_attrs is not None else {})

    build = export if export is not None else (lambda e, n, x: e.node(onnx_type, [x], **n.attrs))
    return register_op(OpDef(
        name, (1, 1), "elemwise", infer, doc, reference=reference, lower=unary_lower(expr),
        export=elementwise_export(build), torch=elementwise_torch(torch), onnx={onnx_type: import_rule},
        expr=expr))
