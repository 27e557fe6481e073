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

from .. import te
from ..expr import Expr, IterVar, const
from ..tensor import Tensor
from ._common import (accumulate_as, check_float, check_ndim, check_same_dtype, check_tensor,
                      out_dtype_of, with_axis_names)
# The convolution, pooling and padding families live in their own modules; nn re-exports them.
from .conv import (conv1d, conv2d_nchw, conv2d_nhwc, conv2d_transpose_nhwc, conv3d_ndhwc,
                   depthwise_conv2d_nhwc)
from .padding import axis_names, pad
from .pooling import avg_pool2d, max_pool2d

__all__ = [
    "avg_pool2d", "bias_add", "conv1d", "conv2d_nchw", "conv2d_nhwc", "conv2d_transpose_nhwc",
    "conv3d_ndhwc", "dense", "depthwise_conv2d_nhwc", "gelu", "layer_norm", "max_pool2d", "pad",
    "relu", "softmax",
]


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
