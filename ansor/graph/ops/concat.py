"""``concat``: join inputs along ``axis`` (ONNX ``Concat``, ``torch.cat``).

Images joined on any axis stay NHWC on import (the axis is mapped), and NCHW in the export and
the PyTorch peer; the lowering reads input j only where the output index lies in its range.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, IterVar
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import Exporter
from ..onnx_import_kit import NCHW_AXIS_IN_NHWC, axis_in
from ..op_rules import OpDef, norm_axis, register_op, same_dtype
from ..te_ops import LowerCtx
from ..torch_peer import Runner, Value

NHWC_AXIS_TO_NCHW = (0, 2, 3, 1)  # IR axis a of an NHWC image is axis NHWC_AXIS_TO_NCHW[a] of its NCHW form


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    first = ts[0]
    axis = norm_axis(attrs.get("axis", 0), first.ndim, "concat axis")
    dtype = same_dtype(ts)
    for t in ts[1:]:
        if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
            raise GraphError(f"concat: inputs {', '.join(map(str, ts))} differ outside axis {axis}")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in ts)
    return TensorType(tuple(shape), dtype), {"axis": axis}


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    ax = node.attrs["axis"]
    offsets = np.cumsum([0] + [t.shape[ax] for t in xs]).tolist()

    def body(*i: IterVar) -> Expr:
        v = i[ax]
        # Innermost the last input; each earlier input j wraps it as ``v < end_j ? x_j : rest``,
        # so input j is read only where v lies in [offsets[j], offsets[j + 1]).
        out: Expr | None = None
        for t, off, end in reversed(list(zip(xs, offsets, offsets[1:]))):
            val = t[tuple(v - off if d == ax else u for d, u in enumerate(i))] if off else t[i]
            out = val if out is None else te.if_then_else(v < end, val, out)
        assert out is not None
        return out

    return te.compute(node.type.shape, body, name=ctx.name("concat"), tag="injective")


def _export(e: Exporter, n: Node) -> None:
    axis = n.attrs["axis"]
    if len(n.type.shape) == 4 and any(e.is_image(v) for v in n.inputs):
        e.nchw[n.name] = e.node("Concat", [e.get_nchw(v) for v in n.inputs], axis=NHWC_AXIS_TO_NCHW[axis])
    else:
        e.plain[n.name] = e.node("Concat", [e.get_plain(v) for v in n.inputs], axis=axis)


def _torch(r: Runner, node: Node, xs: list[Value]) -> Value:
    axis = node.attrs["axis"]
    if len(node.type.shape) == 4 and any(v.nchw for v in xs):
        return Value(r.torch.cat([v.image() for v in xs], dim=NHWC_AXIS_TO_NCHW[axis]), True)
    return Value(r.torch.cat([v.plain() for v in xs], dim=axis))


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    names = [i for i in node.input if i]
    vals = [imp.val(n) for n in names]
    rank = len(vals[0].shape)
    if "axis" not in attrs:
        raise imp.err(node, "required attribute axis is missing")
    axis = axis_in(attrs["axis"], rank, "Concat axis")
    out = node.output[0]
    if rank == 4 and any(imp.is_nhwc(n) for n in names):
        y = imp.b.concat([imp.nhwc(n) for n in names], axis=NCHW_AXIS_IN_NHWC[axis], name=imp.name_for(out, True))
        imp.set_nhwc(out, y)
    else:
        imp.set_plain(out, imp.b.concat([imp.plain(n) for n in names], axis=axis, name=out))


CONCAT = register_op(OpDef(
    "concat", (1, 1 << 20), "injective", _infer, "join the inputs along axis",
    reference=lambda *xs, axis: np.concatenate(xs, axis=axis), lower=_lower, export=_export, torch=_torch,
    onnx={"Concat": _import}))
