"""The 2-D pools of NHWC images: ``max_pool2d``, ``avg_pool2d`` (kernel, strides, (top, left,
bottom, right) padding, ceil mode; ``count_include_pad`` decides whether padding counts in the
mean) and ``global_avg_pool`` (``[N, 1, 1, C]``): ONNX ``MaxPool``, ``AveragePool``,
``GlobalAveragePool``.

Ceil mode may need windows that run past the bottom/right padding: that overhang is padded too
but never counted (the last window must start inside the data). An average pool's divisor per
output position is a small constant derived at lowering time (``ctx.extra``). PyTorch pads
symmetrically only: the peer pads by hand where the model does not.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from compute import te
from compute.expr import const
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import Exporter
from ..onnx_import_kit import spatial_pads
from ..op_rules import OpDef, ints_attr, register_op
from ..te_ops import LowerCtx, padded
from ..torch_peer import Runner, Value
from .conv2d import symmetric_padding, tap_window


# ---- type rules -----------------------------------------------------------------------------------

def _pool_attrs(op: str, x: TensorType, attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    if x.ndim != 4:
        raise GraphError(f"{op}: input must be 4-D NHWC, got {x}")
    ks = ints_attr(attrs.get("kernel"), 2, f"{op} kernel", 1)
    strides = ints_attr(attrs.get("strides", 1), 2, f"{op} strides", 1)
    pad = ints_attr(attrs.get("padding", 0), 4, f"{op} padding (top, left, bottom, right)")
    ceil_mode = bool(attrs.get("ceil_mode", False))
    out = []
    for size, k, s, p0, p1, axis in ((x.shape[1], ks[0], strides[0], pad[0], pad[2], "H"),
                                     (x.shape[2], ks[1], strides[1], pad[1], pad[3], "W")):
        span = size + p0 + p1 - k
        if span < 0:
            raise GraphError(f"{op}: kernel {k} exceeds the padded input extent {size + p0 + p1} along {axis}")
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + p0:  # the last window must start inside the data
            o -= 1
        out.append(o)
    return (TensorType((x.shape[0], out[0], out[1], x.shape[3]), x.dtype),
            {"kernel": ks, "strides": strides, "padding": pad, "ceil_mode": ceil_mode})


def _infer_max(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    return _pool_attrs("max_pool2d", ts[0], attrs)


def _infer_avg(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    out, a = _pool_attrs("avg_pool2d", ts[0], attrs)
    a["count_include_pad"] = bool(attrs.get("count_include_pad", False))
    return out, a


def _infer_global(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    if x.ndim != 4:
        raise GraphError(f"global_avg_pool: input must be 4-D NHWC, got {x}")
    return TensorType((x.shape[0], 1, 1, x.shape[3]), x.dtype), {}


# ---- numpy references -----------------------------------------------------------------------------

def _geometry(x: np.ndarray, kernel, strides, padding, ceil_mode):
    _, h, w, _ = x.shape
    t, l, b, r = padding
    outs = []
    for size, k, s, p0, p1 in ((h, kernel[0], strides[0], t, b), (w, kernel[1], strides[1], l, r)):
        span = size + p0 + p1 - k
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + p0:
            o -= 1
        outs.append(o)
    # ceil mode may need windows that run past the bottom/right padding: pad more (never counted).
    extra_b = max(0, (outs[0] - 1) * strides[0] + kernel[0] - (h + t + b))
    extra_r = max(0, (outs[1] - 1) * strides[1] + kernel[1] - (w + l + r))
    return outs, ((0, 0), (t, b + extra_b), (l, r + extra_r), (0, 0)), (extra_b, extra_r)


def _ref_max(x, kernel, strides, padding, ceil_mode) -> np.ndarray:
    (oh, ow), pads, _ = _geometry(x, kernel, strides, padding, ceil_mode)
    xp = np.pad(x, pads, constant_values=-np.inf) if any(p for pp in pads for p in pp) else x
    out = None
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            win = tap_window(xp, ky, kx, oh, ow, strides, (1, 1))
            out = win.copy() if out is None else np.maximum(out, win)
    return out


def _ref_avg(x, kernel, strides, padding, ceil_mode, count_include_pad) -> np.ndarray:
    (oh, ow), pads, (eb, er) = _geometry(x, kernel, strides, padding, ceil_mode)
    xp = np.pad(x.astype(np.float64), pads)
    # The divisor counts real pixels (and, with count_include_pad, the declared padding, but
    # never the extra ceil-mode overhang), computed by pooling a mask the same way.
    mask = np.zeros((1, *xp.shape[1:3], 1))
    t, l, b, r = padding
    if count_include_pad:
        mask[:, :xp.shape[1] - eb, :xp.shape[2] - er] = 1
    else:
        mask[:, t:t + x.shape[1], l:l + x.shape[2]] = 1
    total = np.zeros((x.shape[0], oh, ow, x.shape[3]))
    count = np.zeros((1, oh, ow, 1))
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            total += tap_window(xp, ky, kx, oh, ow, strides, (1, 1))
            count += tap_window(mask, ky, kx, oh, ow, strides, (1, 1))
    return total / count


# ---- lowerings ------------------------------------------------------------------------------------

def _pool_pads(x: Tensor, node: Node) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Padding of the NHWC input, with the extra bottom/right overhang ceil mode needs."""
    _, oh, ow, _ = node.type.shape
    (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["strides"]
    t, l, b, r = node.attrs["padding"]
    eb = max(0, (oh - 1) * sh + kh - (x.shape[1] + t + b))
    er = max(0, (ow - 1) * sw + kw - (x.shape[2] + l + r))
    return [(0, 0), (t, b + eb), (l, r + er), (0, 0)], (eb, er)


def _lower_max(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    pads, _ = _pool_pads(x, node)
    src = padded(ctx, x, pads, te.min_value(x.dtype))
    (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["strides"]
    rh, rw = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")
    return te.compute(node.type.shape, lambda n, h, w, c: te.max(src[n, h * sh + rh, w * sw + rw, c], axis=[rh, rw]),
                      name=ctx.name("max_pool2d"), tag="pool")


def _lower_avg(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    pads, (eb, er) = _pool_pads(x, node)
    src = padded(ctx, x, pads, 0.0)
    (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["strides"]
    _, oh, ow, _ = node.type.shape
    # The divisor per output position (real pixels, plus declared padding with
    # count_include_pad, never the ceil-mode overhang): the reference's mask, pooled once here.
    hp, wp = x.shape[1] + pads[1][0] + pads[1][1], x.shape[2] + pads[2][0] + pads[2][1]
    mask = np.zeros((hp, wp))
    t, l, _, _ = node.attrs["padding"]
    if node.attrs["count_include_pad"]:
        mask[:hp - eb, :wp - er] = 1
    else:
        mask[t:t + x.shape[1], l:l + x.shape[2]] = 1
    count = np.zeros((oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            count += mask[ky:ky + (oh - 1) * sh + 1:sh, kx:kx + (ow - 1) * sw + 1:sw]
    inv = ctx.extra((1.0 / count).astype(x.dtype))
    rh, rw = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")
    total = te.compute(node.type.shape, lambda n, h, w, c: te.sum(src[n, h * sh + rh, w * sw + rw, c], axis=[rh, rw]),
                       name=ctx.name("pool_sum"), tag="pool")
    return te.compute(node.type.shape, lambda n, h, w, c: total[n, h, w, c] * inv[h, w],
                      name=ctx.name("avg_pool2d"), tag="elemwise")


def _lower_global(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    rh, rw = te.reduce_axis((0, x.shape[1]), "rh"), te.reduce_axis((0, x.shape[2]), "rw")
    inv = const(1.0 / (x.shape[1] * x.shape[2]), x.dtype)
    return te.compute(node.type.shape, lambda n, h, w, c: te.sum(x[n, h + rh, w + rw, c] * inv, axis=[rh, rw]),
                      name=ctx.name("global_avg_pool"), tag="pool")


# ---- ONNX export, PyTorch peer --------------------------------------------------------------------

def _export(e: Exporter, n: Node) -> None:
    a = n.attrs
    common = dict(kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["padding"]),
                  ceil_mode=int(a["ceil_mode"]))
    if n.op == "max_pool2d":
        e.nchw[n.name] = e.node("MaxPool", [e.get_nchw(n.inputs[0])], **common)
    else:
        e.nchw[n.name] = e.node("AveragePool", [e.get_nchw(n.inputs[0])],
                                count_include_pad=int(a["count_include_pad"]), **common)


def _export_global(e: Exporter, n: Node) -> None:
    e.nchw[n.name] = e.node("GlobalAveragePool", [e.get_nchw(n.inputs[0])])


def _torch(r: Runner, node: Node, xs: list[Value]) -> Value:
    a = node.attrs
    x = xs[0].image()
    pad = symmetric_padding(a["padding"])
    kmax = tuple(k // 2 for k in a["kernel"])
    if pad is None or pad[0] > kmax[0] or pad[1] > kmax[1]:
        t, l, b, rr = a["padding"]
        if node.op == "avg_pool2d":
            # PyTorch pads symmetrically only: pad by hand and divide the window sums by the
            # pooled mask of what counts (real pixels, or also the declared padding); the
            # pool's own divisor cancels in the ratio.
            mask = r.torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
            mask = r.F.pad(mask, (l, rr, t, b), value=1.0 if a["count_include_pad"] else 0.0)
            x = r.F.pad(x, (l, rr, t, b))
            num = r.F.avg_pool2d(x, a["kernel"], a["strides"], 0, ceil_mode=a["ceil_mode"])
            den = r.F.avg_pool2d(mask, a["kernel"], a["strides"], 0, ceil_mode=a["ceil_mode"])
            return Value(num / den, True)
        x, pad = r.F.pad(x, (l, rr, t, b), value=-math.inf), (0, 0)
    if node.op == "max_pool2d":
        y = r.F.max_pool2d(x, a["kernel"], a["strides"], pad, ceil_mode=a["ceil_mode"])
    else:
        y = r.F.avg_pool2d(x, a["kernel"], a["strides"], pad, ceil_mode=a["ceil_mode"],
                           count_include_pad=a["count_include_pad"])
    return Value(y, True)


# ---- ONNX import ----------------------------------------------------------------------------------

def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    imp.single_output(node)
    x = imp.val(node.input[0])
    if "kernel_shape" not in attrs:
        raise imp.err(node, "required attribute kernel_shape is missing")
    kernel = tuple(attrs["kernel_shape"])
    if len(x.shape) != 4 or len(kernel) != 2:
        raise imp.err(node, f"only 2-D pooling is supported (input {list(x.shape)})")
    if any(d != 1 for d in attrs.get("dilations", (1, 1))):
        raise imp.err(node, "dilated pooling is not supported")
    strides = tuple(attrs.get("strides", (1, 1)))
    pads = spatial_pads(imp, node, attrs, x.shape[2:], kernel, strides, (1, 1))
    ceil = bool(attrs.get("ceil_mode", 0))
    out, data = node.output[0], imp.nhwc(node.input[0])
    if node.op_type == "MaxPool":
        y = imp.b.max_pool2d(data, kernel, strides, pads, ceil_mode=ceil, name=imp.name_for(out, True))
    else:
        y = imp.b.avg_pool2d(data, kernel, strides, pads, count_include_pad=bool(attrs.get("count_include_pad", 0)),
                             ceil_mode=ceil, name=imp.name_for(out, True))
    imp.set_nhwc(out, y)


def _import_global(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    if len(imp.val(node.input[0]).shape) != 4:
        raise imp.err(node, "only 4-D (2-D spatial) input is supported")
    out = node.output[0]
    imp.set_nhwc(out, imp.b.global_avg_pool(imp.nhwc(node.input[0]), name=imp.name_for(out, True)))


MAX_POOL2D = register_op(OpDef(
    "max_pool2d", (1, 1), "out_elemwise_fusable", _infer_max, "max over each window",
    reference=_ref_max, lower=_lower_max, export=_export, torch=_torch, onnx={"MaxPool": _import}))
AVG_POOL2D = register_op(OpDef(
    "avg_pool2d", (1, 1), "out_elemwise_fusable", _infer_avg,
    "count_include_pad decides whether padding counts in the mean",
    reference=_ref_avg, lower=_lower_avg, export=_export, torch=_torch, onnx={"AveragePool": _import}))
GLOBAL_AVG_POOL = register_op(OpDef(
    "global_avg_pool", (1, 1), "out_elemwise_fusable", _infer_global, "NHWC -> [N, 1, 1, C]",
    reference=lambda x: x.astype(np.float64).mean(axis=(1, 2), keepdims=True), lower=_lower_global,
    export=_export_global, torch=lambda r, n, xs: Value(xs[0].image().mean((2, 3), keepdim=True), True),
    onnx={"GlobalAveragePool": _import_global}))
