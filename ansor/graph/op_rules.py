"""The operator registry of the graph IR: ``OpDef`` (an op's arity, fusion pattern, shape/type
rule and everything else the op needs), ``OPS`` and ``register_op``, and the helpers type rules
share (``ints_attr``, ``float_input``, ``norm_axis``, ``broadcast_shapes``, ``same_dtype``).

``OPS`` maps an op name to its ``OpDef``; ``make_node`` (``ir.py``) calls the op's ``infer`` on the
input types to get the output type and the normalised attributes, so a bad shape or attribute
fails when the node is made. Layout conventions are in the ``ir.py`` docstring.

An operator's one home is a module of ``ansor/graph/ops/`` that calls ``register_op`` with a
complete ``OpDef``: type rule, numpy reference, tensor-expression lowering, ONNX import rule(s),
ONNX export and PyTorch peer; ``ansor.graph.ops`` checks at import that none is missing. The
driver modules (``interpreter.py``, ``te_ops.py``, ``onnx_export.py``, ``torch_peer.py``, the ONNX
importer) only call those parts.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ir_types import GraphError, TensorType

# ---- op definitions ---------------------------------------------------------------------------

Infer = Callable[[Sequence[TensorType], dict[str, Any]], tuple[TensorType, dict[str, Any]]]
# The other parts' signatures (their argument types live in the modules that call them):
#   reference(*arrays, **attrs) -> np.ndarray                       (interpreter.py)
#   lower(ctx: te_ops.LowerCtx, node, tensors) -> Tensor            (te_ops.py)
#   export(exporter: onnx_export.Exporter, node) -> None            (onnx_export.py)
#   torch(runner: torch_peer.Runner, node, values) -> torch_peer.Value  (torch_peer.py)
#   onnx[op_type](importer, node: onnx.NodeProto, attrs) -> None    (frontend/onnx_importer.py)
#   expr(value, node) -> Expr (unary) or expr(a, b) -> Expr (binary): an elementwise op's scalar
#   body, which the blocked-layout lowering (layouts.py) reuses
Part = Callable[..., Any]
PARTS = ("reference", "lower", "onnx", "export", "torch")


@dataclass(frozen=True)
class OpDef:
    """An op kind: its arity, fusion pattern and a type rule. ``infer(input_types, attrs)``
    returns the output type and the attributes normalised (defaults filled, tuples). The other
    parts are described above."""

    name: str
    arity: tuple[int, int]  # (min, max) number of inputs
    pattern: str
    infer: Infer
    doc: str = ""
    reference: Part | None = None
    lower: Part | None = None
    export: Part | None = None
    torch: Part | None = None
    onnx: Mapping[str, Part] = field(default_factory=dict)
    expr: Part | None = None

    def missing_parts(self) -> list[str]:
        """The parts a complete operator must have and this one lacks."""
        return [p for p in PARTS if not getattr(self, p)]


OPS: dict[str, OpDef] = {}


def register_op(op: OpDef) -> OpDef:
    """Add an operator (one module of ``ansor/graph/ops/`` each); a name may be taken once."""
    if op.name in OPS:
        raise ImportError(f"graph op {op.name!r} is registered twice")
    OPS[op.name] = op
    return op


def ints_attr(value: Any, n: int, what: str, minimum: int = 0) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value),) * n
    try:
        out = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise GraphError(f"{what} must be an int or {n} ints, got {value!r}") from None
    if len(out) != n or any(v < minimum for v in out):
        raise GraphError(f"{what} must be {n} integer(s) >= {minimum}, got {value!r}")
    return out


def float_input(t: TensorType, what: str) -> None:
    if not t.dtype.startswith("float"):
        raise GraphError(f"{what} must be a float tensor, got {t}")


def norm_axis(axis: Any, ndim: int, what: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -ndim <= axis < max(ndim, 1):
        raise GraphError(f"{what} {axis!r} is out of range for rank {ndim}")
    return int(axis) % max(ndim, 1)


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """Numpy broadcasting of two shapes; a GraphError names both if they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise GraphError(f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def same_dtype(ts: Sequence[TensorType]) -> str:
    dtypes = {t.dtype for t in ts}
    if len(dtypes) > 1:
        raise GraphError(f"inputs have different dtypes: {', '.join(str(t) for t in ts)}")
    return ts[0].dtype
