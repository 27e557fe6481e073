"""``pad``: ``before``/``after`` elements per axis, filled by ``mode``: ``constant`` (with
``value``), ``reflect`` (mirrored on the first and last element, which is not repeated; at most
size - 1 per side, as onnxruntime allows) or ``edge`` (the first and last element repeated).
ONNX ``Pad``: pads as an attribute before opset 11 and as constant inputs from it on, with the
optional ``axes`` of opset 18; opset 19's ``wrap`` mode is refused.

The reflect and edge lowerings read the input at a clamped or mirrored index (integer min/max on
the output index), so they fuse like any injective op; the PyTorch peer gathers the same indices
with ``index_select`` (``torch.nn.functional.pad`` reflects only the last few axes).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compute import ops, te
from compute.expr import Expr, IterVar, const
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import Exporter, plain_export
from ..onnx_import_kit import attr_str, axis_in
from ..op_rules import OpDef, ints_attr, register_op
from ..te_ops import LowerCtx
from ..torch_peer import plain_torch

MODES = ("constant", "reflect", "edge")


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    before = ints_attr(attrs.get("before", 0), x.ndim, "pad before")
    after = ints_attr(attrs.get("after", 0), x.ndim, "pad after")
    mode = attrs.get("mode", "constant")
    if mode not in MODES:
        raise GraphError(f"pad: mode must be one of {', '.join(MODES)}, got {mode!r}")
    for d, (n, b, a) in enumerate(zip(x.shape, before, after)):
        if mode == "reflect" and max(b, a) > n - 1:
            raise GraphError(f"pad: reflect pads ({b}, {a}) of axis {d} must be at most {n - 1} "
                             f"(the axis has {n} element(s))")
        if mode == "edge" and n == 0 and b + a:
            raise GraphError(f"pad: edge padding of axis {d}, which is empty")
    shape = tuple(d + a + b for d, a, b in zip(x.shape, before, after))
    return TensorType(shape, x.dtype), {"before": before, "after": after, "value": float(attrs.get("value", 0.0)),
                                        "mode": mode}


def source_indices(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """The input index each output index of a padded axis of ``n`` elements reads, in
    ``reflect`` or ``edge`` mode (what the lowering computes per element)."""
    j = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(j, 0, n - 1)
    m = np.abs(j)
    return np.minimum(m, 2 * (n - 1) - m)


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    a = node.attrs
    x = xs[0]
    if a["mode"] == "constant":
        return ops.pad(x, a["before"], a["after"], a["value"], name=ctx.name("pad"))
    mode = a["mode"]

    def axis_index(i: IterVar, n: int, b: int, e: int) -> Expr:
        if not b and not e:
            return i
        j = i - const(b, i.dtype) if b else i
        if mode == "edge":
            return te.min(te.max(j, const(0, i.dtype)), const(n - 1, i.dtype))
        m = te.max(j, -j)  # |j|; past the end the mirror of j is 2 * (n - 1) - j
        return te.min(m, const(2 * (n - 1), i.dtype) - m)

    return te.compute(node.type.shape,
                      lambda *i: x[tuple(axis_index(v, n, b, e) for v, n, b, e in zip(i, x.shape, a["before"], a["after"]))],
                      name=ctx.name("pad"), tag="injective")


def _export(e: Exporter, n: Node, xs: list[str]) -> str:
    a = n.attrs
    pads = e.ints(list(a["before"]) + list(a["after"]))
    if a["mode"] != "constant":
        return e.node("Pad", [xs[0], pads], mode=a["mode"])
    return e.node("Pad", [xs[0], pads, e.init(np.array(a["value"], n.type.dtype), "c")])


def _torch(r: Any, node: Node, x: Any) -> Any:
    a = node.attrs
    if a["mode"] != "constant":
        for d, (n, b, e) in enumerate(zip(x.shape, a["before"], a["after"])):
            if b or e:
                x = x.index_select(d, r.torch.from_numpy(source_indices(n, b, e, a["mode"])))
        return x
    spec: list[int] = []
    for b, e in zip(reversed(a["before"]), reversed(a["after"])):
        spec += [b, e]
    return r.F.pad(x, spec, value=a["value"])


def _reference(x: np.ndarray, before, after, value: float, mode: str) -> np.ndarray:
    pads = list(zip(before, after))
    return np.pad(x, pads, constant_values=value) if mode == "constant" else np.pad(x, pads, mode=mode)


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    mode = attr_str(attrs.get("mode", b"constant"))
    if mode not in MODES:
        raise imp.err(node, f"Pad mode {mode!r} is not supported (only {', '.join(MODES)})")
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
    attrs_out = {"before": pads[:rank], "after": pads[rank:], "value": value if mode == "constant" else 0.0,
                 "mode": mode}
    imp.set_plain(out, imp.b.add_node("pad", [imp.plain(node.input[0])], attrs_out, out))


PAD = register_op(OpDef(
    "pad", (1, 1), "injective", _infer, "padding before/after per axis: constant, reflect or edge",
    reference=_reference, lower=_lower, export=plain_export(_export), torch=plain_torch(_torch),
    onnx={"Pad": _import}))
