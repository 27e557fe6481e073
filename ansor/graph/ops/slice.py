"""``slice``: ``x[begin:end:step]`` per axis, positive steps (ONNX ``Slice``: attributes before
opset 10, constant inputs from it on; the bounds are clamped at import).
"""
from __future__ import annotations

from typing import Any

from compute import te
from compute.tensor import Tensor

from ..ir_types import Node, TensorType
from ..onnx_export import Exporter, plain_export
from ..onnx_import_kit import slice_params
from ..op_rules import OpDef, ints_attr, register_op
from ..te_ops import LowerCtx
from ..torch_peer import plain_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    begin = ints_attr(attrs.get("begin"), x.ndim, "slice begin")
    end = ints_attr(attrs.get("end"), x.ndim, "slice end")
    step = ints_attr(attrs.get("step", 1), x.ndim, "slice step", 1)
    shape = tuple(len(range(*slice(b, e, s).indices(d))) for b, e, s, d in zip(begin, end, step, x.shape))
    return TensorType(shape, x.dtype), {"begin": begin, "end": end, "step": step}


def _slices(a: dict[str, Any]) -> tuple[slice, ...]:
    return tuple(slice(b, e, s) for b, e, s in zip(a["begin"], a["end"], a["step"]))


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    a = node.attrs
    # Normalise begin per axis as python's slice does, so the index is begin + i * step.
    starts = [range(*slice(b, e, s).indices(d)).start for b, e, s, d in zip(a["begin"], a["end"], a["step"], x.shape)]
    return te.compute(node.type.shape, lambda *i: x[tuple(v * s + b for v, s, b in zip(i, a["step"], starts))],
                      name=ctx.name("slice"), tag="injective")


def _export(e: Exporter, n: Node, xs: list[str]) -> str:
    a = n.attrs
    return e.node("Slice", [xs[0], e.ints(a["begin"]), e.ints(a["end"]), e.ints(range(len(a["begin"]))),
                            e.ints(a["step"])])


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    begin, end, step = slice_params(imp, node, attrs, imp.val(node.input[0]).shape)
    out = node.output[0]
    imp.set_plain(out, imp.b.add_node("slice", [imp.plain(node.input[0])],
                                      {"begin": begin, "end": end, "step": step}, out))


SLICE = register_op(OpDef(
    "slice", (1, 1), "injective", _infer, "x[begin:end:step] per axis (positive steps)",
    reference=lambda x, begin, end, step: x[_slices({"begin": begin, "end": end, "step": step})],
    lower=_lower, export=plain_export(_export), torch=plain_torch(lambda r, n, x: x[_slices(n.attrs)]),
    onnx={"Slice": _import}))
