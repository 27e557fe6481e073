"""The peers' formulations of the suite's workloads: numpy's and PyTorch's (eager; the timing
worker compiles the same function for ``torch.compile``). TVM's is in ``peers_tvm``, which runs
in its own process.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .inputs import bound_args


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
    if workload in ("matmul", "batch_matmul"):
        a, b = inputs
        ta, tb = p.get("transpose_a", False), p.get("transpose_b", False)
        a = np.swapaxes(a, -1, -2) if ta else a
        b = np.swapaxes(b, -1, -2) if tb else b
        return lambda: np.matmul(a, b)
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


def torch_impl(workload: str, args: Sequence[Any], inputs: list):
    """PyTorch's formulation: ``(fn, tensors, to_numpy)`` with ``fn(*tensors)`` the output.
    NHWC data is passed as channels_last NCHW tensors (the same memory), weights converted once
    outside the timed call."""
    import torch  # optional: only the PyTorch timing worker needs it
    import torch.nn.functional as F

    p = bound_args(workload, args)
    t = [torch.from_numpy(x) for x in inputs]
    same = lambda y: y.numpy()  # noqa: E731
    nhwc = lambda y: y.permute(0, 2, 3, 1).numpy()  # noqa: E731 - channels_last NCHW -> NHWC view
    if workload in ("matmul", "batch_matmul"):
        a, b = t
        a = a.transpose(-1, -2) if p.get("transpose_a") else a
        b = b.transpose(-1, -2) if p.get("transpose_b") else b
        return (lambda x, y: torch.matmul(x, y)), [a, b], same
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
