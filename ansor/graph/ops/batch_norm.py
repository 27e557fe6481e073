"""``batch_norm``: inference batch normalisation, ``(x - mean) * gamma / sqrt(var + eps) + beta``
per channel of ``axis`` (ONNX ``BatchNormalization``, inference mode).

Import folds a BatchNormalization with constant parameters into the Conv before it when the
conv's output feeds only it (the conv's weight and bias are rescaled once: ``conv2d.py``
remembers each conv in ``imp.conv_of``); otherwise a 4-D input is normalised NHWC on its last
axis. Export writes ``BatchNormalization`` for an NCHW image and the arithmetic otherwise.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, IterVar, const
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import Exporter
from ..op_rules import OpDef, norm_axis, register_op
from ..te_ops import LowerCtx
from ..torch_peer import Runner, Value


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    axis = norm_axis(attrs.get("axis", -1), x.ndim, "batch_norm axis")
    for t, what in zip(ts[1:], ("gamma", "beta", "mean", "var")):
        if t.shape != (x.shape[axis],):
            raise GraphError(f"batch_norm: {what} must have shape [{x.shape[axis]}], got {t}")
    return x, {"axis": axis, "eps": float(attrs.get("eps", 1e-5))}


def _reference(x, gamma, beta, mean, var, axis: int, eps: float) -> np.ndarray:
    shape = tuple(-1 if i == axis else 1 for i in range(x.ndim))
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    shift = beta - mean * scale
    return x * scale.astype(x.dtype).reshape(shape) + shift.astype(x.dtype).reshape(shape)


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x, gamma, beta, mean, var = xs
    ax, eps = node.attrs["axis"], const(node.attrs["eps"], x.dtype)

    def body(*i: IterVar) -> Expr:
        c = i[ax]
        return (x[i] - mean[c]) * (gamma[c] * te.rsqrt(var[c] + eps)) + beta[c]

    return te.compute(x.shape, body, name=ctx.name("batch_norm"), tag="injective")


def _export(e: Exporter, n: Node) -> None:
    x, gamma, beta, mean, var = n.inputs
    a = n.attrs
    if len(n.type.shape) == 4 and a["axis"] == 3:
        e.nchw[n.name] = e.node("BatchNormalization", [e.get_nchw(x)] + [e.get_plain(v) for v in (gamma, beta, mean, var)],
                                epsilon=a["eps"])
        return
    # another axis: x * scale + shift with the channel vectors shaped to broadcast
    shape = [-1 if i == a["axis"] else 1 for i in range(len(n.type.shape))]
    sh = e.init(np.array(shape, np.int64), "s")
    eps = e.init(np.array(a["eps"], n.type.dtype), "c")
    scale = e.node("Div", [e.get_plain(gamma), e.node("Sqrt", [e.node("Add", [e.get_plain(var), eps])])])
    shift = e.node("Sub", [e.get_plain(beta), e.node("Mul", [e.get_plain(mean), scale])])
    y = e.node("Mul", [e.get_plain(x), e.node("Reshape", [scale, sh])])
    e.plain[n.name] = e.node("Add", [y, e.node("Reshape", [shift, sh])])


def _torch(r: Runner, node: Node, xs: list[Value]) -> Value:
    x, gamma, beta, mean, var = xs
    if x.nchw and node.attrs["axis"] == 3:
        return Value(r.F.batch_norm(x.t, mean.t, var.t, gamma.t, beta.t, False, 0.0, node.attrs["eps"]), True)
    t = x.plain()
    shape = [-1 if i == node.attrs["axis"] else 1 for i in range(t.dim())]
    scale = gamma.t / r.torch.sqrt(var.t + node.attrs["eps"])
    return Value(t * scale.reshape(shape) + (beta.t - mean.t * scale).reshape(shape))


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    imp.single_output(node)
    if attrs.get("training_mode", 0):
        raise imp.err(node, "training_mode=1 is not supported (inference only)")
    eps = float(attrs.get("epsilon", 1e-5))
    params = [imp.val(i) for i in node.input[1:5]]
    x_name, out = node.input[0], node.output[0]
    x = imp.val(x_name)
    if all(p.const is not None for p in params):
        gamma, beta, mean, var = (p.const.astype(np.float64) for p in params)
        scale = gamma / np.sqrt(var + eps)
        shift = beta - mean * scale
        folded = imp.conv_of.get(x_name)
        if folded is not None and imp.uses[x_name] == 1 and x_name not in imp.out_names:
            conv, wv, bias = folded
            w = imp.b.const_value(wv)
            imp.b.set_constant(wv, (w * scale).astype(w.dtype))  # HWIO: CO is the last axis
            if bias is not None:
                b = imp.b.const_value(bias)
                imp.b.set_constant(bias, (b * scale + shift).astype(b.dtype))
                imp.set_nhwc(out, x.nhwc)
            else:
                imp.set_nhwc(out, imp.b.add(conv, shift.astype(w.dtype), name=imp.name_for(out, True)))
            return
    if len(x.shape) == 4:
        y = imp.b.batch_norm(imp.nhwc(x_name), *(imp.plain(i) for i in node.input[1:5]), eps=eps, axis=-1,
                             name=imp.name_for(out, True))
        imp.set_nhwc(out, y)
    else:
        y = imp.b.batch_norm(imp.plain(x_name), *(imp.plain(i) for i in node.input[1:5]), eps=eps, axis=1, name=out)
        imp.set_plain(out, y)


BATCH_NORM = register_op(OpDef(
    "batch_norm", (5, 5), "injective", _infer, "inputs x, gamma, beta, mean, var; per-channel on axis",
    reference=_reference, lower=_lower, export=_export, torch=_torch, onnx={"BatchNormalization": _import}))
