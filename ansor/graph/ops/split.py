"""One part of a split: ``x[..., begin:end, ...]`` along one axis. ONNX ``Split`` (one value per
output) imports as one ``split`` node per output.

A graph node computes one value, so an N-way ``Split`` is N nodes, each reading its own part; it
is its own op rather than a general ``slice`` so that this module holds everything Split needs
(its import rule, which computes the parts' sizes, and the part's lowering, export and peer).
Split sizes come from the ``split`` attribute (opset < 13) or input (opset >= 13), else from
``num_outputs`` (opset 18: parts of ceil(n / num_outputs), the last one smaller), else equal
parts, one per output. A channel split of an NHWC image stays NHWC.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter
from ..op_rules import OpDef, norm_axis, register_op
from ..te_ops import LowerCtx
from ..torch_peer import Runner, Value

_NCHW_AXIS_IN_NHWC = (0, 3, 1, 2)  # ONNX (NCHW) axis -> axis of the NHWC image


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    axis = norm_axis(attrs.get("axis", 0), x.ndim, "split axis")
    begin, end = attrs.get("begin"), attrs.get("end")
    if (not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (begin, end))
            or not 0 <= begin <= end <= x.shape[axis]):
        raise GraphError(f"split: part [{begin!r}, {end!r}) is not inside axis {axis} of {x}")
    shape = list(x.shape)
    shape[axis] = int(end) - int(begin)
    return TensorType(tuple(shape), x.dtype), {"axis": axis, "begin": int(begin), "end": int(end)}


def _reference(x: np.ndarray, axis: int, begin: int, end: int) -> np.ndarray:
    return x[(slice(None),) * axis + (slice(begin, end),)]


def _lower(ctx: LowerCtx, node: Any, xs: list[Any]) -> Any:
    x = xs[0]
    axis, begin = node.attrs["axis"], node.attrs["begin"]
    return te.compute(node.type.shape, lambda *i: x[(*i[:axis], i[axis] + begin, *i[axis + 1:])],
                      name=ctx.name("split"), tag="injective")


def _export(e: Exporter, node: Any) -> None:
    a = node.attrs
    x = node.inputs[0]
    image = e.is_image(x)
    src = e.nchw[x] if image else e.get_plain(x)
    axis = _NCHW_AXIS_IN_NHWC.index(a["axis"]) if image else a["axis"]
    ints = [e.init(np.array([v], np.int64), "s") for v in (a["begin"], a["end"], axis)]
    out = e.node("Slice", [src, *ints])
    if image:
        e.nchw[node.name] = out
    else:
        e.plain[node.name] = out


def _torch(r: Runner, node: Any, xs: list[Value]) -> Value:
    a = node.attrs
    v = xs[0]
    if v.nchw:
        dim = (0, 2, 3, 1)[a["axis"]]  # IR (NHWC) axis -> NCHW-logical dimension
        return Value(v.t.narrow(dim, a["begin"], a["end"] - a["begin"]), True)
    return Value(v.t.narrow(a["axis"], a["begin"], a["end"] - a["begin"]))


def split_sizes(n: int, outputs: int, given: Sequence[int] | None, num_outputs: int | None) -> list[int]:
    """The parts' sizes along an axis of ``n``: ``given``, else ``num_outputs`` parts of
    ceil(n / num_outputs) (the last smaller), else ``outputs`` equal parts."""
    if given is not None:
        sizes = [int(s) for s in given]
        if len(sizes) != outputs or any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ValueError(f"split sizes {sizes} must be {outputs} non-negative sizes summing to {n}")
        return sizes
    if num_outputs is not None:
        if num_outputs != outputs or num_outputs < 1 or num_outputs > n:
            raise ValueError(f"num_outputs {num_outputs} must equal the number of outputs ({outputs}) "
                             f"and be in [1, {n}]")
        chunk = math.ceil(n / num_outputs)
        sizes = [min(chunk, n - k * chunk) for k in range(num_outputs)]
        if sizes[-1] <= 0:
            raise ValueError(f"num_outputs {num_outputs} cannot split {n} into parts of {chunk}")
        return sizes
    if n % outputs:
        raise ValueError(f"axis of size {n} does not split into {outputs} equal parts (give split sizes)")
    return [n // outputs] * outputs


def onnx_split(imp: Any, node: Any, attrs: dict[str, Any], shape: Sequence[int]) -> tuple[int, list[int]]:
    """An ONNX Split node's axis and parts' sizes (the import rule's and the constant fold (frontend/onnx_fold.py)'s)."""
    axis = norm_axis(attrs.get("axis", 0), len(shape), "Split axis")
    if imp.opset < 13:
        given = attrs.get("split")
    else:
        arr = imp.const_of(node, 1, "split")
        given = None if arr is None else arr.reshape(-1).tolist()
    num = attrs.get("num_outputs") if imp.opset >= 18 else None
    return axis, split_sizes(shape[axis], len(node.output), given, num)


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    src = node.input[0]
    shape = imp.val(src).shape
    axis, sizes = onnx_split(imp, node, attrs, shape)
    nhwc = len(shape) == 4 and imp.is_nhwc(src)
    x = imp.nhwc(src) if nhwc else imp.plain(src)
    ir_axis = _NCHW_AXIS_IN_NHWC[axis] if nhwc else axis
    begin = 0
    for out, size in zip(node.output, sizes):
        if out:
            var = imp.b.add_node("split", [x], {"axis": ir_axis, "begin": begin, "end": begin + size},
                                 imp.name_for(out, nhwc))
            (imp.set_nhwc if nhwc else imp.set_plain)(out, var)
        begin += size


SPLIT = register_op(OpDef(
    "split", (1, 1), "injective", _infer, "x[..., begin:end, ...] along axis: one part of a split",
    reference=_reference, lower=_lower, export=_export, torch=_torch, onnx={"Split": _import}))
