"""The ONNX activation functions beyond relu/sigmoid/tanh: LeakyRelu, HardSigmoid, HardSwish, Elu,
Selu, Celu, Softplus and Mish, each one elementwise op (``op_kit.elementwise_unary``) whose graph
attributes are the ONNX ones (alpha, beta, gamma), so export writes them back as they are.

Numerics: the expression language has exp and log but no expm1/log1p, so those are built here in
forms that keep their relative accuracy near 0 (Kahan's tricks) and never overflow: softplus is
``max(x, 0) + log1p(exp(-|x|))`` (``log(1 + exp(x))`` is inf from x ~ 89 on), and the ELU family
uses expm1 (``exp(x) - 1`` loses every digit of a tiny negative x).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, const

from ..ir_types import GraphError, TensorType
from ..op_kit import elementwise_unary

_SELU_ALPHA = 1.67326319217681884765625  # the ONNX defaults (float32 values of the paper's constants)
_SELU_GAMMA = 1.05070102214813232421875


def _float_attrs(op: str, **defaults: float):
    """The ``attrs`` rule of an op whose attributes are the floats ``defaults`` (filled in when
    absent); any other attribute, or a non-number, is an error naming the op."""
    def rule(t: TensorType, given: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(given) - set(defaults))
        if unknown:
            raise GraphError(f"{op}: unknown attribute(s) {', '.join(unknown)}")
        out = {}
        for k, d in defaults.items():
            v = given.get(k, d)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise GraphError(f"{op}: {k} must be a number, got {v!r}")
            out[k] = float(v)
        return out
    return rule


def _onnx_floats(*names: str):
    """The graph attributes from an ONNX node's: the float attributes ``names`` it sets."""
    def conv(attrs: Mapping[str, Any]) -> dict[str, Any]:
        return {k: float(attrs[k]) for k in names if k in attrs}
    return conv


def _c(v: Expr, x: float) -> Expr:
    return const(x, v.dtype)


def expm1(v: Expr) -> Expr:
    """exp(v) - 1, accurate near 0: Kahan's ``(u - 1) * v / log(u)`` with ``u = exp(v)`` for
    |v| < 0.5 (where ``u`` is neither 0 nor inf), the plain form elsewhere (no cancellation)."""
    u = te.exp(v)
    one = _c(v, 1.0)
    small = te.if_then_else(u == one, v, (u - one) * v / te.log(u))
    return te.if_then_else(te.abs(v) < _c(v, 0.5), small, u - one)


def log1p(u: Expr) -> Expr:
    """log(1 + u) for u >= 0, accurate for tiny u: Kahan's ``log(w) * u / (w - 1)``, w = 1 + u."""
    one = _c(u, 1.0)
    w = one + u
    return te.if_then_else(w == one, u, te.log(w) * u / (w - one))


def softplus(v: Expr) -> Expr:
    """log(1 + exp(v)) without overflow: max(v, 0) + log1p(exp(-|v|))."""
    return te.max(v, _c(v, 0.0)) + log1p(te.exp(-te.abs(v)))


def _np_softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x.astype(np.float64))


def _np_elu(x: np.ndarray, alpha: float) -> np.ndarray:
    x = x.astype(np.float64)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def _clamp01(v: Expr) -> Expr:
    return te.max(te.min(v, _c(v, 1.0)), _c(v, 0.0))


def _leaky_relu(v: Expr, alpha: float) -> Expr:
    """max(v, 0) + alpha * min(v, 0) is exact (one side is 0) and, unlike a select whose arms
    read v, needs no masked loads in vector code; an infinite alpha would make inf * 0 = NaN."""
    if not np.isfinite(alpha):
        return te.if_then_else(v < _c(v, 0.0), v * _c(v, alpha), v)
    return te.max(v, _c(v, 0.0)) + _c(v, alpha) * te.min(v, _c(v, 0.0))


LEAKY_RELU = elementwise_unary(
    "leaky_relu",
    reference=lambda x, alpha: np.where(x < 0, x * np.float64(alpha), x),
    expr=lambda v, n: _leaky_relu(v, n.attrs["alpha"]),
    onnx_type="LeakyRelu", onnx_attrs=_onnx_floats("alpha"),
    attrs=_float_attrs("leaky_relu", alpha=0.01),
    torch=lambda r, n, t: r.F.leaky_relu(t, n.attrs["alpha"]),
    doc="x if x >= 0 else alpha * x")

HARD_SIGMOID = elementwise_unary(
    "hard_sigmoid",
    reference=lambda x, alpha, beta: np.clip(x.astype(np.float64) * alpha + beta, 0.0, 1.0),
    expr=lambda v, n: _clamp01(v * _c(v, n.attrs["alpha"]) + _c(v, n.attrs["beta"])),
    onnx_type="HardSigmoid", onnx_attrs=_onnx_floats("alpha", "beta"),
    attrs=_float_attrs("hard_sigmoid", alpha=0.2, beta=0.5),
    torch=lambda r, n, t: r.torch.clamp(t * n.attrs["alpha"] + n.attrs["beta"], 0.0, 1.0),
    doc="max(0, min(1, alpha * x + beta))")

HARD_SWISH = elementwise_unary(
    "hard_swish",
    reference=lambda x: x * np.clip(x.astype(np.float64) / 6.0 + 0.5, 0.0, 1.0),
    expr=lambda v, n: v * _clamp01(v * _c(v, 1.0 / 6.0) + _c(v, 0.5)),
    onnx_type="HardSwish",
    torch=lambda r, n, t: r.F.hardswish(t),
    doc="x * max(0, min(1, x / 6 + 1 / 2))")

ELU = elementwise_unary(
    "elu",
    reference=_np_elu,
    expr=lambda v, n: te.if_then_else(v > _c(v, 0.0), v, _c(v, n.attrs["alpha"]) * expm1(v)),
    onnx_type="Elu", onnx_attrs=_onnx_floats("alpha"),
    attrs=_float_attrs("elu", alpha=1.0),
    torch=lambda r, n, t: r.F.elu(t, n.attrs["alpha"]),
    doc="x if x > 0 else alpha * (exp(x) - 1)")

SELU = elementwise_unary(
    "selu",
    reference=lambda x, alpha, gamma: gamma * _np_elu(x, alpha),
    expr=lambda v, n: _c(v, n.attrs["gamma"]) * te.if_then_else(
        v > _c(v, 0.0), v, _c(v, n.attrs["alpha"]) * expm1(v)),
    onnx_type="Selu", onnx_attrs=_onnx_floats("alpha", "gamma"),
    attrs=_float_attrs("selu", alpha=_SELU_ALPHA, gamma=_SELU_GAMMA),
    torch=lambda r, n, t: n.attrs["gamma"] * r.F.elu(t, n.attrs["alpha"]),
    doc="gamma * (x if x > 0 else alpha * (exp(x) - 1))")


def _celu_attrs(t: TensorType, given: dict[str, Any]) -> dict[str, Any]:
    out = _float_attrs("celu", alpha=1.0)(t, given)
    if out["alpha"] == 0.0:
        raise GraphError("celu: alpha must not be 0 (it divides x)")
    return out


CELU = elementwise_unary(
    "celu",
    reference=lambda x, alpha: np.maximum(x, 0.0) + np.minimum(
        0.0, alpha * np.expm1(np.minimum(x.astype(np.float64) / alpha, 0.0))),
    expr=lambda v, n: te.max(v, _c(v, 0.0)) + te.min(
        _c(v, 0.0), _c(v, n.attrs["alpha"]) * expm1(v / _c(v, n.attrs["alpha"]))),
    onnx_type="Celu", onnx_attrs=_onnx_floats("alpha"),
    attrs=_celu_attrs,
    torch=lambda r, n, t: r.F.celu(t, n.attrs["alpha"]),
    doc="max(0, x) + min(0, alpha * (exp(x / alpha) - 1))")

SOFTPLUS = elementwise_unary(
    "softplus",
    reference=_np_softplus,
    expr=lambda v, n: softplus(v),
    onnx_type="Softplus",
    torch=lambda r, n, t: r.F.softplus(t),
    doc="log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|))")

MISH = elementwise_unary(
    "mish",
    reference=lambda x: x * np.tanh(_np_softplus(x)),
    expr=lambda v, n: v * te.tanh(softplus(v)),
    onnx_type="Mish",
    torch=lambda r, n, t: r.F.mish(t),
    doc="x * tanh(softplus(x))")
