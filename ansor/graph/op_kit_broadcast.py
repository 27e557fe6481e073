"""Building blocks for the broadcasting operators of ``ansor/graph/ops/`` (PRelu, Mod, the
comparisons, logic and Where): numpy broadcasting of all inputs, in each part of an operator.

Layouts are handled here once, as for ``op_kit.elementwise_unary``: a 4-D result with an NHWC
image among its inputs stays NHWC on import (lower-rank constants are lifted to 4-D and
transposed with it), and is computed NCHW next to an NCHW image in the export and the PyTorch
peer. Kept apart from ``op_kit`` so that the two grow independently.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from compute import te
from compute.tensor import Tensor

from .ir_types import GraphError, TensorType
from .onnx_export import Exporter
from .op_rules import broadcast_shapes
from .te_ops import LowerCtx, broadcast_index
from .torch_peer import Runner, Value

AttrRule = Callable[[TensorType, dict[str, Any]], dict[str, Any]]


def broadcast_import(op: str, onnx_attrs: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None):
    """The ONNX import rule of a numpy-broadcasting op of all the node's inputs as graph op
    ``op``: a 4-D result with an NHWC image among its inputs stays NHWC (lower-rank constants,
    such as a per-channel [C, 1, 1] slope, are lifted to 4-D and transposed with it)."""
    def rule(imp: Any, node: Any, given: dict[str, Any]) -> None:
        names, out = list(node.input), node.output[0]
        if not all(names):
            raise imp.err(node, "an input is left out")
        if imp.opset < 7 and given.get("broadcast", 0):
            # before opset 7 broadcasting aligned ``axis``, not the trailing dimensions
            raise imp.err(node, "legacy broadcast (opset < 7, broadcast=1) is not supported")
        vals = [imp.val(n) for n in names]
        try:
            shape = tuple(np.broadcast_shapes(*(v.shape for v in vals)))
        except ValueError:
            raise imp.err(node, f"input shapes {', '.join(str(list(v.shape)) for v in vals)} do not broadcast") from None
        use_nhwc = (len(shape) == 4 and any(imp.is_nhwc(n) for n in names)
                    and all(v.const is not None or len(v.shape) == 4 for v in vals))
        args = [(imp.nhwc if use_nhwc else imp.plain)(n) for n in names]
        attrs = onnx_attrs(given) if onnx_attrs is not None else {}
        var = imp.b.add_node(op, args, attrs, imp.name_for(out, use_nhwc))
        (imp.set_nhwc if use_nhwc else imp.set_plain)(out, var)
    return rule


def broadcast_export(build: Callable[[Exporter, Any, list[str]], str]) -> Callable[[Exporter, Any], None]:
    """The export of a broadcasting op: ``build(e, node, inputs)`` makes its ONNX node(s); a 4-D
    result next to an NCHW image is computed NCHW (the other operands follow the image)."""
    def fn(e: Exporter, n: Any) -> None:
        if len(n.type.shape) == 4 and any(e.is_image(v) for v in n.inputs):
            e.nchw[n.name] = build(e, n, [e.image_operand(v) for v in n.inputs])
        else:
            e.plain[n.name] = build(e, n, [e.get_plain(v) for v in n.inputs])
    return fn


def _torch_image_operand(v: Value) -> Any:
    """An operand next to an NCHW-logical image: lower ranks lifted to NHWC rank, then permuted."""
    if v.nchw:
        return v.t
    t = v.t
    if t.dim() < 4:
        t = t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))
    return t.permute(0, 3, 1, 2)


def broadcast_torch(fn: Callable[..., Any]) -> Callable[[Runner, Any, list[Value]], Value]:
    """The PyTorch peer of a broadcasting op: ``fn(runner, node, *tensors)``, NCHW-logical next to
    an image (as the export), else in the IR's layout."""
    def op(r: Runner, node: Any, xs: list[Value]) -> Value:
        if len(node.type.shape) == 4 and any(v.nchw for v in xs):
            return Value(fn(r, node, *[_torch_image_operand(v) for v in xs]), True)
        return Value(fn(r, node, *[v.plain() for v in xs]))
    return op


def broadcast_lower(body: Callable[..., Any]) -> Callable[[LowerCtx, Any, list[Tensor]], Tensor]:
    """The lowering of a broadcasting op whose scalar body is ``body(node, *values)``."""
    def lower(ctx: LowerCtx, node: Any, xs: list[Tensor]) -> Tensor:
        shape = node.type.shape
        tag = "elemwise" if all(tuple(x.shape) == tuple(shape) for x in xs) else "broadcast"
        return te.compute(shape, lambda *i: body(node, *[x[broadcast_index(x, i, shape)] for x in xs]),
                          name=ctx.name(node.op), tag=tag)
    return lower


def broadcast_infer(name: str, dtype_rule: Callable[[Sequence[TensorType]], str],
                    attrs: AttrRule | None = None):
    """The type rule of a broadcasting op: numpy broadcasting of all inputs' shapes; the output
    dtype (and the inputs' checks) from ``dtype_rule``; attributes from ``attrs``."""
    def infer(ts: Sequence[TensorType], given: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
        shape: tuple[int, ...] = ()
        for t in ts:
            try:
                shape = broadcast_shapes(shape, t.shape)
            except GraphError:
                raise GraphError(f"{name}: input shapes {', '.join(str(list(t.shape)) for t in ts)} "
                                 f"do not broadcast") from None
        dtype = dtype_rule(ts)
        norm = attrs(ts[0], given) if attrs is not None else {}
        if attrs is None and given:
            raise GraphError(f"{name}: unknown attribute(s) {', '.join(sorted(given))}")
        return TensorType(shape, dtype), norm
    return infer
