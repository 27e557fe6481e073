"""The operator kinds of the graph IR: per op, its arity, fusion pattern and shape/type rule,
and (for operators declared in ``ansor/graph/ops/``) everything else the op needs.

``OPS`` maps an op name to its ``OpDef``; ``make_node`` (``ir.py``) calls the op's ``infer`` on the
input types to get the output type and the normalised attributes, so a bad shape or attribute
fails when the node is made. Layout conventions are in the ``ir.py`` docstring.

An operator's one home is a module of ``ansor/graph/ops/`` that calls ``register_op`` with a
complete ``OpDef``: type rule, numpy reference, tensor-expression lowering, ONNX import rule(s),
ONNX export and PyTorch peer; ``ansor.graph.ops`` checks at import that none is missing. The ops
still registered below with ``_register`` (``legacy``) keep those parts in the per-concern tables
of ``interpreter.py``, ``te_ops.py``, ``onnx_export.py``, ``torch_peer.py`` and the ONNX frontend.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ir_types import GraphError, TensorType

# ---- op definitions ---------------------------------------------------------------------------

Infer = Callable[[Sequence[TensorType], dict[str, Any]], tuple[TensorType, dict[str, Any]]]
# The other parts' signatures (their argument types live in the modules that call them):
#   reference(*arrays, **attrs) -> np.ndarray                       (interpreter.py)
#   lower(ctx: te_ops.LowerCtx, node, tensors) -> Tensor            (te_ops.py)
#   export(exporter: onnx_export.Exporter, node) -> None            (onnx_export.py)
#   torch(runner: torch_peer.Runner, node, values) -> torch_peer.Value  (torch_peer.py)
#   onnx[op_type](importer, node: onnx.NodeProto, attrs) -> None    (frontend/onnx_importer.py)
#   expr(value, node) -> Expr (unary) or expr(a, b) -> Expr (binary): an elementwise op's scalar
#   body, which the blocked-layout lowering (layouts.py) reuses
Part = Callable[..., Any]
PARTS = ("reference", "lower", "onnx", "export", "torch")


@dataclass(frozen=True)
class OpDef:
    """An op kind: its arity, fusion pattern and a type rule. ``infer(input_types, attrs)``
    returns the output type and the attributes normalised (defaults filled, tuples). The other
    parts are described above; ``legacy`` ops keep them in the per-concern tables."""

    name: str
    arity: tuple[int, int]  # (min, max) number of inputs
    pattern: str
    infer: Infer
    doc: str = ""
    reference: Part | None = None
    lower: Part | None = None
    export: Part | None = None
    torch: Part | None = None
    onnx: Mapping[str, Part] = field(default_factory=dict)
    expr: Part | None = None
    legacy: bool = False

    def missing_parts(self) -> list[str]:
        """The parts a complete (non-legacy) operator must have and this one lacks."""
        return [p for p in PARTS if not getattr(self, p)]


OPS: dict[str, OpDef] = {}


def register_op(op: OpDef) -> OpDef:
    """Add an operator (one module of ``ansor/graph/ops/`` each); a name may be taken once."""
    if op.name in OPS:
        raise ImportError(f"graph op {op.name!r} is registered twice")
    OPS[op.name] = op
    return op


def _register(name: str, arity: int | tuple[int, int], pattern: str, doc: str = "") -> Callable[[Infer], Infer]:
    def deco(fn: Infer) -> Infer:
        ar = (arity, arity) if isinstance(arity, int) else arity
        OPS[name] = OpDef(name, ar, pattern, fn, doc, legacy=True)
        return fn
    return deco


def ints_attr(value: Any, n: int, what: str, minimum: int = 0) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value),) * n
    try:
        out = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise GraphError(f"{what} must be an int or {n} ints, got {value!r}") from None
    if len(out) != n or any(v < minimum for v in out):
        raise GraphError(f"{what} must be {n} integer(s) >= {minimum}, got {value!r}")
    return out


def float_input(t: TensorType, what: str) -> None:
    if not t.dtype.startswith("float"):
        raise GraphError(f"{what} must be a float tensor, got {t}")


def norm_axis(axis: Any, ndim: int, what: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -ndim <= axis < max(ndim, 1):
        raise GraphError(f"{what} {axis!r} is out of range for rank {ndim}")
    return int(axis) % max(ndim, 1)


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """Numpy broadcasting of two shapes; a GraphError names both if they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise GraphError(f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def same_dtype(ts: Sequence[TensorType]) -> str:
    dtypes = {t.dtype for t in ts}
    if len(dtypes) > 1:
        raise GraphError(f"inputs have different dtypes: {', '.join(str(t) for t in ts)}")
    return ts[0].dtype


for _name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
    def _binary(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
        return TensorType(broadcast_shapes(ts[0].shape, ts[1].shape), same_dtype(ts)), {}
    _register(_name, 2, "broadcast", "numpy-broadcasting binary arithmetic")(_binary)

for _name in ("relu", "sigmoid", "tanh", "exp", "sqrt", "erf", "neg", "identity"):
    def _unary(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
        return ts[0], {}
    _register(_name, 1, "elemwise")(_unary)


@_register("gelu", 1, "elemwise", "GELU; approximate='none' (erf form) or 'tanh'")
def _gelu(ts, attrs):
    float_input(ts[0], "gelu input")
    approx = attrs.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise GraphError(f"gelu: approximate must be 'none' or 'tanh', got {approx!r}")
    return ts[0], {"approximate": approx}


@_register("clip", 1, "elemwise", "clamp to [min, max] (relu6 is clip(0, 6))")
def _clip(ts, attrs):
    lo, hi = attrs.get("min", -math.inf), attrs.get("max", math.inf)
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)) or lo > hi:
        raise GraphError(f"clip: min/max must be numbers with min <= max, got {lo!r}, {hi!r}")
    return ts[0], {"min": float(lo), "max": float(hi)}


@_register("cast", 1, "elemwise")
def _cast(ts, attrs):
    return TensorType(ts[0].shape, attrs.get("dtype", "float32")), {"dtype": attrs.get("dtype", "float32")}


@_register("conv2d", 2, "out_elemwise_fusable", "NHWC data, HWIO weight [KH, KW, CI/groups, CO]")
def _conv2d(ts, attrs):
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


@_register("dense", 2, "out_elemwise_fusable", "data [M, K] @ weight[N, K]^T -> [M, N]")
def _dense(ts, attrs):
    data, weight = ts
    if data.ndim != 2 or weight.ndim != 2 or data.shape[1] != weight.shape[1]:
        raise GraphError(f"dense: need data [M, K] and weight [N, K], got {data} and {weight}")
    return TensorType((data.shape[0], weight.shape[0]), same_dtype(ts)), {}


@_register("matmul", 2, "out_elemwise_fusable", "batched matmul with broadcast batch dims")
def _matmul(ts, attrs):
    a, b = ts
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
    if a.ndim < 2 or b.ndim < 2:
        raise GraphError(f"matmul: inputs must be at least 2-D, got {a} and {b}")
    m, ka = (a.shape[-1], a.shape[-2]) if ta else a.shape[-2:]
    kb, n = (b.shape[-1], b.shape[-2]) if tb else b.shape[-2:]
    if ka != kb:
        raise GraphError(f"matmul: inner dimensions differ ({ka} vs {kb}) for {a} and {b}"
                         f" (transpose_a={ta}, transpose_b={tb})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return TensorType((*batch, m, n), same_dtype(ts)), {"transpose_a": ta, "transpose_b": tb}


@_register("batch_norm", 5, "injective", "inputs x, gamma, beta, mean, var; per-channel on axis")
def _batch_norm(ts, attrs):
    x = ts[0]
    axis = norm_axis(attrs.get("axis", -1), x.ndim, "batch_norm axis")
    for t, what in zip(ts[1:], ("gamma", "beta", "mean", "var")):
        if t.shape != (x.shape[axis],):
            raise GraphError(f"batch_norm: {what} must have shape [{x.shape[axis]}], got {t}")
    return x, {"axis": axis, "eps": float(attrs.get("eps", 1e-5))}


def _pool_attrs(op: str, x: TensorType, attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    if x.ndim != 4:
        raise GraphError(f"{op}: input must be 4-D NHWC, got {x}")
    ks = ints_attr(attrs.get("kernel"), 2, f"{op} kernel", 1)
    strides = ints_attr(attrs.get("strides", 1), 2, f"{op} strides", 1)
    pad = ints_attr(attrs.get("padding", 0), 4, f"{op} padding (top, left, bottom, right)")
    ceil_mode = bool(attrs.get("ceil_mode", False))
    out = []
    for size, k, s, p0, p1, axis in ((x.shape[1], ks[0], strides[0], pad[0], pad[2], "H"),
                                     (x.shape[2], ks[1], strides[1], pad[1], pad[3], "W")):
        span = size + p0 + p1 - k
        if span < 0:
            raise GraphError(f"{op}: kernel {k} exceeds the padded input extent {size + p0 + p1} along {axis}")
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + p0:  # the last window must start inside the data
            o -= 1
        out.append(o)
    return (TensorType((x.shape[0], out[0], out[1], x.shape[3]), x.dtype),
            {"kernel": ks, "strides": strides, "padding": pad, "ceil_mode": ceil_mode})


@_register("max_pool2d", 1, "out_elemwise_fusable")
def _max_pool(ts, attrs):
    return _pool_attrs("max_pool2d", ts[0], attrs)


@_register("avg_pool2d", 1, "out_elemwise_fusable", "count_include_pad decides whether padding counts in the mean")
def _avg_pool(ts, attrs):
    out, a = _pool_attrs("avg_pool2d", ts[0], attrs)
    a["count_include_pad"] = bool(attrs.get("count_include_pad", False))
    return out, a


@_register("global_avg_pool", 1, "out_elemwise_fusable", "NHWC -> [N, 1, 1, C]")
def _global_pool(ts, attrs):
    x = ts[0]
    if x.ndim != 4:
        raise GraphError(f"global_avg_pool: input must be 4-D NHWC, got {x}")
    return TensorType((x.shape[0], 1, 1, x.shape[3]), x.dtype), {}


@_register("softmax", 1, "opaque", "softmax along one axis")
def _softmax(ts, attrs):
    float_input(ts[0], "softmax input")
    return ts[0], {"axis": norm_axis(attrs.get("axis", -1), ts[0].ndim, "softmax axis")}


@_register("layer_norm", 3, "opaque", "normalise over axes [axis, rank); gamma/beta of that shape")
def _layer_norm(ts, attrs):
    x, gamma, beta = ts
    float_input(x, "layer_norm input")
    axis = norm_axis(attrs.get("axis", -1), x.ndim, "layer_norm axis")
    for t, what in ((gamma, "gamma"), (beta, "beta")):
        if broadcast_shapes(x.shape[axis:], t.shape) != x.shape[axis:]:
            raise GraphError(f"layer_norm: {what} {t} does not broadcast to the normalised shape "
                             f"{list(x.shape[axis:])}")
    return x, {"axis": axis, "eps": float(attrs.get("eps", 1e-5))}


@_register("lrn", 1, "opaque", "local response normalisation across channels (ONNX LRN)")
def _lrn(ts, attrs):
    x = ts[0]
    size = attrs.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GraphError(f"lrn: size must be a positive integer, got {size!r}")
    return x, {"size": size, "alpha": float(attrs.get("alpha", 1e-4)), "beta": float(attrs.get("beta", 0.75)),
               "bias": float(attrs.get("bias", 1.0)), "axis": norm_axis(attrs.get("axis", -1), x.ndim, "lrn axis")}


@_register("reduce_mean", 1, "reduce")
def _reduce_mean(ts, attrs):
    x = ts[0]
    axes = attrs.get("axes")
    axes = tuple(range(x.ndim)) if axes is None else tuple(sorted({norm_axis(a, x.ndim, "reduce_mean axis") for a in axes}))
    keep = bool(attrs.get("keepdims", True))
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
    return TensorType(shape, x.dtype), {"axes": axes, "keepdims": keep}


@_register("reshape", 1, "injective", "row-major reshape to a fully known shape")
def _reshape(ts, attrs):
    shape = tuple(int(d) for d in attrs.get("shape", ()))
    if any(d < 0 for d in shape) or math.prod(shape) != ts[0].size:
        raise GraphError(f"reshape: cannot reshape {ts[0]} to {list(shape)}")
    return TensorType(shape, ts[0].dtype), {"shape": shape}


@_register("transpose", 1, "injective")
def _transpose(ts, attrs):
    x = ts[0]
    perm = tuple(int(p) for p in attrs.get("perm", range(x.ndim - 1, -1, -1)))
    if sorted(perm) != list(range(x.ndim)):
        raise GraphError(f"transpose: perm {list(perm)} is not a permutation of {x.ndim} axes")
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype), {"perm": perm}


@_register("concat", (1, 1 << 20), "injective")
def _concat(ts, attrs):
    first = ts[0]
    axis = norm_axis(attrs.get("axis", 0), first.ndim, "concat axis")
    dtype = same_dtype(ts)
    for t in ts[1:]:
        if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
            raise GraphError(f"concat: inputs {', '.join(map(str, ts))} differ outside axis {axis}")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in ts)
    return TensorType(tuple(shape), dtype), {"axis": axis}


@_register("pad", 1, "injective", "constant padding: before/after per axis")
def _pad(ts, attrs):
    x = ts[0]
    before = ints_attr(attrs.get("before", 0), x.ndim, "pad before")
    after = ints_attr(attrs.get("after", 0), x.ndim, "pad after")
    shape = tuple(d + a + b for d, a, b in zip(x.shape, before, after))
    return TensorType(shape, x.dtype), {"before": before, "after": after, "value": float(attrs.get("value", 0.0))}


@_register("slice", 1, "injective", "x[begin:end:step] per axis (positive steps)")
def _slice(ts, attrs):
    x = ts[0]
    begin = ints_attr(attrs.get("begin"), x.ndim, "slice begin")
    end = ints_attr(attrs.get("end"), x.ndim, "slice end")
    step = ints_attr(attrs.get("step", 1), x.ndim, "slice step", 1)
    shape = tuple(len(range(*slice(b, e, s).indices(d))) for b, e, s, d in zip(begin, end, step, x.shape))
    return TensorType(shape, x.dtype), {"begin": begin, "end": end, "step": step}
