"""Reductions over a set of axes: ONNX ``ReduceSum``, ``ReduceMax``, ``ReduceMin``, ``ReduceProd``,
``ReduceL1``, ``ReduceL2``, ``ReduceSumSquare`` and ``ReduceLogSumExp`` as one graph op ``reduce``
whose ``kind`` says which (``ReduceMean`` is its own op, ``reduce_mean``).

Attributes: ``kind``, ``axes`` (sorted, distinct) and ``keepdims``. Axes come from the ``axes``
input (ReduceSum from opset 13, the others from 18) or attribute (before); no axes means all of
them, or with ``noop_with_empty_axes`` the input unchanged. A reduction of an NHWC image that
keeps its dimensions stays NHWC (its axes mapped), so a channel max between convolutions adds
no transposes.

Log-sum-exp subtracts the maximum first (as onnxruntime does), so large inputs do not overflow.
The compute library has no product reducer: a product multiplies pairs of the flattened reduced
elements, halving their number per stage (log2 stages, each an elementwise product).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, IterVar, const
from compute.tensor import Tensor

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter, plain_export
from ..op_rules import OpDef, norm_axis, register_op
from ..te_ops import LowerCtx
from ..torch_peer import Runner, plain_torch

ONNX_KIND = {"ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod",
             "ReduceL1": "l1", "ReduceL2": "l2", "ReduceSumSquare": "sum_square", "ReduceLogSumExp": "log_sum_exp"}
KIND_ONNX = {k: op for op, k in ONNX_KIND.items()}
_INT_KINDS = ("sum", "max", "min", "prod")
_NCHW_AXIS_IN_NHWC = (0, 3, 1, 2)


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    kind = attrs.get("kind")
    if kind not in KIND_ONNX:
        raise GraphError(f"reduce: kind must be one of {', '.join(KIND_ONNX)}; got {kind!r}")
    if not x.dtype.startswith("float") and (kind not in _INT_KINDS or x.dtype == "bool"):
        raise GraphError(f"reduce {kind}: input must be a float tensor{' or int' if kind in _INT_KINDS else ''}, "
                         f"got {x}")
    given = attrs.get("axes")
    given = list(range(x.ndim)) if given is None else list(given)
    axes = tuple(sorted({norm_axis(a, x.ndim, f"reduce {kind} axis") for a in given}))
    if len(axes) != len(given) or not axes:
        raise GraphError(f"reduce {kind}: axes {given} must be distinct and not empty")
    keep = bool(attrs.get("keepdims", True))
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
    return TensorType(shape, x.dtype), {"kind": kind, "axes": axes, "keepdims": keep}


def _reference(x: np.ndarray, kind: str, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    if kind in ("max", "min"):
        return (np.max if kind == "max" else np.min)(x, axis=axes, keepdims=keepdims)
    wide = x.astype(np.float64) if x.dtype.kind == "f" else x
    if kind == "prod":
        return np.prod(wide, axis=axes, keepdims=keepdims)
    if kind == "log_sum_exp":
        m = np.max(wide, axis=axes, keepdims=True)
        out = np.log(np.sum(np.exp(wide - m), axis=axes, keepdims=True)) + m
        return out if keepdims else np.squeeze(out, axis=axes)
    term = {"sum": wide, "l1": np.abs(wide), "l2": wide * wide, "sum_square": wide * wide}[kind]
    s = np.sum(term, axis=axes, keepdims=keepdims)
    return np.sqrt(s) if kind == "l2" else s


def _lower(ctx: LowerCtx, node: Any, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    a = node.attrs
    kind, axes, keep = a["kind"], list(a["axes"]), a["keepdims"]
    kept = [d for d in range(x.ndim) if d not in axes]
    name = ctx.name(f"reduce_{kind}")

    def index(i: Sequence[Any], ks: Sequence[Any]) -> tuple:
        """x's index from an output index ``i`` and values ``ks`` of the reduced axes."""
        full: dict[int, Any] = dict(zip(axes, ks))
        full.update(zip(kept, (i[d] for d in kept) if keep else i))
        return tuple(full[d] for d in range(x.ndim))

    def reduced(body: Any, reducer: Any, suffix: str = "") -> Tensor:
        ks = [te.reduce_axis((0, x.shape[d]), f"k{d}") for d in axes]
        return te.compute(node.type.shape, lambda *i: reducer(body(x[index(i, ks)]), axis=ks),
                          name=name + suffix, tag="reduce")

    if kind == "prod":
        return _product(x, node, axes, kept, name)
    if kind in ("max", "min"):
        return reduced(lambda v: v, te.max if kind == "max" else te.min)
    if kind == "log_sum_exp":
        mx = reduced(lambda v: v, te.max, "_max")
        ks = [te.reduce_axis((0, x.shape[d]), f"k{d}") for d in axes]
        s = te.compute(node.type.shape, lambda *i: te.sum(te.exp(x[index(i, ks)] - mx[i]), axis=ks),
                       name=name + "_sum", tag="reduce")
        return te.compute(node.type.shape, lambda *i: te.log(s[i]) + mx[i], name=name, tag="elemwise")
    term = {"sum": lambda v: v, "l1": te.abs, "l2": lambda v: v * v, "sum_square": lambda v: v * v}[kind]
    s = reduced(term, te.sum, "_sum" if kind == "l2" else "")
    if kind == "l2":
        return te.compute(node.type.shape, lambda *i: te.sqrt(s[i]), name=name, tag="elemwise")
    return s


def _product(x: Tensor, node: Any, axes: list[int], kept: list[int], name: str) -> Tensor:
    """The product of the reduced elements: flattened to the last axis, then pairs multiplied
    until one is left (an odd one out passes through)."""
    ext = [x.shape[d] for d in axes]
    kept_shape = tuple(x.shape[d] for d in kept)
    count = math.prod(ext)

    def flat(*i: IterVar) -> Expr:
        r, full = i[-1], dict(zip(kept, i[:-1]))
        for d, n in reversed(list(zip(axes, ext))):  # row-major: the last reduced axis varies fastest
            full[d], r = r % n, r // n
        return x[tuple(full[d] for d in range(x.ndim))]

    p = te.compute((*kept_shape, count), flat, name=f"{name}_flat", tag="injective")
    stage = 0
    while count > 1:
        half, prev, n = (count + 1) // 2, p, count

        def pairs(*i: IterVar, prev: Tensor = prev, n: int = n) -> Expr:
            j = i[-1]
            left = prev[(*i[:-1], j * 2)]
            right = prev[(*i[:-1], te.min(j * 2 + 1, const(n - 1, "int32")))]
            return te.if_then_else(j * 2 + 1 < n, left * right, left) if n % 2 else left * right

        stage += 1
        p = te.compute((*kept_shape, half), pairs, name=f"{name}_pairs{stage}", tag="injective")
        count = half
    keep = node.attrs["keepdims"]
    out = p

    def final(*i: IterVar) -> Expr:
        return out[(*(i[d] for d in kept), const(0, "int32")) if keep else (*i, const(0, "int32"))]

    return te.compute(node.type.shape, final, name=name, tag="injective")


def _torch_reduce(r: Runner, node: Any, x: Any) -> Any:
    a = node.attrs
    kind, axes, keep = a["kind"], list(a["axes"]), a["keepdims"]
    torch = r.torch
    if kind == "prod":
        for d in reversed(axes):
            x = x.prod(d, keepdim=True)
        return x.reshape(node.type.shape)
    if kind == "log_sum_exp":
        return torch.logsumexp(x, dim=axes, keepdim=keep)
    if kind in ("max", "min"):
        return (torch.amax if kind == "max" else torch.amin)(x, dim=axes, keepdim=keep)
    term = {"sum": x, "l1": x.abs(), "l2": x * x, "sum_square": x * x}[kind]
    s = term.sum(dim=axes, keepdim=keep)
    return torch.sqrt(s) if kind == "l2" else s


def _export(e: Exporter, n: Any, xs: list[str]) -> str:
    a = n.attrs
    return e.node(KIND_ONNX[a["kind"]], [xs[0], e.init(np.array(a["axes"], np.int64), "s")],
                  keepdims=int(a["keepdims"]))


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    since = 13 if node.op_type == "ReduceSum" else 18
    if imp.opset < since:
        axes = list(attrs["axes"]) if "axes" in attrs else None
    else:
        arr = imp.const_of(node, 1, "axes")
        axes = None if arr is None else [int(v) for v in arr.reshape(-1)]
    src, out = node.input[0], node.output[0]
    if not axes:
        if attrs.get("noop_with_empty_axes", 0) and imp.opset >= since:
            imp.layout_preserving(node, "identity", {})
            return
        axes = None
    keep = bool(attrs.get("keepdims", 1))
    kind = ONNX_KIND[node.op_type]
    rank = len(imp.val(src).shape)
    if imp.is_nhwc(src) and keep:
        # an NHWC image keeps its layout: the same reduction over the mapped axes
        mapped = None if axes is None else [_NCHW_AXIS_IN_NHWC[norm_axis(d, rank, f"{node.op_type} axis")]
                                            for d in axes]
        y = imp.b.add_node("reduce", [imp.nhwc(src)], {"kind": kind, "axes": mapped, "keepdims": True},
                           imp.name_for(out, True))
        imp.set_nhwc(out, y)
    else:
        imp.set_plain(out, imp.b.add_node("reduce", [imp.plain(src)], {"kind": kind, "axes": axes, "keepdims": keep},
                                          out))


REDUCE = register_op(OpDef(
    "reduce", (1, 1), "reduce", _infer,
    "sum, max, min, prod, l1, l2, sum_square or log_sum_exp over axes (kind attribute)",
    reference=_reference, lower=_lower, export=plain_export(_export), torch=plain_torch(_torch_reduce),
    onnx={op: _import for op in ONNX_KIND}))
