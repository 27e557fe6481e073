"""The peers' formulations of the suite's workloads: numpy's and PyTorch's (eager; the timing
worker compiles the same function for ``torch.compile``). TVM's is in ``peers_tvm``, which runs
in its own process.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .inputs import bound_args


# Registered names of the same workload function (``compute.ops``): the peers read the arguments.
_ALIASES = {"group_conv2d_nhwc": "conv2d_nhwc", "dilated_conv2d_nhwc": "conv2d_nhwc"}


class NoFormulation(Exception):
    """This peer has no formulation of this workload (or of these arguments)."""


def _int_param(p: dict, name: str) -> int:
    v = p.get(name)
    if isinstance(v, bool) or not isinstance(v, int):
        raise NoFormulation(f"{name}={v!r} (only a single int is supported)")
    return v


def _conv_params(p: dict) -> tuple[int, int]:
    stride, pad = _int_param(p, "stride"), _int_param(p, "padding")
    if p.get("dilation", 1) != 1 or p.get("groups", 1) != 1:
        raise NoFormulation("dilated or grouped convolution")
    return stride, pad


def numpy_impl(workload: str, args: Sequence[Any], inputs: list) -> Callable[[], Any]:
    """numpy's natural formulation: ``@`` for (batched) GEMMs, im2col by a strided window view
    and ``tensordot`` (BLAS) for convolutions, shifted slices for depthwise, vectorised
    reductions for softmax and layer norm."""
    p = bound_args(workload, args)
    workload = _ALIASES.get(workload, workload)
    if workload in ("matmul", "batch_matmul"):
        a, b = inputs
        ta, tb = p.get("transpose_a", False), p.get("transpose_b", False)
        a = np.swapaxes(a, -1, -2) if ta else a
        b = np.swapaxes(b, -1, -2) if tb else b
        return lambda: np.matmul(a, b)
    if workload in ("conv1d", "conv3d_ndhwc") or (workload == "conv2d_nhwc" and (
            p.get("dilation", 1) != 1 or p.get("groups", 1) != 1)):
        x, w = inputs
        nd = x.ndim - 2
        return lambda: _np_conv_cl(x, w, _int_param(p, "stride"), _int_param(p, "padding"),
                                   _int_param(p, "dilation"), _int_param(p, "groups"), nd)
    if workload == "conv2d_nchw":
        return _np_conv_nchw(p, *inputs)
    if workload == "conv2d_transpose_nhwc":
        return _np_conv_transpose(p, *inputs)
    if workload == "avg_pool2d":
        return _np_avg_pool(p, inputs[0])
    if workload in ("conv2d_nhwc", "conv2d_bias_relu"):
        stride, pad = _conv_params(p)
        x, w = inputs[0], inputs[1]
        kh, kw, ci, co = w.shape
        if kh == kw == 1 and stride == 1 and pad == 0:
            def conv():
                return (x.reshape(-1, ci) @ w.reshape(ci, co)).reshape(*x.shape[:3], co)
        else:
            def conv():
                xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))) if pad else x
                win = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
                return np.tensordot(win, w, axes=([4, 5, 3], [0, 1, 2]))  # N, OH, OW, CO
        if workload == "conv2d_nhwc":
            return conv
        bias = inputs[2]
        return lambda: np.maximum(conv() + bias, 0)
    if workload == "depthwise_conv2d_nhwc":
        stride, pad = _int_param(p, "stride"), _int_param(p, "padding")
        if p.get("dilation", 1) != 1:
            raise NoFormulation("dilated depthwise convolution")
        x, w = inputs
        kh, kw, c, mult = w.shape
        if mult != 1:
            raise NoFormulation("channel multiplier > 1")
        n, h, wd, _ = x.shape
        oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1

        def depthwise():
            xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))) if pad else x
            out = np.zeros((n, oh, ow, c), x.dtype)
            for i in range(kh):
                for j in range(kw):
                    out += xp[:, i:i + (oh - 1) * stride + 1:stride,
                              j:j + (ow - 1) * stride + 1:stride, :] * w[i, j, :, 0]
            return out
        return depthwise
    if workload == "dense_bias_gelu":
        from scipy.special import erf  # noqa: PLC0415 - numpy has no erf; scipy comes with lightgbm

        x, w, b = inputs

        def dense_gelu():
            y = x @ w.T + b
            return 0.5 * y * (1.0 + erf(y * np.float32(1.0 / np.sqrt(2.0))))
        return dense_gelu
    if workload == "batch_matmul_softmax":
        a, b = inputs

        def scores_softmax():
            e = np.matmul(a, b)
            e = np.exp(e - e.max(axis=-1, keepdims=True))
            e /= e.sum(axis=-1, keepdims=True)
            return e
        return scores_softmax
    if workload in ("dense", "dense_bias_relu"):
        x, w = inputs[0], inputs[1]
        if len(inputs) == 2:
            return lambda: x @ w.T
        b = inputs[2]
        if workload == "dense":
            return lambda: x @ w.T + b
        return lambda: np.maximum(x @ w.T + b, 0)
    if workload == "softmax":
        (x,) = inputs

        def softmax():
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            e /= e.sum(axis=-1, keepdims=True)
            return e
        return softmax
    if workload == "layer_norm":
        x, g, b = inputs
        eps = float(p.get("eps", 1e-5))

        def layer_norm():
            d = x - x.mean(axis=-1, keepdims=True)
            var = np.mean(d * d, axis=-1, keepdims=True)
            return d / np.sqrt(var + eps) * g + b
        return layer_norm
    raise NoFormulation(f"no numpy formulation of {workload}")


def _np_window(xp: np.ndarray, axes: tuple[int, ...], k: Sequence[int], stride: int,
               dil: int) -> np.ndarray:
    """Sliding windows of ``xp`` over ``axes``: strided output positions, dilated taps; the
    window axes are appended (a view, no copy)."""
    eff = [(kk - 1) * dil + 1 for kk in k]
    win = sliding_window_view(xp, eff, axis=axes)
    idx: list[slice] = [slice(None)] * win.ndim
    for a in axes:
        idx[a] = slice(None, None, stride)
    for j in range(len(k)):
        idx[xp.ndim + j] = slice(None, None, dil)
    return win[tuple(idx)]


def _np_conv_cl(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dil: int, groups: int,
                nd: int) -> np.ndarray:
    """Channels-last convolution in ``nd`` spatial dims (data [N, *S, CI], kernel [*K, CI/g, CO])
    by windows and BLAS: ``tensordot`` without groups, one ``einsum`` over the groups."""
    sp = tuple(range(1, nd + 1))
    xp = np.pad(x, [(0, 0)] + [(pad, pad)] * nd + [(0, 0)]) if pad else x
    win = _np_window(xp, sp, w.shape[:nd], stride, dil)  # [N, *O, CI, *K]
    if groups == 1:
        return np.tensordot(win, w, axes=([nd + 1 + j for j in range(nd + 1)][1:] + [nd + 1],
                                          list(range(nd)) + [nd]))
    cig, co = w.shape[nd], w.shape[nd + 1]
    win = win.reshape(*win.shape[:nd + 1], groups, cig, *win.shape[nd + 2:])
    wg = w.reshape(*w.shape[:nd], cig, groups, co // groups)
    letters = "xyz"[:nd]
    out = np.einsum(f"n{letters}gc{letters.upper()},{letters.upper()}cgo->n{letters}go", win, wg,
                    optimize=True)
    return out.reshape(*out.shape[:nd + 1], co)


def _np_conv_nchw(p: dict, x: np.ndarray, w: np.ndarray) -> Callable[[], Any]:
    stride, pad = _conv_params(p)

    def conv():
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else x
        win = _np_window(xp, (2, 3), w.shape[2:], stride, 1)  # [N, CI, OH, OW, KH, KW]
        out = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))  # [N, OH, OW, CO]
        return np.ascontiguousarray(out.transpose(0, 3, 1, 2))
    return conv


def _np_conv_transpose(p: dict, x: np.ndarray, w: np.ndarray) -> Callable[[], Any]:
    """The input spread by the stride and padded by K-1-pad, then a direct convolution with the
    spatially flipped kernel (numpy has no scatter-add convolution)."""
    stride, pad, opad = (_int_param(p, k) for k in ("stride", "padding", "output_padding"))
    if _int_param(p, "dilation") != 1:
        raise NoFormulation("dilated transposed convolution")
    n, h, wd, ci = x.shape
    kh, kw = w.shape[:2]
    wf = np.ascontiguousarray(w[::-1, ::-1])
    shape = (n, (h - 1) * stride + 1 + (kh - 1 - pad) * 2 + opad,
             (wd - 1) * stride + 1 + (kw - 1 - pad) * 2 + opad, ci)

    def deconv():
        xs = np.zeros(shape, x.dtype)
        xs[:, kh - 1 - pad:kh - 1 - pad + (h - 1) * stride + 1:stride,
           kw - 1 - pad:kw - 1 - pad + (wd - 1) * stride + 1:stride] = x
        win = _np_window(xs, (1, 2), (kh, kw), 1, 1)
        return np.tensordot(win, wf, axes=([4, 5, 3], [0, 1, 2]))
    return deconv


def _np_avg_pool(p: dict, x: np.ndarray) -> Callable[[], Any]:
    kh, kw, stride, pad = (_int_param(p, k) for k in ("KH", "KW", "stride", "padding"))
    if not pad and stride == 1 and (kh, kw) == x.shape[1:3]:
        return lambda: x.mean(axis=(1, 2), keepdims=True)  # global pooling

    def pool():
        xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))) if pad else x
        return _np_window(xp, (1, 2), (kh, kw), stride, 1).sum(axis=(-2, -1)) / np.float32(kh * kw)
    return pool


def torch_impl(workload: str, args: Sequence[Any], inputs: list):
    """PyTorch's formulation: ``(fn, tensors, to_numpy)`` with ``fn(*tensors)`` the output.
    NHWC data is passed as channels_last NCHW tensors (the same memory), weights converted once
    outside the timed call."""
    import torch  # optional: only the PyTorch timing worker needs it
    import torch.nn.functional as F

    p = bound_args(workload, args)
    workload = _ALIASES.get(workload, workload)
    t = [torch.from_numpy(x) for x in inputs]
    same = lambda y: y.numpy()  # noqa: E731
    nhwc = lambda y: y.permute(0, 2, 3, 1).numpy()  # noqa: E731 - channels_last NCHW -> NHWC view
    if workload in ("matmul", "batch_matmul"):
        a, b = t
        a = a.transpose(-1, -2) if p.get("transpose_a") else a
        b = b.transpose(-1, -2) if p.get("transpose_b") else b
        return (lambda x, y: torch.matmul(x, y)), [a, b], same
    if workload in ("conv1d", "conv3d_ndhwc") or (workload == "conv2d_nhwc" and (
            p.get("dilation", 1) != 1 or p.get("groups", 1) != 1)):
        return _torch_conv_cl(p, t, torch, F)
    if workload == "conv2d_nchw":
        stride, pad = _conv_params(p)
        return (lambda x, w: F.conv2d(x, w, None, stride, pad)), t, same
    if workload == "conv2d_transpose_nhwc":
        stride, pad, opad, dil = (_int_param(p, k) for k in ("stride", "padding", "output_padding",
                                                              "dilation"))
        x = t[0].permute(0, 3, 1, 2)
        w = t[1].permute(2, 3, 0, 1).contiguous(memory_format=torch.channels_last)  # [CI, CO, KH, KW]
        return (lambda x, w: F.conv_transpose2d(x, w, None, stride, pad, opad, 1, dil)), [x, w], nhwc
    if workload == "avg_pool2d":
        kh, kw, stride, pad = (_int_param(p, k) for k in ("KH", "KW", "stride", "padding"))
        return (lambda x: F.avg_pool2d(x, (kh, kw), stride, pad)), [t[0].permute(0, 3, 1, 2)], nhwc
    if workload == "dense_bias_gelu":
        return (lambda x, w, b: F.gelu(F.linear(x, w, b))), t, same
    if workload == "batch_matmul_softmax":
        return (lambda a, b: torch.softmax(torch.matmul(a, b), dim=-1)), t, same
    if workload in ("conv2d_nhwc", "conv2d_bias_relu"):
        stride, pad = _conv_params(p)
        x = t[0].permute(0, 3, 1, 2)  # NHWC memory is a channels_last NCHW tensor
        w = t[1].permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)  # HWIO -> OIHW
        if workload == "conv2d_nhwc":
            return (lambda x, w: F.conv2d(x, w, None, stride, pad)), [x, w], nhwc
        return (lambda x, w, b: torch.relu(F.conv2d(x, w, b, stride, pad))), [x, w, t[2]], nhwc
    if workload == "depthwise_conv2d_nhwc":
        stride, pad = _int_param(p, "stride"), _int_param(p, "padding")
        if p.get("dilation", 1) != 1:
            raise NoFormulation("dilated depthwise convolution")
        kh, kw, c, mult = inputs[1].shape
        x = t[0].permute(0, 3, 1, 2)
        w = t[1].permute(2, 3, 0, 1).reshape(c * mult, 1, kh, kw).contiguous(
            memory_format=torch.channels_last)
        return (lambda x, w: F.conv2d(x, w, None, stride, pad, 1, c)), [x, w], nhwc
    if workload in ("dense", "dense_bias_relu"):
        if workload == "dense" and len(t) == 2:
            return (lambda x, w: F.linear(x, w)), t, same
        if workload == "dense":
            return (lambda x, w, b: F.linear(x, w, b)), t, same
        return (lambda x, w, b: torch.relu(F.linear(x, w, b))), t, same
    if workload == "softmax":
        return (lambda x: torch.softmax(x, dim=-1)), t, same
    if workload == "layer_norm":
        eps = float(p.get("eps", 1e-5))
        n = inputs[0].shape[-1]
        return (lambda x, g, b: F.layer_norm(x, (n,), g, b, eps)), t, same
    raise NoFormulation(f"no PyTorch formulation of {workload}")


def _torch_conv_cl(p: dict, t: list, torch: Any, F: Any):
    """Channels-last data in 1-3 spatial dims for PyTorch: 2-D and 3-D as channels_last(_3d)
    views of the same memory; 1-D has no such format, so its data is made NCW once, outside the
    timed call, as the weights are."""
    stride, pad, dil, groups = (_int_param(p, k) for k in ("stride", "padding", "dilation", "groups"))
    x, w = t
    nd = x.dim() - 2
    perm = (0, nd + 1) + tuple(range(1, nd + 1))
    wperm = (nd + 1, nd) + tuple(range(nd))  # [*K, CI/g, CO] -> [CO, CI/g, *K]
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    if nd == 1:
        xt, wt = x.permute(*perm).contiguous(), w.permute(*wperm).contiguous()
    else:
        fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
        xt, wt = x.permute(*perm), w.permute(*wperm).contiguous(memory_format=fmt)
    back = (0,) + tuple(range(2, nd + 2)) + (1,)
    return ((lambda x, w: conv(x, w, None, stride, pad, dil, groups)), [xt, wt],
            lambda y: y.permute(*back).numpy())
