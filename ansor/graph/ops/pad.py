"""``pad``: constant padding, ``before``/``after`` elements per axis filled with ``value`` (ONNX
``Pad`` in constant mode: pads as an attribute before opset 11 and as constant inputs from it
on, with the optional ``axes`` of opset 18).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compute import ops
from compute.tensor import Tensor

from ..ir_types import Node, TensorType
from ..onnx_export import Exporter, plain_export
from ..onnx_import_kit import attr_str, axis_in
from ..op_rules import OpDef, ints_attr, register_op
from ..te_ops import LowerCtx
from ..torch_peer import plain_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    before = ints_attr(attrs.get("before", 0), x.ndim, "pad before")
    after = ints_attr(attrs.get("after", 0), x.ndim, "pad after")
    shape = tuple(d + a + b for d, a, b in zip(x.shape, before, after))
    return TensorType(shape, x.dtype), {"before": before, "after": after, "value": float(attrs.get("value", 0.0))}


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    a = node.attrs
    return ops.pad(xs[0], a["before"], a["after"], a["value"], name=ctx.name("pad"))


def _export(e: Exporter, n: Node, xs: list[str]) -> str:
    a = n.attrs
    value = e.init(np.array(a["value"], n.type.dtype), "c")
    return e.node("Pad", [xs[0], e.ints(list(a["before"]) + list(a["after"])), value])


def _torch(r: Any, node: Node, x: Any) -> Any:
    before, after = node.attrs["before"], node.attrs["after"]
    spec: list[int] = []
    for b, e in zip(reversed(before), reversed(after)):
        spec += [b, e]
    return r.F.pad(x, spec, value=node.attrs["value"])


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    mode = attrs.get("mode", b"constant")
    if attr_str(mode) != "constant":
        raise imp.err(node, f"only constant padding is supported, got mode {mode!r}")
    rank = len(imp.val(node.input[0]).shape)
    if imp.opset < 11:
        pads, value = list(attrs["pads"]), float(attrs.get("value", 0.0))
    else:
        pads = [int(p) for p in imp.const_of(node, 1, "pads").reshape(-1)]
        cv = imp.const_of(node, 2, "constant_value")
        value = 0.0 if cv is None or cv.size == 0 else float(cv.reshape(-1)[0])
        if len(node.input) > 3 and node.input[3]:
            axes = [axis_in(a, rank, "Pad axis") for a in imp.const_of(node, 3, "axes").reshape(-1)]
            full = [0] * (2 * rank)
            for k, a in enumerate(axes):
                full[a], full[rank + a] = pads[k], pads[len(axes) + k]
            pads = full
    if any(p < 0 for p in pads):
        raise imp.err(node, f"negative pads (cropping) are not supported: {pads}")
    out = node.output[0]
    imp.set_plain(out, imp.b.pad(imp.plain(node.input[0]), pads[:rank], pads[rank:], value, name=out))


PAD = register_op(OpDef(
    "pad", (1, 1), "injective", _infer, "constant padding: before/after per axis",
    reference=lambda x, before, after, value: np.pad(x, list(zip(before, after)), constant_values=value),
    lower=_lower, export=plain_export(_export), torch=plain_torch(_torch), onnx={"Pad": _import}))
