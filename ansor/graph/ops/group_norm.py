"""Group normalisation, and instance normalisation as its case of one channel per group: ONNX
``GroupNormalization`` (opset 18: scale and bias per group; opset 21: per channel) and
``InstanceNormalization``; ``torch.nn.functional.group_norm``.

Graph op ``group_norm``: inputs x, scale [C], bias [C] (per channel: a model's per-group values
are repeated over their channels at import); ``axis`` is the channel axis (3 for an NHWC image,
1 for a plain NCHW tensor), axis 0 the batch; every other axis is reduced over, with the
channels of one group. ``y = (x - mean) / sqrt(var + eps) * scale[c] + bias[c]``, the variance
the population one (two passes: the mean first, then the squared deviations).
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
from ..onnx_export import Exporter
from ..op_rules import OpDef, float_input, norm_axis, register_op, same_dtype
from ..te_ops import LowerCtx
from ..torch_peer import Runner, Value


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    x, scale, bias = ts
    float_input(x, "group_norm input")
    same_dtype(ts)
    if x.ndim < 3:
        raise GraphError(f"group_norm: input must have a batch, a channel and spatial axes, got {x}")
    axis = norm_axis(attrs.get("axis", 1), x.ndim, "group_norm axis")
    if axis == 0:
        raise GraphError("group_norm: axis 0 is the batch, not the channels")
    c = x.shape[axis]
    groups = attrs.get("groups")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or c % groups:
        raise GraphError(f"group_norm: groups must be a positive divisor of the {c} channels, got {groups!r}")
    for t, what in ((scale, "scale"), (bias, "bias")):
        if t.shape != (c,):
            raise GraphError(f"group_norm: {what} must have shape [{c}], got {t}")
    return x, {"axis": axis, "groups": groups, "eps": float(attrs.get("eps", 1e-5))}


def _grouped(x: np.ndarray, axis: int, groups: int) -> np.ndarray:
    """x as [N, G, everything else of the group]."""
    moved = np.moveaxis(x, axis, 1)
    return moved.reshape(x.shape[0], groups, -1)


def _reference(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, axis: int, groups: int, eps: float) -> np.ndarray:
    g = _grouped(x.astype(np.float64), axis, groups)
    mean = g.mean(axis=2, keepdims=True)
    var = ((g - mean) ** 2).mean(axis=2, keepdims=True)
    moved_shape = np.moveaxis(x, axis, 1).shape
    y = np.moveaxis(((g - mean) / np.sqrt(var + eps)).reshape(moved_shape), 1, axis)
    shape = [-1 if d == axis else 1 for d in range(x.ndim)]
    return y * scale.astype(np.float64).reshape(shape) + bias.astype(np.float64).reshape(shape)


def _lower(ctx: LowerCtx, node: Any, xs: list[Tensor]) -> Tensor:
    x, scale, bias = xs
    a = node.attrs
    ax, groups, dtype = a["axis"], a["groups"], x.dtype
    cg = x.shape[ax] // groups
    rest = [d for d in range(1, x.ndim) if d != ax]
    inv_n = const(1.0 / (cg * math.prod(x.shape[d] for d in rest)), dtype)

    def index(n: IterVar, g: IterVar, ks: Sequence[IterVar]) -> tuple:
        """x's index at batch n, group g, channel ks[0] of the group and the other axes ks[1:]."""
        full = dict(zip(rest, ks[1:]))
        full[0], full[ax] = n, g * cg + ks[0]
        return tuple(full[d] for d in range(x.ndim))

    def axes() -> list[IterVar]:
        return [te.reduce_axis((0, cg), "kc")] + [te.reduce_axis((0, x.shape[d]), f"k{d}") for d in rest]

    k1 = axes()
    mean = te.compute((x.shape[0], groups), lambda n, g: te.sum(x[index(n, g, k1)] * inv_n, axis=k1),
                      name=ctx.name("gn_mean"), tag="reduce")
    k2 = axes()

    def var_body(n: IterVar, g: IterVar) -> Expr:
        d = x[index(n, g, k2)] - mean[n, g]
        return te.sum(d * d * inv_n, axis=k2)

    var = te.compute((x.shape[0], groups), var_body, name=ctx.name("gn_var"), tag="reduce")
    eps = const(a["eps"], dtype)
    rstd = te.compute((x.shape[0], groups), lambda n, g: te.rsqrt(var[n, g] + eps), name=ctx.name("gn_rstd"),
                      tag="elemwise")

    def out(*i: IterVar) -> Expr:
        n, c = i[0], i[ax]
        g = c // cg
        return (x[i] - mean[n, g]) * rstd[n, g] * scale[c] + bias[c]

    return te.compute(x.shape, out, name=ctx.name("group_norm"), tag="injective")


def _export(e: Exporter, n: Any) -> None:
    a = n.attrs
    x, scale, bias = n.inputs
    shape = e.graph.type_of(x).shape
    image = a["axis"] == 3 and len(shape) == 4  # an NHWC image: ONNX's NCHW form has C at 1
    if image:
        src = e.get_nchw(x)
    elif a["axis"] == 1:
        src = e.get_plain(x)
    else:
        src = e.node("Transpose", [e.get_plain(x)], perm=_to_front(a["axis"], len(shape)))
    c = shape[a["axis"]]
    if a["groups"] == c:
        y = e.node("InstanceNormalization", [src, e.get_plain(scale), e.get_plain(bias)], epsilon=a["eps"])
    else:
        # opset 20's GroupNormalization takes a scale and bias per group (and onnx calls it
        # deprecated): instance-normalise [N, G, rest] instead, then scale and shift per channel
        front = [shape[p] for p in _to_front(a["axis"], len(shape))]
        ones = e.init(np.ones(a["groups"], n.type.dtype), "c")
        zeros = e.init(np.zeros(a["groups"], n.type.dtype), "c")
        grouped = e.node("Reshape", [src, e.init(np.array([shape[0], a["groups"], -1], np.int64), "s")])
        y = e.node("InstanceNormalization", [grouped, ones, zeros], epsilon=a["eps"])
        y = e.node("Reshape", [y, e.init(np.array(front, np.int64), "s")])
        per_channel = e.init(np.array([c] + [1] * (len(shape) - 2), np.int64), "s")
        y = e.node("Mul", [y, e.node("Reshape", [e.get_plain(scale), per_channel])])
        y = e.node("Add", [y, e.node("Reshape", [e.get_plain(bias), per_channel])])
    if image:
        e.nchw[n.name] = y
    elif a["axis"] != 1:
        e.plain[n.name] = e.node("Transpose", [y], perm=[int(p) for p in np.argsort(_to_front(a["axis"], len(shape)))])
    else:
        e.plain[n.name] = y


def _to_front(axis: int, rank: int) -> list[int]:
    """The permutation bringing the channel axis next to the batch."""
    return [0, axis] + [d for d in range(1, rank) if d != axis]


def _torch(r: Runner, node: Any, xs: list[Value]) -> Value:
    a = node.attrs
    x, scale, bias = xs
    if a["axis"] == 3 and x.t.dim() == 4:
        return Value(r.F.group_norm(x.image(), a["groups"], scale.plain(), bias.plain(), a["eps"]), True)
    t = x.plain()
    perm = _to_front(a["axis"], t.dim())
    y = r.F.group_norm(t.permute(*perm), a["groups"], scale.plain(), bias.plain(), a["eps"])
    return Value(y.permute(*[int(p) for p in np.argsort(perm)]))


def _add(imp: Any, node: Any, groups: int, scale: Any, bias: Any, eps: float) -> None:
    src, out = node.input[0], node.output[0]
    if imp.is_nhwc(src):
        y = imp.b.add_node("group_norm", [imp.nhwc(src), scale, bias], {"axis": 3, "groups": groups, "eps": eps},
                           imp.name_for(out, True))
        imp.set_nhwc(out, y)
    else:
        imp.set_plain(out, imp.b.add_node("group_norm", [imp.plain(src), scale, bias],
                                          {"axis": 1, "groups": groups, "eps": eps}, out))


def _check_input(imp: Any, node: Any) -> int:
    shape = imp.val(node.input[0]).shape
    if len(shape) < 3:
        raise imp.err(node, f"the input must be [N, C, spatial...], got {list(shape)}")
    return shape[1]


def _import_instance(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    c = _check_input(imp, node)
    _add(imp, node, c, imp.plain(node.input[1]), imp.plain(node.input[2]), float(attrs.get("epsilon", 1e-5)))


def _import_group(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    c = _check_input(imp, node)
    if "num_groups" not in attrs:
        raise imp.err(node, "required attribute num_groups is missing")
    groups = int(attrs["num_groups"])
    if groups < 1 or c % groups:
        raise imp.err(node, f"num_groups {groups} must divide the {c} channels")
    params = []
    for i, what in ((1, "scale"), (2, "bias")):
        v = imp.val(node.input[i])
        if imp.opset >= 21:
            params.append(imp.plain(node.input[i]))
            continue
        if v.shape != (groups,):
            raise imp.err(node, f"{what} {list(v.shape)} must have one value per group ({groups}) at opset {imp.opset}")
        if v.const is not None:  # per group -> per channel
            params.append(imp.b.constant(np.repeat(v.const, c // groups), name=f"{node.input[i]}:per_channel"))
        else:
            col = imp.b.reshape(imp.plain(node.input[i]), (groups, 1), name=f"{node.output[0]}:{what}_col")
            spread = imp.b.mul(col, np.ones((groups, c // groups), v.dtype), name=f"{node.output[0]}:{what}_spread")
            params.append(imp.b.reshape(spread, (c,), name=f"{node.output[0]}:{what}"))
    _add(imp, node, groups, params[0], params[1], float(attrs.get("epsilon", 1e-5)))


GROUP_NORM = register_op(OpDef(
    "group_norm", (3, 3), "opaque", _infer,
    "group normalisation over the channel axis and all non-batch axes; instance norm is groups == C",
    reference=_reference, lower=_lower, export=_export, torch=_torch,
    onnx={"GroupNormalization": _import_group, "InstanceNormalization": _import_instance}))
