"""``conv2d``: 2-D convolution of NHWC data with an HWIO weight ``[KH, KW, CI/groups, CO]``,
strides, dilation, (top, left, bottom, right) padding and groups (ONNX ``Conv``).

Import turns the constant OIHW weight HWIO once and keeps the output NHWC; a bias becomes an
``add`` after the conv, and the conv is remembered (``imp.conv_of``) so that a BatchNormalization
reading only it is folded into its weight and bias (``batch_norm.py``). The lowering uses the
operator library's ``conv2d_nhwc``, or its ``depthwise_conv2d_nhwc`` for a depthwise conv
(MobileNet). The reference loops over the kernel taps only (each a BLAS matmul over all pixels),
accumulating in float64.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import ops, te
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import Exporter
from ..onnx_import_kit import spatial_pads
from ..op_rules import OpDef, ints_attr, register_op, same_dtype
from ..te_ops import LowerCtx
from ..torch_peer import Runner, Value


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    data, weight = ts
    if data.ndim != 4 or weight.ndim != 4:
        raise GraphError(f"conv2d: data must be 4-D NHWC and weight 4-D HWIO, got {data} and {weight}")
    same_dtype(ts)
    strides = ints_attr(attrs.get("strides", 1), 2, "conv2d strides", 1)
    dil = ints_attr(attrs.get("dilation", 1), 2, "conv2d dilation", 1)
    pad = ints_attr(attrs.get("padding", 0), 4, "conv2d padding (top, left, bottom, right)")
    groups = attrs.get("groups", 1)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise GraphError(f"conv2d: groups must be a positive integer, got {groups!r}")
    n, h, w, ci = data.shape
    kh, kw, ci_g, co = weight.shape
    if ci % groups or co % groups:
        raise GraphError(f"conv2d: channels in ({ci}) and out ({co}) must be divisible by groups ({groups})")
    if ci_g * groups != ci:
        raise GraphError(f"conv2d: weight {list(weight.shape)} (HWIO) has {ci_g} input channel(s) per "
                         f"group, data has {ci} channel(s) in {groups} group(s)")
    out = []
    for size, k, d, s, p0, p1, axis in ((h, kh, dil[0], strides[0], pad[0], pad[2], "H"),
                                        (w, kw, dil[1], strides[1], pad[1], pad[3], "W")):
        eff = (k - 1) * d + 1
        if eff > size + p0 + p1:
            raise GraphError(f"conv2d: kernel extent {eff} exceeds the padded input extent "
                             f"{size + p0 + p1} along {axis}")
        out.append((size + p0 + p1 - eff) // s + 1)
    return (TensorType((n, out[0], out[1], co), data.dtype),
            {"strides": strides, "padding": pad, "dilation": dil, "groups": groups})


def tap_window(xp: np.ndarray, ky: int, kx: int, oh: int, ow: int, strides: tuple[int, int],
               dil: tuple[int, int]) -> np.ndarray:
    """The [N, OH, OW, C] slice of padded NHWC data that kernel tap (ky, kx) reads (the pools'
    references read their windows the same way)."""
    y0, x0 = ky * dil[0], kx * dil[1]
    return xp[:, y0:y0 + (oh - 1) * strides[0] + 1:strides[0], x0:x0 + (ow - 1) * strides[1] + 1:strides[1], :]


def _reference(x: np.ndarray, w: np.ndarray, strides: tuple[int, int], padding: tuple[int, ...],
               dilation: tuple[int, int], groups: int) -> np.ndarray:
    n, h, wd, ci = x.shape
    kh, kw, ci_g, co = w.shape
    t, l, b, r = padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (t, b), (l, r), (0, 0)))
    w = w.astype(np.float64)
    oh = (h + t + b - (kh - 1) * dilation[0] - 1) // strides[0] + 1
    ow = (wd + l + r - (kw - 1) * dilation[1] - 1) // strides[1] + 1
    co_g = co // groups
    acc = np.zeros((n * oh * ow, co))
    for ky in range(kh):
        for kx in range(kw):
            win = tap_window(xp, ky, kx, oh, ow, strides, dilation).reshape(n * oh * ow, ci)
            wk = w[ky, kx]  # [CI/groups, CO]
            if groups == 1:
                acc += win @ wk
            elif ci_g == 1:  # depthwise: output channel g*co_g + m reads input channel g
                acc += (np.repeat(win, co_g, axis=1) if co_g > 1 else win) * wk[0]
            else:
                wg = wk.reshape(ci_g, groups, co_g).transpose(1, 0, 2)            # [G, CI_g, CO_g]
                xg = win.reshape(-1, groups, ci_g).transpose(1, 0, 2)             # [G, P, CI_g]
                acc += np.matmul(xg, wg).transpose(1, 0, 2).reshape(-1, co)
    return acc.reshape(n, oh, ow, co)


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    data, weight = xs
    a = node.attrs
    kh, kw, ci_per_group, co = weight.shape
    if (a["groups"] > 1 and a["groups"] == data.shape[3] and ci_per_group == 1
            and id(weight) in ctx.read_once):
        # Depthwise (MobileNet): the library's depthwise op, the formulation its tuned kernels
        # use. Output channel c*M + m reads input channel c in both ops, so the HWIO weight
        # [KH, KW, 1, C*M] is the depthwise kernel [KH, KW, C, M] read row-major: the placeholder
        # takes that shape over the same buffer (kernel arguments are contiguous buffers).
        k = [id(p) for p in ctx.placeholders].index(id(weight))
        dw = te.placeholder((kh, kw, data.shape[3], co // data.shape[3]), weight.dtype, weight.name)
        ctx.placeholders[k] = dw
        return ops.depthwise_conv2d_nhwc(data, dw, a["strides"], a["padding"], a["dilation"],
                                         name=ctx.name("depthwise_conv2d"))
    return ops.conv2d_nhwc(data, weight, a["strides"], a["padding"], a["dilation"], a["groups"],
                           name=ctx.name("conv2d"))


def _export(e: Exporter, n: Node) -> None:
    a = n.attrs
    x, w = n.inputs
    c = e.const(w)
    wname = (e.init(c.transpose(3, 2, 0, 1)) if c is not None
             else e.node("Transpose", [e.get_plain(w)], perm=[3, 2, 0, 1]))
    kh, kw = e.graph.type_of(w).shape[:2]
    e.nchw[n.name] = e.node("Conv", [e.get_nchw(x), wname], kernel_shape=[kh, kw], strides=list(a["strides"]),
                            pads=list(a["padding"]), dilations=list(a["dilation"]), group=a["groups"])


def symmetric_padding(padding: tuple[int, ...]) -> tuple[int, int] | None:
    """(top, left, bottom, right) padding as PyTorch's symmetric (H, W) padding, or None."""
    t, l, b, r = padding
    return (t, l) if (t, l) == (b, r) else None


def _torch(r: Runner, node: Node, xs: list[Value]) -> Value:
    a = node.attrs
    wname = node.inputs[1]
    if wname in r.graph.constants:
        # HWIO -> OIHW once per module, channels-last like the activations
        key = ("conv2d weight", node.name)
        if key not in r.cache:
            w = r.torch.from_numpy(np.ascontiguousarray(r.graph.constants[wname].transpose(3, 2, 0, 1)))
            r.cache[key] = w.contiguous(memory_format=r.torch.channels_last)
        w = r.cache[key]
    else:
        w = xs[1].plain().permute(3, 2, 0, 1)
    x = xs[0].image()
    pad = symmetric_padding(a["padding"])
    if pad is None:
        t, l, b, rr = a["padding"]
        x, pad = r.F.pad(x, (l, rr, t, b)), (0, 0)
    return Value(r.F.conv2d(x, w, None, a["strides"], pad, a["dilation"], a["groups"]), True)


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    x = imp.val(node.input[0])
    w = imp.const_of(node, 1, "the weight")
    if len(x.shape) == 3 and w.ndim == 3:
        _import_1d(imp, node, attrs, w)
        return
    if len(x.shape) != 4 or w.ndim != 4:
        raise imp.err(node, f"only 1-D and 2-D convolutions are supported (input {list(x.shape)}, "
                            f"weight {list(w.shape)})")
    out = node.output[0]
    conv, wv, bias, y = _conv(imp, node, attrs, imp.nhwc(node.input[0]), x.shape[2:], w, imp.name_for(out, True))
    imp.set_nhwc(out, y)
    imp.conv_of[out] = (conv, wv, bias)


def _import_1d(imp: Any, node: Any, attrs: dict[str, Any], w: np.ndarray) -> None:
    """A 1-D Conv (audio, Whisper's stem) as the 2-D one over an image of height 1: [N, C, L] ->
    NHWC [N, 1, L, C], the weight [CO, CI/g, K] -> [CO, CI/g, 1, K], and back to [N, CO, L']."""
    x = imp.val(node.input[0])
    n, c, length = x.shape
    as_2d = dict(attrs)
    for key, one in (("kernel_shape", 1), ("strides", 1), ("dilations", 1)):
        if key in attrs:
            if len(attrs[key]) != 1:
                raise imp.err(node, f"{key} {list(attrs[key])} must have 1 value for a 1-D Conv")
            as_2d[key] = [one, *attrs[key]]
    if "pads" in attrs:
        if len(attrs["pads"]) != 2:
            raise imp.err(node, f"pads {list(attrs['pads'])} must have 2 values for a 1-D Conv")
        as_2d["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
    out = node.output[0]
    image = imp.b.reshape(imp.b.transpose(imp.plain(node.input[0]), (0, 2, 1), name=f"{out}:nlc"),
                          (n, 1, length, c), name=f"{out}:nhwc_in")
    _, _, _, y = _conv(imp, node, as_2d, image, (1, length), w[:, :, None, :], f"{out}:nhwc")
    _, _, out_len, co = y.shape
    flat = imp.b.reshape(y, (n, out_len, co), name=f"{out}:nlc_out")
    imp.set_plain(out, imp.b.transpose(flat, (0, 2, 1), name=out))


def _conv(imp: Any, node: Any, attrs: dict[str, Any], x_nhwc: Any, in_hw: Sequence[int], w: np.ndarray,
          name: str) -> tuple[Any, Any, Any, Any]:
    """The conv2d (+ bias add) of an NHWC graph value and an OIHW weight: (conv, weight var, bias
    var or None, result)."""
    if str(w.dtype) != imp.val(node.input[0]).dtype:
        raise imp.err(node, f"the weight is {w.dtype} but the input is {imp.val(node.input[0]).dtype} "
                            "(ONNX needs one type)")
    kernel = w.shape[2:]
    if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != kernel:
        raise imp.err(node, f"kernel_shape {attrs['kernel_shape']} differs from the weight {list(w.shape)}")
    strides = tuple(attrs.get("strides", (1, 1)))
    dil = tuple(attrs.get("dilations", (1, 1)))
    pads = spatial_pads(imp, node, attrs, in_hw, kernel, strides, dil)
    wv = imp.b.constant(np.ascontiguousarray(w.transpose(2, 3, 1, 0)), name=f"{node.input[1]}:hwio", copy=False)
    y = imp.b.conv2d(x_nhwc, wv, strides=strides, padding=pads, dilation=dil,
                     groups=int(attrs.get("group", 1)), name=name + (":conv" if len(node.input) > 2 else ""))
    conv, bias = y, None
    bias_arr = imp.const_of(node, 2, "the bias")
    if bias_arr is not None:
        bias = imp.b.constant(bias_arr.astype(w.dtype), name=node.input[2])
        y = imp.b.add(conv, bias, name=name)
    return conv, wv, bias, y


CONV2D = register_op(OpDef(
    "conv2d", (2, 2), "out_elemwise_fusable", _infer, "NHWC data, HWIO weight [KH, KW, CI/groups, CO]",
    reference=_reference, lower=_lower, export=_export, torch=_torch, onnx={"Conv": _import}))
