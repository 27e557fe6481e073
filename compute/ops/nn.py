"""Neural-network operators at the tensor level: convolutions, pooling, normalisation, activations.

Each function takes Tensors and returns the output Tensor, so ops compose into fused graphs (the
auto-scheduler decides what to inline or fuse; these functions only describe *what* is computed).
Conventions follow TVM's topi so shapes and layouts read familiarly:

* padding is its own compute stage (``<name>_pad``, with an if_then_else), omitted when the padding
  is zero, so the search can inline it or compute it at a tile;
* reduce axes have readable names (``rc`` input channel, ``rd``/``rh``/``rw`` kernel window, ``k``);
* reductions are separate computes (a reduction must be a whole compute body), so softmax, layer
  norm and average pooling are several stages.

Padding arguments take an int, one int per spatial dimension, or all befores then all afters
(for 2-D: ``(top, left, bottom, right)``). Stride and dilation take an int or one per dimension.
"""
from __future__ import annotations

import math
from typing import Sequence

from .. import te
from ..expr import Expr, IterVar, cast, const
from ..tensor import Tensor
from ._common import (accumulate_as, check_float, check_ndim, check_same_dtype, check_tensor,
                      int_tuple, out_dtype_of, padding_nd, with_axis_names)

__all__ = [
    "avg_pool2d", "bias_add", "conv1d", "conv2d_nchw", "conv2d_nhwc", "conv2d_transpose_nhwc",
    "conv3d_ndhwc", "dense", "depthwise_conv2d_nhwc", "gelu", "layer_norm", "max_pool2d", "pad",
    "relu", "softmax",
]

_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def axis_names(ndim: int) -> list[str]:
    """Default names of the output axes of a rank-``ndim`` op (i, j for matrices, as in TVM)."""
    if ndim == 1:
        return ["i"]
    if ndim == 2:
        return ["i", "j"]
    return [f"ax{d}" for d in range(ndim)]


# ---- padding -----------------------------------------------------------------------------------

def pad(data: Tensor, pad_before: int | Sequence[int], pad_after: int | Sequence[int] | None = None,
        pad_value: float | int | Expr = 0.0, name: str = "pad") -> Tensor:
    """``data`` padded with a constant: ``pad_before[d]`` elements before and ``pad_after[d]``
    after dimension ``d`` (an int applies to every dimension; ``pad_after`` defaults to
    ``pad_before``). The result is always a new compute, even when nothing is padded."""
    op = "pad"
    check_tensor(data, op, "data")
    before = int_tuple(pad_before, data.ndim, "pad_before", op, minimum=0)
    after = before if pad_after is None else int_tuple(pad_after, data.ndim, "pad_after", op, minimum=0)
    return _pad(data, before, after, pad_value, name, axis_names(data.ndim))


def _pad(data: Tensor, before: Sequence[int], after: Sequence[int], pad_value: float | int | Expr,
         name: str, names: Sequence[str]) -> Tensor:
    value = cast(pad_value, data.dtype) if isinstance(pad_value, Expr) else const(pad_value, data.dtype)
    shape = tuple(n + b + a for n, b, a in zip(data.shape, before, after))

    def body(*idx: IterVar) -> Expr:
        # Only padded sides get a bound test, so a dimension padded on one side costs one compare
        # and an unpadded one none; the read in the untaken branch may be out of bounds, which is
        # why this must stay a select (TVM does the same).
        conds = []
        src = []
        for i, b, a, n in zip(idx, before, after, data.shape):
            if b:
                conds.append(i >= b)
            if a:
                conds.append(i < b + n)
            src.append(i - b)
        load = data[tuple(src)]
        return te.if_then_else(te.all(*conds), load, value) if conds else load

    return te.compute(shape, with_axis_names(body, names), name=name, tag="pad",
                      attrs={"pad_before": list(before), "pad_after": list(after)})


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
    if any(before) or any(after):
        src = _pad(data, (0, *before, 0), (0, *after, 0), 0, f"{name}_pad", ["n", "h", "w", "c"])
    else:
        src = data
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

    Computed as TVM does: one stage spreads the input out (``stride-1`` zeros between pixels) and
    pads it by ``dilation*(K-1) - pad``, then a direct convolution with the flipped kernel.
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

    attrs = {"stride": list(strides), "pad_before": list(before), "pad_after": list(after),
             "output_padding": list(opad), "dilation": list(dil)}
    return te.compute((n_batch, out_hw[0], out_hw[1], co), with_axis_names(body, ["n", "h", "w", "co"]),
                      name=name, tag="conv2d_transpose_nhwc", attrs=attrs)


# ---- pooling -----------------------------------------------------------------------------------

def _pool_window(op: str, data: Tensor, kernel: int | Sequence[int], stride: int | Sequence[int],
                 padding: int | Sequence[int]):
    check_tensor(data, op, "data")
    check_ndim(data, 4, op, "data", "NHWC")
    ks = int_tuple(kernel, 2, "kernel", op)
    strides = int_tuple(stride, 2, "stride", op)
    before, after = padding_nd(padding, 2, op)
    out_hw = []
    for d in range(2):
        # A window made only of padding would give -inf (max) or a meaningless 0 (avg).
        if before[d] >= ks[d] or after[d] >= ks[d]:
            raise ValueError(f"{op}: padding {max(before[d], after[d])} must be smaller than the "
                             f"kernel size {ks[d]} in dimension {'HW'[d]}")
        padded = data.shape[1 + d] + before[d] + after[d]
        if ks[d] > padded:
            raise ValueError(f"{op}: kernel extent {ks[d]} is larger than the padded input extent "
                             f"{padded} in dimension {'HW'[d]}")
        out_hw.append((padded - ks[d]) // strides[d] + 1)
    return ks, strides, before, after, out_hw


def max_pool2d(data: Tensor, kernel: int | Sequence[int], stride: int | Sequence[int] = 1,
               padding: int | Sequence[int] = 0, name: str = "max_pool2d") -> Tensor:
    """Max pooling, NHWC: [N, H, W, C] -> [N, OH, OW, C]. Padding never wins (it is the dtype's
    lowest value), and padding must be smaller than the window so every window sees real data."""
    op = "max_pool2d"
    ks, strides, before, after, out_hw = _pool_window(op, data, kernel, stride, padding)
    if any(before) or any(after):
        src = _pad(data, (0, *before, 0), (0, *after, 0), te.min_value(data.dtype), f"{name}_pad",
                   ["n", "h", "w", "c"])
    else:
        src = data
    rh = te.reduce_axis((0, ks[0]), "rh")
    rw = te.reduce_axis((0, ks[1]), "rw")

    def body(n: IterVar, h: IterVar, w: IterVar, c: IterVar) -> Expr:
        return te.max(src[n, h * strides[0] + rh, w * strides[1] + rw, c], axis=[rh, rw])

    return te.compute((data.shape[0], out_hw[0], out_hw[1], data.shape[3]), body, name=name,
                      tag="max_pool2d", attrs={"kernel": list(ks), "stride": list(strides)})


def avg_pool2d(data: Tensor, kernel: int | Sequence[int], stride: int | Sequence[int] = 1,
               padding: int | Sequence[int] = 0, name: str = "avg_pool2d") -> Tensor:
    """Average pooling, NHWC: [N, H, W, C] -> [N, OH, OW, C].

    count_include_pad semantics: every window sum is divided by the full window size KH*KW, padded
    positions counting as zeros (TVM's ``count_include_pad=True``, PyTorch's default). Two stages:
    ``<name>_sum`` (the window sums) and ``<name>`` (the division).
    """
    op = "avg_pool2d"
    check_tensor(data, op, "data")
    check_float(data, op)
    ks, strides, before, after, out_hw = _pool_window(op, data, kernel, stride, padding)
    if any(before) or any(after):
        src = _pad(data, (0, *before, 0), (0, *after, 0), 0, f"{name}_pad", ["n", "h", "w", "c"])
    else:
        src = data
    rh = te.reduce_axis((0, ks[0]), "rh")
    rw = te.reduce_axis((0, ks[1]), "rw")
    shape = (data.shape[0], out_hw[0], out_hw[1], data.shape[3])

    def window_sum(n: IterVar, h: IterVar, w: IterVar, c: IterVar) -> Expr:
        return te.sum(src[n, h * strides[0] + rh, w * strides[1] + rw, c], axis=[rh, rw])

    total = te.compute(shape, window_sum, name=f"{name}_sum", tag="reduce",
                       attrs={"kernel": list(ks), "stride": list(strides)})
    size = const(float(ks[0] * ks[1]), data.dtype)
    return te.compute(shape, lambda n, h, w, c: total[n, h, w, c] / size, name=name, tag="elemwise")


# ---- normalisation -----------------------------------------------------------------------------

def softmax(x: Tensor, name: str = "softmax") -> Tensor:
    """Softmax over the last axis of an input of rank >= 2, numerically stable.

    Four stages: ``<name>_maxelem`` (row max), ``<name>_exp`` (exp(x - max), never overflows),
    ``<name>_expsum`` (row sum) and ``<name>`` (the division).
    """
    op = "softmax"
    check_tensor(x, op)
    check_float(x, op)
    if x.ndim < 2:
        raise ValueError(f"softmax: input must be at least 2-D (rows x last axis), got shape {list(x.shape)}")
    outer, length = x.shape[:-1], x.shape[-1]
    onames, names = axis_names(x.ndim)[:-1], axis_names(x.ndim)
    k1 = te.reduce_axis((0, length), "k")
    maxelem = te.compute(outer, with_axis_names(lambda *i: te.max(x[(*i, k1)], axis=k1), onames),
                         name=f"{name}_maxelem", tag="reduce")
    ex = te.compute(x.shape, with_axis_names(lambda *i: te.exp(x[i] - maxelem[i[:-1]]), names),
                    name=f"{name}_exp", tag="broadcast")
    k2 = te.reduce_axis((0, length), "k")
    expsum = te.compute(outer, with_axis_names(lambda *i: te.sum(ex[(*i, k2)], axis=k2), onames),
                        name=f"{name}_expsum", tag="reduce")
    return te.compute(x.shape, with_axis_names(lambda *i: ex[i] / expsum[i[:-1]], names),
                      name=name, tag="broadcast")


def layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5,
               name: str = "layer_norm") -> Tensor:
    """Layer normalisation over the last axis: ``(x - mean) / sqrt(var + eps) * gamma + beta``.

    ``x`` has rank >= 2; ``gamma`` and ``beta`` are 1-D of the last axis' length. The variance is
    the biased one (divided by N) and is computed in a second pass over ``x - mean``, which is
    stable where E[x^2] - E[x]^2 would cancel. Stages: ``<name>_mean``, ``<name>_var``, ``<name>``.
    """
    op = "layer_norm"
    check_tensor(x, op)
    check_tensor(gamma, op, "gamma")
    check_tensor(beta, op, "beta")
    check_float(x, op)
    dtype = check_same_dtype(op, x, gamma, beta)
    if x.ndim < 2:
        raise ValueError(f"layer_norm: input must be at least 2-D, got shape {list(x.shape)}")
    length = x.shape[-1]
    for t, what in ((gamma, "gamma"), (beta, "beta")):
        if tuple(t.shape) != (length,):
            raise ValueError(f"layer_norm: {what} must have shape [{length}] (the last axis of the "
                             f"input), got {list(t.shape)}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
        raise ValueError(f"layer_norm: eps must be a non-negative number, got {eps!r}")
    outer = x.shape[:-1]
    onames, names = axis_names(x.ndim)[:-1], axis_names(x.ndim)
    inv_n = const(1.0 / length, dtype)
    k1 = te.reduce_axis((0, length), "k")
    mean = te.compute(outer, with_axis_names(lambda *i: te.sum(x[(*i, k1)] * inv_n, axis=k1), onames),
                      name=f"{name}_mean", tag="reduce")
    k2 = te.reduce_axis((0, length), "k")

    def var_body(*i: IterVar) -> Expr:
        d = x[(*i, k2)] - mean[i]
        return te.sum(d * d * inv_n, axis=k2)

    var = te.compute(outer, with_axis_names(var_body, onames), name=f"{name}_var", tag="reduce")
    eps_c = const(float(eps), dtype)

    def out_body(*i: IterVar) -> Expr:
        row = i[:-1]
        return (x[i] - mean[row]) * te.rsqrt(var[row] + eps_c) * gamma[i[-1]] + beta[i[-1]]

    return te.compute(x.shape, with_axis_names(out_body, names), name=name, tag="injective",
                      attrs={"eps": float(eps)})


# ---- activations and bias ----------------------------------------------------------------------

def relu(x: Tensor, name: str = "relu") -> Tensor:
    """max(x, 0), elementwise."""
    check_tensor(x, "relu")
    return te.compute(x.shape, with_axis_names(lambda *i: te.max(x[i], const(0, x.dtype)),
                                               axis_names(x.ndim)), name=name, tag="elemwise")


def gelu(x: Tensor, name: str = "gelu") -> Tensor:
    """GELU in its exact erf form: 0.5 * x * (1 + erf(x / sqrt(2))), elementwise."""
    check_tensor(x, "gelu")
    check_float(x, "gelu")
    half = const(0.5, x.dtype)
    one = const(1.0, x.dtype)
    inv_sqrt2 = const(1.0 / math.sqrt(2.0), x.dtype)

    def body(*i: IterVar) -> Expr:
        v = x[i]
        return half * v * (one + te.erf(v * inv_sqrt2))

    return te.compute(x.shape, with_axis_names(body, axis_names(x.ndim)), name=name, tag="elemwise")


def bias_add(x: Tensor, bias: Tensor, axis: int = -1, name: str = "bias_add") -> Tensor:
    """``x + bias`` with the 1-D ``bias`` broadcast along dimension ``axis`` of ``x``
    (-1 for channels-last / dense outputs, 1 for NCHW)."""
    op = "bias_add"
    check_tensor(x, op)
    check_tensor(bias, op, "bias")
    check_same_dtype(op, x, bias)
    if isinstance(axis, bool) or not isinstance(axis, int) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"bias_add: axis {axis!r} is out of range for an input of rank {x.ndim}")
    ax = axis % x.ndim
    if bias.ndim != 1 or bias.shape[0] != x.shape[ax]:
        raise ValueError(f"bias_add: bias must have shape [{x.shape[ax]}] (dimension {ax} of the input "
                         f"{list(x.shape)}), got {list(bias.shape)}")
    return te.compute(x.shape, with_axis_names(lambda *i: x[i] + bias[i[ax]], axis_names(x.ndim)),
                      name=name, tag="broadcast")


def dense(data: Tensor, weight: Tensor, bias: Tensor | None = None, out_dtype: str | None = None,
          name: str = "dense") -> Tensor:
    """Fully connected layer, TVM convention: data [M, K], weight [N, K] -> data @ weight^T [M, N].

    With ``bias`` ([N]) a second stage ``<name>_bias`` adds it, so the bias can be fused or not.
    """
    op = "dense"
    check_tensor(data, op, "data")
    check_tensor(weight, op, "weight")
    check_ndim(data, 2, op, "data", "M, K")
    check_ndim(weight, 2, op, "weight", "N, K")
    acc = out_dtype_of(out_dtype, check_same_dtype(op, data, weight))
    m, k = data.shape
    n, kw = weight.shape
    if k != kw:
        raise ValueError(f"dense: inner dimensions differ: data is {list(data.shape)} (K={k}) but "
                         f"weight is {list(weight.shape)} (K={kw}); weight must be [N, K]")
    rk = te.reduce_axis((0, k), "k")
    out = te.compute((m, n), lambda i, j: te.sum(accumulate_as(data[i, rk], acc)
                                                 * accumulate_as(weight[j, rk], acc), axis=rk),
                     name=name, tag="dense")
    if bias is None:
        return out
    check_tensor(bias, op, "bias")
    if tuple(bias.shape) != (n,):
        raise ValueError(f"dense: bias must have shape [{n}], got {list(bias.shape)}")
    if bias.dtype != acc:
        raise ValueError(f"dense: bias dtype {bias.dtype} differs from the output dtype {acc}")
    return bias_add(out, bias, axis=-1, name=f"{name}_bias")
