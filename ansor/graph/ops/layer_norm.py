"""``layer_norm``: normalise over the axes ``[axis, rank)`` then scale and shift by gamma and beta
(which broadcast to the normalised shape): ONNX ``LayerNormalization`` (opset 17; a missing beta
is zeros), ``torch.nn.functional.layer_norm``.

Lowered as mean and variance reductions then one elementwise stage; the reference computes in
float64.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, IterVar, const
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import plain_export
from ..onnx_import_kit import axis_in
from ..op_rules import OpDef, broadcast_shapes, float_input, norm_axis, register_op
from ..te_ops import LowerCtx, broadcast_index, full_index, keep_index, reduced_shape
from ..torch_peer import plain_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    x, gamma, beta = ts
    float_input(x, "layer_norm input")
    axis = norm_axis(attrs.get("axis", -1), x.ndim, "layer_norm axis")
    for t, what in ((gamma, "gamma"), (beta, "beta")):
        if broadcast_shapes(x.shape[axis:], t.shape) != x.shape[axis:]:
            raise GraphError(f"layer_norm: {what} {t} does not broadcast to the normalised shape "
                             f"{list(x.shape[axis:])}")
    return x, {"axis": axis, "eps": float(attrs.get("eps", 1e-5))}


def _reference(x, gamma, beta, axis: int, eps: float) -> np.ndarray:
    axes = tuple(range(axis, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x64 - mean) / np.sqrt(var + eps) * gamma + beta


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x, gamma, beta = xs
    ax, dtype = node.attrs["axis"], x.dtype
    axes = list(range(ax, x.ndim))
    red = reduced_shape(x.shape, axes)
    inv_n = const(1.0 / math.prod(x.shape[ax:]), dtype)
    eps = const(node.attrs["eps"], dtype)
    k1 = [te.reduce_axis((0, x.shape[d]), f"k{d}") for d in axes]
    mean = te.compute(red, lambda *i: te.sum(x[full_index(i, axes, k1)] * inv_n, axis=k1),
                      name=ctx.name("ln_mean"), tag="reduce")
    k2 = [te.reduce_axis((0, x.shape[d]), f"k{d}") for d in axes]

    def var_body(*i: IterVar) -> Expr:
        d = x[full_index(i, axes, k2)] - mean[i]
        return te.sum(d * d * inv_n, axis=k2)

    var = te.compute(red, var_body, name=ctx.name("ln_var"), tag="reduce")
    norm_shape = x.shape[ax:]

    def out_body(*i: IterVar) -> Expr:
        r = keep_index(i, axes)
        tail = i[ax:]
        return ((x[i] - mean[r]) * te.rsqrt(var[r] + eps) * gamma[broadcast_index(gamma, tail, norm_shape)]
                + beta[broadcast_index(beta, tail, norm_shape)])

    return te.compute(x.shape, out_body, name=ctx.name("layer_norm"), tag="injective")


def _torch(r: Any, node: Node, x: Any, gamma: Any, beta: Any) -> Any:
    shape = tuple(x.shape[node.attrs["axis"]:])
    # gamma and beta may have a lower rank (or 1s) and broadcast to the normalised shape
    return r.F.layer_norm(x, shape, gamma.expand(shape), beta.expand(shape), node.attrs["eps"])


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    imp.single_output(node)
    x, out = imp.val(node.input[0]), node.output[0]
    axis = axis_in(attrs.get("axis", -1), len(x.shape), "LayerNormalization axis")
    norm_shape = x.shape[axis:]
    gamma = imp.plain(node.input[1])
    beta = (imp.plain(node.input[2]) if len(node.input) > 2 and node.input[2]
            else imp.b.constant(np.zeros(norm_shape, x.dtype), name=f"{out}:beta"))
    imp.set_plain(out, imp.b.layer_norm(imp.plain(node.input[0]), gamma, beta, eps=float(attrs.get("epsilon", 1e-5)),
                                        axis=axis, name=out))


LAYER_NORM = register_op(OpDef(
    "layer_norm", (3, 3), "opaque", _infer, "normalise over axes [axis, rank); gamma/beta of that shape",
    reference=_reference, lower=_lower,
    export=plain_export(lambda e, n, xs: e.node("LayerNormalization", xs, axis=n.attrs["axis"],
                                                epsilon=n.attrs["eps"])),
    torch=plain_torch(_torch), onnx={"LayerNormalization": _import}))
