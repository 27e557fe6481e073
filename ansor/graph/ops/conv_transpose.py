"""Transposed 2-D convolution ("deconvolution", a U-Net's upsampling): ONNX ``ConvTranspose``,
``torch.nn.functional.conv_transpose2d``.

Graph op ``conv_transpose2d``: data NHWC [N, H, W, CI], weight as ONNX and PyTorch keep it,
[CI, CO/groups, KH, KW]; input pixel ``iy`` adds ``x[iy] * w[ky]`` to output row
``iy*stride + ky*dilation - pad_top``, and ``OH = (H-1)*stride + (KH-1)*dilation + 1 +
output_padding - pad_top - pad_bottom`` (the output padding rows past the last tap are zero).

Lowering: the operator library's sub-pixel formulation when it applies (one group, padding
within the kernel's reach, output_padding below the stride), which reduces over only the taps
that reach each output pixel; otherwise a zero-spread copy of the input (``stride-1`` zeros
between pixels, padded or cropped at the borders) convolved with the flipped kernel, which
handles groups and any padding. A constant weight is rearranged once at compile time.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compute import ops, te
from compute.expr import Expr, IterVar, const
from compute.tensor import Tensor

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter
from ..op_rules import OpDef, float_input, ints_attr, register_op, same_dtype
from ..te_ops import LowerCtx
from ..torch_peer import Runner, Value


def _extents(h: int, w: int, k: Sequence[int], a: dict[str, Any]) -> list[int]:
    """The output's height and width."""
    t, l, b, r = a["padding"]
    out = []
    for size, kk, s, d, op, p0, p1 in ((h, k[0], a["strides"][0], a["dilation"][0], a["output_padding"][0], t, b),
                                       (w, k[1], a["strides"][1], a["dilation"][1], a["output_padding"][1], l, r)):
        out.append((size - 1) * s + (kk - 1) * d + 1 + op - p0 - p1)
    return out


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    data, weight = ts
    if data.ndim != 4 or weight.ndim != 4:
        raise GraphError(f"conv_transpose2d: data must be 4-D NHWC and weight 4-D [CI, CO/groups, KH, KW], "
                         f"got {data} and {weight}")
    float_input(data, "conv_transpose2d data")
    same_dtype(ts)
    groups = attrs.get("groups", 1)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise GraphError(f"conv_transpose2d: groups must be a positive integer, got {groups!r}")
    a = {"strides": ints_attr(attrs.get("strides", 1), 2, "conv_transpose2d strides", 1),
         "padding": ints_attr(attrs.get("padding", 0), 4, "conv_transpose2d padding (top, left, bottom, right)"),
         "output_padding": ints_attr(attrs.get("output_padding", 0), 2, "conv_transpose2d output_padding"),
         "dilation": ints_attr(attrs.get("dilation", 1), 2, "conv_transpose2d dilation", 1),
         "groups": groups}
    n, h, w, ci = data.shape
    wci, co_g, kh, kw = weight.shape
    if wci != ci or ci % groups:
        raise GraphError(f"conv_transpose2d: weight {list(weight.shape)} has {wci} input channel(s), data has "
                         f"{ci}, which must also be divisible by groups ({groups})")
    oh, ow = _extents(h, w, (kh, kw), a)
    if oh < 1 or ow < 1:
        raise GraphError(f"conv_transpose2d: the output would be {oh}x{ow}; the padding is too large")
    return TensorType((n, oh, ow, co_g * groups), data.dtype), a


def _reference(x: np.ndarray, w: np.ndarray, strides: tuple[int, int], padding: tuple[int, ...],
               output_padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> np.ndarray:
    n, h, wd, ci = x.shape
    _, co_g, kh, kw = w.shape
    a = {"strides": strides, "padding": padding, "output_padding": output_padding, "dilation": dilation}
    oh, ow = _extents(h, wd, (kh, kw), a)
    (sh, sw), (dh, dw), (t, l, _, _) = strides, dilation, padding
    # Scatter every tap into the uncropped output, then crop the padding (which may also reach
    # past the last tap: output_padding rows stay zero).
    full = np.zeros((n, max((h - 1) * sh + (kh - 1) * dh + 1, t + oh),
                     max((wd - 1) * sw + (kw - 1) * dw + 1, l + ow), co_g * groups))
    xg = x.astype(np.float64).reshape(n, h, wd, groups, ci // groups)
    wg = w.astype(np.float64).reshape(groups, ci // groups, co_g, kh, kw)
    for ky in range(kh):
        for kx in range(kw):
            tap = np.einsum("nhwgc,gcd->nhwgd", xg, wg[..., ky, kx]).reshape(n, h, wd, -1)
            full[:, ky * dh:ky * dh + (h - 1) * sh + 1:sh, kx * dw:kx * dw + (wd - 1) * sw + 1:sw] += tap
    return full[:, t:t + oh, l:l + ow]


def _weight_as(ctx: LowerCtx, weight: Tensor, shape: Sequence[int], arr_fn: Callable[[np.ndarray], np.ndarray],
               body: Callable[..., Expr]) -> Tensor:
    """The weight rearranged: a constant read by this node alone is bound rearranged (once, at
    compile time) in place of its placeholder; any other weight gets a rearranging stage."""
    k = next((i for i, p in enumerate(ctx.placeholders) if p is weight), None)
    bound = None if k is None else ctx.inputs[k]
    if k is not None and id(weight) in ctx.read_once and isinstance(bound, str) and bound in ctx.constants:
        arr = np.ascontiguousarray(arr_fn(ctx.constants[bound]))
        t = te.placeholder(arr.shape, weight.dtype, weight.name)
        ctx.placeholders[k] = t
        ctx.inputs[k] = arr
        return t
    return te.compute(tuple(shape), body, name=ctx.name("conv_transpose_weight"), tag="injective")


def _lower(ctx: LowerCtx, node: Any, xs: list[Tensor]) -> Tensor:
    data, weight = xs
    a = node.attrs
    ci, co_g, kh, kw = weight.shape
    g = a["groups"]
    t, l, b, r = a["padding"]
    reach = [(kh - 1) * a["dilation"][0], (kw - 1) * a["dilation"][1]]
    if (g == 1 and max(t, b) <= reach[0] and max(l, r) <= reach[1]
            and all(p < s for p, s in zip(a["output_padding"], a["strides"]))):
        kern = _weight_as(ctx, weight, (kh, kw, ci, co_g), lambda w: w.transpose(2, 3, 0, 1),
                          lambda y, x, i, o: weight[i, o, y, x])
        return ops.conv2d_transpose_nhwc(data, kern, a["strides"], a["padding"], a["output_padding"],
                                         a["dilation"], name=ctx.name("conv_transpose2d"))
    ci_g = ci // g

    def flipped(y: IterVar, x: IterVar, i: IterVar, o: IterVar) -> Expr:  # HWIO, kernel flipped
        return weight[(o // co_g) * ci_g + i, o % co_g, kh - 1 - y, kw - 1 - x]

    def flip_array(w: np.ndarray) -> np.ndarray:
        wg = w.reshape(g, ci_g, co_g, kh, kw)[..., ::-1, ::-1]
        return wg.transpose(3, 4, 1, 0, 2).reshape(kh, kw, ci_g, g * co_g)

    kern = _weight_as(ctx, weight, (kh, kw, ci_g, g * co_g), flip_array, flipped)
    return ops.conv2d_nhwc(_spread(ctx, data, node, reach), kern, 1, 0, a["dilation"], g,
                           name=ctx.name("conv_transpose2d"))


def _spread(ctx: LowerCtx, data: Tensor, node: Any, reach: Sequence[int]) -> Tensor:
    """The input with ``stride-1`` zeros between pixels, starting ``reach - pad_before`` rows
    into the zeros (cropped where that is negative), as long as the flipped convolution reads."""
    n, h, w, ci = data.shape
    _, oh, ow, _ = node.type.shape
    strides = node.attrs["strides"]
    t, l, _, _ = node.attrs["padding"]
    begin = [reach[0] - t, reach[1] - l]
    extent = [oh + reach[0], ow + reach[1]]

    def body(b: IterVar, y: IterVar, x: IterVar, c: IterVar) -> Expr:
        conds, idx = [], []
        for i, start, size, s, end in zip((y, x), begin, (h, w), strides, extent):
            rel = i - start
            last = start + (size - 1) * s  # the real pixels lie at start + k*s, k < size
            if start > 0:
                conds.append(i >= start)
            if last < end - 1:
                conds.append(i <= last)
            if s > 1:
                conds.append(rel % s == 0)
            # clamped so the load stays in bounds where the select discards it
            idx.append(te.min(te.max(rel // s, const(0, "int32")), const(size - 1, "int32")))
        load = data[b, idx[0], idx[1], c]
        return te.if_then_else(te.all(*conds), load, const(0, data.dtype)) if conds else load

    return te.compute((n, extent[0], extent[1], ci), body, name=ctx.name("conv_transpose_spread"), tag="pad")


def _export(e: Exporter, n: Any) -> None:
    a = n.attrs
    x, w = n.inputs
    kh, kw = e.graph.type_of(w).shape[2:]
    e.nchw[n.name] = e.node("ConvTranspose", [e.get_nchw(x), e.get_plain(w)], kernel_shape=[kh, kw],
                            strides=list(a["strides"]), pads=list(a["padding"]),
                            output_padding=list(a["output_padding"]), dilations=list(a["dilation"]),
                            group=a["groups"])


def _torch(r: Runner, node: Any, xs: list[Value]) -> Value:
    a = node.attrs
    y = r.F.conv_transpose2d(xs[0].image(), xs[1].plain(), None, a["strides"], 0, 0, a["groups"], a["dilation"])
    # PyTorch pads symmetrically only: crop the padding (negative pads) and add output_padding
    t, l, b, rr = a["padding"]
    oph, opw = a["output_padding"]
    spec = (-l, opw - rr, -t, oph - b)
    return Value(r.F.pad(y, spec) if any(spec) else y, True)


def _onnx_pads(imp: Any, node: Any, attrs: dict[str, Any], in_hw: Sequence[int], kernel: Sequence[int],
               strides: Sequence[int], dil: Sequence[int], opad: Sequence[int]) -> tuple[int, ...]:
    """(top, left, bottom, right) from ``pads``, ``output_shape`` or ``auto_pad``, as onnxruntime
    resolves them (an odd total padding goes at the end for SAME_UPPER, else at the start)."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise imp.err(node, f"unknown auto_pad {auto!r}")
    want = attrs.get("output_shape")
    if want is not None:
        want = list(want)[-2:]
        if len(want) != 2:
            raise imp.err(node, f"output_shape {list(attrs['output_shape'])} must give the 2 spatial extents")
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        want = [size * s for size, s in zip(in_hw, strides)]
    if want is None:
        if auto == "VALID":
            return (0, 0, 0, 0)
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        if len(pads) != 4 or any(p < 0 for p in pads):
            raise imp.err(node, f"pads {pads} must be 4 non-negative integers (2-D only)")
        return tuple(int(p) for p in pads)
    before, after = [], []
    for size, k, s, d, op, o in zip(in_hw, kernel, strides, dil, opad, want):
        total = s * (size - 1) + op + (k - 1) * d + 1 - int(o)
        if total < 0:
            raise imp.err(node, f"output_shape {list(want)} is larger than the full transposed convolution")
        small, big = total // 2, total - total // 2
        before.append(small if auto == "SAME_UPPER" else big)
        after.append(big if auto == "SAME_UPPER" else small)
    return (before[0], before[1], after[0], after[1])


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    x = imp.val(node.input[0])
    if len(node.input) < 2 or not node.input[1]:
        raise imp.err(node, "the weight (input 1) is missing")
    w = imp.val(node.input[1])
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise imp.err(node, f"only 2-D transposed convolution is supported (input {list(x.shape)}, "
                            f"weight {list(w.shape)})")
    kernel = tuple(w.shape[2:])
    if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != kernel:
        raise imp.err(node, f"kernel_shape {list(attrs['kernel_shape'])} differs from the weight {list(w.shape)}")
    strides = tuple(attrs.get("strides", (1, 1)))
    dil = tuple(attrs.get("dilations", (1, 1)))
    opad = tuple(attrs.get("output_padding", (0, 0)))
    for what, vals, low in (("strides", strides, 1), ("dilations", dil, 1), ("output_padding", opad, 0)):
        if len(vals) != 2 or any(int(v) < low for v in vals):
            raise imp.err(node, f"{what} {list(vals)} must be 2 integers >= {low} (2-D only)")
    pads = _onnx_pads(imp, node, attrs, x.shape[2:], kernel, strides, dil, opad)
    out = node.output[0]
    has_bias = len(node.input) > 2 and bool(node.input[2])
    y = imp.b.add_node("conv_transpose2d", [imp.nhwc(node.input[0]), imp.plain(node.input[1])],
                       {"strides": strides, "padding": pads, "output_padding": opad, "dilation": dil,
                        "groups": int(attrs.get("group", 1))},
                       imp.name_for(out, True) + (":convT" if has_bias else ""))
    if has_bias:
        y = imp.b.add(y, imp.plain(node.input[2]), name=imp.name_for(out, True))
    imp.set_nhwc(out, y)


CONV_TRANSPOSE = register_op(OpDef(
    "conv_transpose2d", (2, 2), "out_elemwise_fusable", _infer,
    "transposed 2-D convolution: NHWC data, weight [CI, CO/groups, KH, KW]",
    reference=_reference, lower=_lower, export=_export, torch=_torch, onnx={"ConvTranspose": _import}))
