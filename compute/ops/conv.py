"""Convolutions at the tensor level: 1-D, 2-D (NHWC, NCHW), 3-D, depthwise and transposed 2-D.

All but depthwise and transposed go through one generic ``_conv`` (layout, stride, dilation,
groups); padding is a separate ``<name>_pad`` stage (``padding._pad``). Re-exported by ``nn``.
"""
from __future__ import annotations

from typing import Sequence

from .. import te
from ..expr import Expr, IterVar, const
from ..tensor import Tensor
from ._common import (accumulate_as, check_ndim, check_same_dtype, check_tensor, int_tuple,
                      out_dtype_of, padding_nd, with_axis_names)
from .padding import _pad, pad_hw

_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


# ---- convolutions ------------------------------------------------------------------------------

def _conv(op: str, data: Tensor, kernel: Tensor, nsp: int, channels_last: bool,
          stride: int | Sequence[int], padding: int | Sequence[int], dilation: int | Sequence[int],
          groups: int, out_dtype: str | None, name: str, tag: str) -> Tensor:
    """Direct N-D convolution, channels-last (data N..C, kernel ..IO) or channels-first (NC.., OI..).

    Grouped convolution splits the CI input and CO output channels into ``groups`` blocks; output
    channel ``co`` reads input channels of block ``co // (CO/groups)``.
    """
    check_tensor(data, op, "data")
    check_tensor(kernel, op, "kernel")
    sp = _SPATIAL[nsp]
    dlay, klay = (f"N{sp}C", f"{sp}IO") if channels_last else (f"NC{sp}", f"OI{sp}")
    check_ndim(data, nsp + 2, op, "data", dlay)
    check_ndim(kernel, nsp + 2, op, "kernel", klay)
    in_dtype = check_same_dtype(op, data, kernel)
    acc = out_dtype_of(out_dtype, in_dtype)
    strides = int_tuple(stride, nsp, "stride", op)
    dil = int_tuple(dilation, nsp, "dilation", op)
    before, after = padding_nd(padding, nsp, op)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive integer, got {groups!r}")
    if channels_last:
        n_batch, *in_sp, ci = data.shape
        *ksz, ci_g, co = kernel.shape
    else:
        n_batch, ci, *in_sp = data.shape
        co, ci_g, *ksz = kernel.shape
    if ci % groups:
        raise ValueError(f"{op}: input channels ({ci}) are not divisible by groups ({groups})")
    if co % groups:
        raise ValueError(f"{op}: output channels ({co}) are not divisible by groups ({groups})")
    if ci_g != ci // groups:
        raise ValueError(f"{op}: kernel {list(kernel.shape)} ({klay}) has {ci_g} input channel(s) per "
                         f"group, but data has {ci} channel(s) in {groups} group(s), i.e. "
                         f"{ci // groups} per group")
    out_sp = []
    for d in range(nsp):
        eff = (ksz[d] - 1) * dil[d] + 1
        padded = in_sp[d] + before[d] + after[d]
        if eff > padded:
            what = f"dilated kernel extent {eff}" if dil[d] > 1 else f"kernel extent {eff}"
            raise ValueError(f"{op}: {what} is larger than the padded input extent {padded} "
                             f"in dimension {sp[d]}")
        out_sp.append((padded - eff) // strides[d] + 1)

    sp_names = [c.lower() for c in sp]
    if any(before) or any(after):
        if channels_last:
            pb, pa = (0, *before, 0), (0, *after, 0)
            names = ["n", *sp_names, "c"]
        else:
            pb, pa = (0, 0, *before), (0, 0, *after)
            names = ["n", "c", *sp_names]
        src = _pad(data, pb, pa, 0, f"{name}_pad", names)
    else:
        src = data
    rsp = [te.reduce_axis((0, k), f"r{c}") for k, c in zip(ksz, sp_names)]
    ci_per, co_per = ci // groups, co // groups
    rc = te.reduce_axis((0, ci_per), "rc")

    def body(*idx: IterVar) -> Expr:
        if channels_last:
            n, pos, oc = idx[0], idx[1:-1], idx[-1]
        else:
            n, oc, pos = idx[0], idx[1], idx[2:]
        inp = [p * s + r * dl for p, s, r, dl in zip(pos, strides, rsp, dil)]
        ch = rc if groups == 1 else (oc // co_per) * ci_per + rc
        if channels_last:
            x, w = src[(n, *inp, ch)], kernel[(*rsp, rc, oc)]
            raxes = [*rsp, rc]
        else:
            x, w = src[(n, ch, *inp)], kernel[(oc, rc, *rsp)]
            raxes = [rc, *rsp]
        return te.sum(accumulate_as(x, acc) * accumulate_as(w, acc), axis=raxes)

    shape = (n_batch, *out_sp, co) if channels_last else (n_batch, co, *out_sp)
    names = ["n", *sp_names, "co"] if channels_last else ["n", "co", *sp_names]
    attrs = {"stride": list(strides), "pad_before": list(before), "pad_after": list(after),
             "dilation": list(dil), "groups": groups}
    return te.compute(shape, with_axis_names(body, names), name=name, tag=tag, attrs=attrs)


def conv1d(data: Tensor, kernel: Tensor, stride: int = 1, padding: int | Sequence[int] = 0,
           dilation: int = 1, groups: int = 1, out_dtype: str | None = None,
           name: str = "conv1d") -> Tensor:
    """1-D convolution, channels last: data [N, W, CI], kernel [KW, CI/groups, CO] -> [N, OW, CO]."""
    return _conv("conv1d", data, kernel, 1, True, stride, padding, dilation, groups, out_dtype,
                 name, "conv1d_nwc")


def conv2d_nhwc(data: Tensor, kernel: Tensor, stride: int | Sequence[int] = 1,
                padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
                out_dtype: str | None = None, name: str = "conv2d_nhwc") -> Tensor:
    """2-D convolution: data [N, H, W, CI], kernel [KH, KW, CI/groups, CO] (HWIO) -> [N, OH, OW, CO]."""
    return _conv("conv2d_nhwc", data, kernel, 2, True, stride, padding, dilation, groups, out_dtype,
                 name, "conv2d_nhwc")


def conv2d_nchw(data: Tensor, kernel: Tensor, stride: int | Sequence[int] = 1,
                padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
                out_dtype: str | None = None, name: str = "conv2d_nchw") -> Tensor:
    """2-D convolution: data [N, CI, H, W], kernel [CO, CI/groups, KH, KW] (OIHW) -> [N, CO, OH, OW]."""
    return _conv("conv2d_nchw", data, kernel, 2, False, stride, padding, dilation, groups, out_dtype,
                 name, "conv2d_nchw")


def conv3d_ndhwc(data: Tensor, kernel: Tensor, stride: int | Sequence[int] = 1,
                 padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
                 out_dtype: str | None = None, name: str = "conv3d_ndhwc") -> Tensor:
    """3-D convolution: data [N, D, H, W, CI], kernel [KD, KH, KW, CI/groups, CO] -> [N, OD, OH, OW, CO]."""
    return _conv("conv3d_ndhwc", data, kernel, 3, True, stride, padding, dilation, groups, out_dtype,
                 name, "conv3d_ndhwc")


def depthwise_conv2d_nhwc(data: Tensor, kernel: Tensor, stride: int | Sequence[int] = 1,
                          padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1,
                          out_dtype: str | None = None, name: str = "depthwise_conv2d_nhwc") -> Tensor:
    """Depthwise 2-D convolution: data [N, H, W, C], kernel [KH, KW, C, M] -> [N, OH, OW, C*M].

    M is the channel multiplier; output channel ``c*M + m`` filters input channel ``c`` with
    ``kernel[:, :, c, m]`` (TVM's layout).
    """
    op = "depthwise_conv2d_nhwc"
    check_tensor(data, op, "data")
    check_tensor(kernel, op, "kernel")
    check_ndim(data, 4, op, "data", "NHWC")
    check_ndim(kernel, 4, op, "kernel", "KH, KW, C, M")
    acc = out_dtype_of(out_dtype, check_same_dtype(op, data, kernel))
    strides = int_tuple(stride, 2, "stride", op)
    dil = int_tuple(dilation, 2, "dilation", op)
    before, after = padding_nd(padding, 2, op)
    n_batch, h, w, c = data.shape
    kh, kw, kc, mult = kernel.shape
    if kc != c:
        raise ValueError(f"{op}: kernel {list(kernel.shape)} has {kc} channel(s) but data has {c}")
    out_hw = []
    for d, (size, k) in enumerate(zip((h, w), (kh, kw))):
        eff = (k - 1) * dil[d] + 1
        padded = size + before[d] + after[d]
        if eff > padded:
            what = f"dilated kernel extent {eff}" if dil[d] > 1 else f"kernel extent {eff}"
            raise ValueError(f"{op}: {what} is larger than the padded input extent {padded} "
                             f"in dimension {'HW'[d]}")
        out_hw.append((padded - eff) // strides[d] + 1)
    src = pad_hw(data, before, after, 0, name)
    rh = te.reduce_axis((0, kh), "rh")
    rw = te.reduce_axis((0, kw), "rw")

    def body(n: IterVar, y: IterVar, x: IterVar, oc: IterVar) -> Expr:
        ic, m = oc // mult, oc % mult
        v = src[n, y * strides[0] + rh * dil[0], x * strides[1] + rw * dil[1], ic]
        return te.sum(accumulate_as(v, acc) * accumulate_as(kernel[rh, rw, ic, m], acc), axis=[rh, rw])

    attrs = {"stride": list(strides), "pad_before": list(before), "pad_after": list(after),
             "dilation": list(dil), "channel_multiplier": mult}
    return te.compute((n_batch, out_hw[0], out_hw[1], c * mult), with_axis_names(body, ["n", "h", "w", "c"]),
                      name=name, tag="depthwise_conv2d_nhwc", attrs=attrs)


def conv2d_transpose_nhwc(data: Tensor, kernel: Tensor, stride: int | Sequence[int] = 1,
                          padding: int | Sequence[int] = 0, output_padding: int | Sequence[int] = 0,
                          dilation: int | Sequence[int] = 1, out_dtype: str | None = None,
                          name: str = "conv2d_transpose_nhwc") -> Tensor:
    """Transposed 2-D convolution (the gradient of conv2d w.r.t. its input, "deconvolution").

    data [N, H, W, CI], kernel [KH, KW, CI, CO] -> [N, OH, OW, CO] where input pixel ``iy``
    contributes ``data[iy] * kernel[ky]`` to output row ``iy*stride + ky*dilation - pad_top``, and
    ``OH = (H-1)*stride - pad_top - pad_bottom + dilation*(KH-1) + 1 + output_padding``.

    Undilated kernels are computed sub-pixel: output row ``oy`` receives exactly the taps
    ``ky = (oy + pad_top) % stride + stride*t`` from input rows ``(oy + pad_top) // stride - t``,
    ``t < ceil(KH / stride)``, so the reduction runs over those taps alone (at stride 2, a quarter
    of the multiply-adds of a convolution over the zero-spread input; a tap past the kernel's end,
    when the stride does not divide it, reads zero). Dilated kernels are computed as TVM does: one
    stage spreads the input out (``stride-1`` zeros between pixels) and pads it by
    ``dilation*(K-1) - pad``, then a direct convolution with the flipped kernel.
    """
    op = "conv2d_transpose_nhwc"
    check_tensor(data, op, "data")
    check_tensor(kernel, op, "kernel")
    check_ndim(data, 4, op, "data", "NHWC")
    check_ndim(kernel, 4, op, "kernel", "KH, KW, CI, CO")
    acc = out_dtype_of(out_dtype, check_same_dtype(op, data, kernel))
    strides = int_tuple(stride, 2, "stride", op)
    dil = int_tuple(dilation, 2, "dilation", op)
    opad = int_tuple(output_padding, 2, "output_padding", op, minimum=0)
    before, after = padding_nd(padding, 2, op)
    n_batch, h, w, ci = data.shape
    kh, kw, kci, co = kernel.shape
    if kci != ci:
        raise ValueError(f"{op}: kernel {list(kernel.shape)} has {kci} input channel(s) but data has {ci}")
    spread_before, spread_len, out_hw = [], [], []
    for d, (size, k) in enumerate(zip((h, w), (kh, kw))):
        reach = dil[d] * (k - 1)
        if opad[d] >= strides[d]:
            raise ValueError(f"{op}: output_padding {opad[d]} must be smaller than the stride "
                             f"{strides[d]} in dimension {'HW'[d]}")
        if before[d] > reach or after[d] > reach:
            raise ValueError(f"{op}: padding {max(before[d], after[d])} exceeds dilation*(kernel-1) = "
                             f"{reach} in dimension {'HW'[d]}")
        out = (size - 1) * strides[d] - before[d] - after[d] + reach + 1 + opad[d]
        if out < 1:
            raise ValueError(f"{op}: the output would be empty in dimension {'HW'[d]} "
                             f"(extent {out}); reduce the padding")
        out_hw.append(out)
        spread_before.append(reach - before[d])
        spread_len.append(out + reach)

    attrs = {"stride": list(strides), "pad_before": list(before), "pad_after": list(after),
             "output_padding": list(opad), "dilation": list(dil)}
    if dil == (1, 1):
        return _conv2d_transpose_subpixel(data, kernel, strides, before, out_hw, acc, name, attrs)
    needs_stage = any(s > 1 for s in strides) or any(
        b > 0 or L > b + (n - 1) * s + 1
        for b, L, n, s in zip(spread_before, spread_len, (h, w), strides))
    if needs_stage:
        def spread(n: IterVar, y: IterVar, x: IterVar, c: IterVar) -> Expr:
            conds = []
            src_idx = []
            for i, b, L, size, s in zip((y, x), spread_before, spread_len, (h, w), strides):
                last = b + (size - 1) * s  # position of the last real pixel
                if b:
                    conds.append(i >= b)
                if L > last + 1:
                    conds.append(i <= last)
                if s > 1:
                    conds.append((i - b) % s == 0)
                src_idx.append((i - b) // s)
            load = data[n, src_idx[0], src_idx[1], c]
            return te.if_then_else(te.all(*conds), load, const(0, data.dtype)) if conds else load

        src = te.compute((n_batch, spread_len[0], spread_len[1], ci), spread, name=f"{name}_pad",
                         tag="pad", attrs={"stride": list(strides), "pad_before": spread_before})
    else:
        src = data
    rh = te.reduce_axis((0, kh), "rh")
    rw = te.reduce_axis((0, kw), "rw")
    rc = te.reduce_axis((0, ci), "rc")

    def body(n: IterVar, y: IterVar, x: IterVar, oc: IterVar) -> Expr:
        v = src[n, y + rh * dil[0], x + rw * dil[1], rc]
        k = kernel[kh - 1 - rh, kw - 1 - rw, rc, oc]
        return te.sum(accumulate_as(v, acc) * accumulate_as(k, acc), axis=[rh, rw, rc])

    return te.compute((n_batch, out_hw[0], out_hw[1], co), with_axis_names(body, ["n", "h", "w", "co"]),
                      name=name, tag="conv2d_transpose_nhwc", attrs=attrs)


def _conv2d_transpose_subpixel(data: Tensor, kernel: Tensor, strides: Sequence[int],
                               before: Sequence[int], out_hw: Sequence[int], acc: str, name: str,
                               attrs: dict) -> Tensor:
    """The undilated transposed convolution over the taps that reach each output pixel (see
    ``conv2d_transpose_nhwc``): input row ``(oy + pad) // s - t + (T - 1)`` of the input padded
    by ``T - 1`` rows before (and as many after as the last output row reaches), kernel row
    ``(oy + pad) % s + s*t``; taps past the kernel's end are zero."""
    n_batch, h, w, ci = data.shape
    kh, kw, _, co = kernel.shape
    taps, pad_lo, pad_hi = [], [], []
    for size, k, s, b, out in zip((h, w), (kh, kw), strides, before, out_hw):
        t = -(-k // s)
        taps.append(t)
        pad_lo.append(t - 1)
        pad_hi.append(max(0, (out - 1 + b) // s - (size - 1)))
    src = pad_hw(data, pad_lo, pad_hi, 0, name)
    th = te.reduce_axis((0, taps[0]), "th")
    tw = te.reduce_axis((0, taps[1]), "tw")
    rc = te.reduce_axis((0, ci), "rc")
    ragged = [k % s != 0 for k, s in zip((kh, kw), strides)]

    def body(n: IterVar, y: IterVar, x: IterVar, oc: IterVar) -> Expr:
        iy = (y + before[0]) // strides[0] - th + (taps[0] - 1)
        ix = (x + before[1]) // strides[1] - tw + (taps[1] - 1)
        ky = (y + before[0]) % strides[0] + th * strides[0]
        kx = (x + before[1]) % strides[1] + tw * strides[1]
        conds = []
        if ragged[0]:
            conds.append(ky < kh)
            ky = te.min(ky, const(kh - 1, "int32"))  # in bounds even where the select discards it
        if ragged[1]:
            conds.append(kx < kw)
            kx = te.min(kx, const(kw - 1, "int32"))
        k = accumulate_as(kernel[ky, kx, rc, oc], acc)
        if conds:
            k = te.if_then_else(te.all(*conds), k, const(0, acc))
        return te.sum(accumulate_as(src[n, iy, ix, rc], acc) * k, axis=[th, tw, rc])

    return te.compute((n_batch, out_hw[0], out_hw[1], co), with_axis_names(body, ["n", "h", "w", "co"]),
                      name=name, tag="conv2d_transpose_nhwc", attrs=attrs)
