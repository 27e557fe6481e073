"""The broadcasting binary arithmetic: add, sub, mul, div, pow, maximum, minimum, with numpy's
broadcasting rules (ONNX ``Add``, ``Sub``, ``Mul``, ``Div``, ``Pow``, ``Max``, ``Min``, ``Sum``).

An image operand next to an NHWC image stays NHWC on import (a per-channel [C, 1, 1] constant is
lifted to 4-D and transposed once), so bias adds and residual adds between convolutions need no
transposes; export and the PyTorch peer keep images NCHW the same way.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr
from compute.tensor import Tensor

from ..ir_types import Node, TensorType
from ..onnx_export import Exporter
from ..op_kit_broadcast import broadcast_export, broadcast_torch
from ..op_rules import OpDef, broadcast_shapes, register_op, same_dtype
from ..te_ops import LowerCtx, broadcast_index
from ..torch_peer import Runner, Value


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    return TensorType(broadcast_shapes(ts[0].shape, ts[1].shape), same_dtype(ts)), {}


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # x ** 2 and x ** 0.5 are the common cases (variance, norms); keep them exact and fast.
    if b.size == 1 and float(b.reshape(-1)[0]) == 2.0:
        return a * a
    return np.power(a, b)


def _lower(expr: Callable[[Expr, Expr], Expr]) -> Callable[[LowerCtx, Node, list[Tensor]], Tensor]:
    def lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
        a, b = xs
        shape = node.type.shape
        return te.compute(shape, lambda *i: expr(a[broadcast_index(a, i, shape)], b[broadcast_index(b, i, shape)]),
                          name=ctx.name(node.op), tag="broadcast" if a.shape != b.shape else "elemwise")
    return lower


def _export(onnx_op: str) -> Callable[[Exporter, Node], None]:
    return broadcast_export(lambda e, n, xs: e.node(onnx_op, xs))


def _torch(fn_name: str) -> Callable[[Runner, Node, list[Value]], Value]:
    return broadcast_torch(lambda r, node, *ts: getattr(r.torch, fn_name)(*ts))


def _import(op: str) -> Callable[[Any, Any, dict[str, Any]], None]:
    """The import rule of ONNX binary ops (``Sum`` of n inputs: a chain of adds)."""
    def rule(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
        if imp.opset < 7 and attrs.get("broadcast", 0):
            raise imp.err(node, "legacy broadcast (opset < 7, broadcast=1) is not supported")
        names, out = [i for i in node.input if i], node.output[0]
        vals = [imp.val(n) for n in names]
        shape = tuple(np.broadcast_shapes(*(v.shape for v in vals)))
        use_nhwc = (len(shape) == 4 and any(imp.is_nhwc(n) for n in names)
                    and all(v.const is not None or v.nhwc is not None or len(v.shape) == 4 for v in vals))
        # In NHWC, lower-rank constants (e.g. a [C, 1, 1] scale) are lifted to 4-D and transposed.
        args = [(imp.nhwc if use_nhwc else imp.plain)(n) for n in names]
        acc = args[0]
        for k, a in enumerate(args[1:]):
            last = k == len(args) - 2
            acc = imp.b.add_node(op, [acc, a], {}, imp.name_for(out, use_nhwc) if last else f"{out}:partial")
        if len(args) == 1:
            acc = imp.b.add_node("identity", [acc], {}, imp.name_for(out, use_nhwc))
        (imp.set_nhwc if use_nhwc else imp.set_plain)(out, acc)
    return rule


# name, numpy reference, scalar body, ONNX op types imported as it (the first is exported), torch function
_OPS: tuple[tuple[str, Callable[..., np.ndarray], Callable[[Expr, Expr], Expr], tuple[str, ...], str], ...] = (
    ("add", np.add, lambda a, b: a + b, ("Add", "Sum"), "add"),
    ("sub", np.subtract, lambda a, b: a - b, ("Sub",), "sub"),
    ("mul", np.multiply, lambda a, b: a * b, ("Mul",), "mul"),
    ("div", np.divide, lambda a, b: a / b, ("Div",), "div"),
    ("pow", _pow, lambda a, b: te.pow(a, b), ("Pow",), "pow"),
    ("maximum", np.maximum, lambda a, b: te.max(a, b), ("Max",), "maximum"),
    ("minimum", np.minimum, lambda a, b: te.min(a, b), ("Min",), "minimum"),
)

for _name, _ref, _expr, _onnx, _torch_fn in _OPS:
    _rule = _import(_name)
    register_op(OpDef(_name, (2, 2), "broadcast", _infer, "numpy-broadcasting binary arithmetic",
                      reference=_ref, lower=_lower(_expr), export=_export(_onnx[0]), torch=_torch(_torch_fn),
                      onnx={t: _rule for t in _onnx}, expr=_expr))
