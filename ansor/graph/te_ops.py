"""Tensor-expression versions of the graph IR's ops, to turn a fused subgraph into a ComputeDAG.

``lower_group(group, graph)`` builds one ``te`` computation per node of a ``FusedGroup`` over
placeholders for the group's inputs. Where the operator library (``compute.ops``) has the op with
the IR's exact semantics it is used (conv2d NHWC, depthwise conv2d NHWC, dense, transpose, reshape, pad);
the rest is written here (broadcast arithmetic with the IR's numpy rules, softmax and layer norm
over any axis, pools with ceil mode and ``count_include_pad=False``, LRN, concat, slice, ...).

Tensor names are generated (``conv2d_0``, ``p1``), never taken from the model: names in a model
are untrusted and the DAG's workload key must not depend on them, so two identical blocks of a
network give the same key. Some ops need a small derived constant (an average pool's divisor per
output position): ``LoweredGroup.inputs`` lists, per placeholder, either the graph value it reads
or such an array.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compute import ops, te
from compute.expr import Expr, IterVar, cast, const
from compute.tensor import Tensor

from .fuse import FusedGroup
from .ir import OPS, Graph, GraphError, Node, display_name


@dataclass
class LoweredGroup:
    """A fused group as tensors: ``placeholders`` (bound to ``inputs``: a value name or a derived
    numpy array each) and the ``output`` tensor. A placeholder may read its value in another
    shape of the same size, row-major (a depthwise conv's weight)."""

    placeholders: list[Tensor]
    inputs: list[str | np.ndarray]
    output: Tensor

    @property
    def tensors(self) -> list[Tensor]:
        """Kernel argument order: placeholders, then the output."""
        return [*self.placeholders, self.output]


class LowerCtx:
    """What a lowering rule gets besides its node and input tensors: fresh tensor names, derived
    constants as extra placeholders, and which placeholders one node alone reads."""

    def __init__(self) -> None:
        self.placeholders: list[Tensor] = []
        self.inputs: list[str | np.ndarray] = []
        self.count = 0
        # ids of the placeholders exactly one node of the group reads (a lowering may then
        # replace such a placeholder by one of another shape over the same buffer)
        self.read_once: set[int] = set()
        # the graph's constants by value name (a lowering may bind a constant in another layout)
        self.constants: dict[str, np.ndarray] = {}

    def name(self, op: str) -> str:
        self.count += 1
        return f"{op}_{self.count}"

    def extra(self, arr: np.ndarray) -> Tensor:
        """A placeholder for a derived constant array."""
        t = te.placeholder(arr.shape, str(arr.dtype), f"p{len(self.placeholders)}")
        self.placeholders.append(t)
        self.inputs.append(np.require(arr, requirements="C"))  # keeps a 0-d array 0-d
        return t


LowerFn = Callable[[LowerCtx, Node, list[Tensor]], Tensor]
LOWER: dict[str, LowerFn] = {}


def _lower(*names: str) -> Callable[[LowerFn], LowerFn]:
    def deco(fn: LowerFn) -> LowerFn:
        for n in names:
            LOWER[n] = fn
        return fn
    return deco


def broadcast_index(t: Tensor, i: Sequence[Expr], out_shape: Sequence[int]) -> tuple:
    """Numpy broadcasting: the index of ``t`` read at output index ``i``."""
    off = len(out_shape) - t.ndim
    return tuple(const(0) if n == 1 and out_shape[d + off] != 1 else i[d + off] for d, n in enumerate(t.shape))


BINARY_EXPR: dict[str, Callable[[Expr, Expr], Expr]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: te.pow(a, b),
    "maximum": lambda a, b: te.max(a, b), "minimum": lambda a, b: te.min(a, b),
}
_BINARY = BINARY_EXPR


@_lower(*_BINARY)
def _binary(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    a, b = xs
    fn = _BINARY[node.op]
    shape = node.type.shape
    return te.compute(shape, lambda *i: fn(a[broadcast_index(a, i, shape)], b[broadcast_index(b, i, shape)]),
                      name=ctx.name(node.op), tag="broadcast" if a.shape != b.shape else "elemwise")


def unary_lower(fn: Callable[[Expr, Node], Expr]) -> LowerFn:
    """The lowering of an elementwise op given its scalar body ``fn(value, node)``."""
    def lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
        x = xs[0]
        return te.compute(x.shape, lambda *i: fn(x[i], node), name=ctx.name(node.op), tag="elemwise")
    return lower


def _gelu_expr(v: Expr, node: Node) -> Expr:
    dtype = v.dtype
    half, one = const(0.5, dtype), const(1.0, dtype)
    if node.attrs["approximate"] == "tanh":
        c = const(math.sqrt(2.0 / math.pi), dtype)
        return half * v * (one + te.tanh(c * (v + const(0.044715, dtype) * v * v * v)))
    return half * v * (one + te.erf(v * const(1.0 / math.sqrt(2.0), dtype)))


UNARY_EXPR: dict[str, Callable[[Expr, Node], Expr]] = {
    "relu": lambda v, n: te.max(v, const(0, v.dtype)),
    "sigmoid": lambda v, n: te.sigmoid(v), "tanh": lambda v, n: te.tanh(v),
    "exp": lambda v, n: te.exp(v), "sqrt": lambda v, n: te.sqrt(v), "erf": lambda v, n: te.erf(v),
    "neg": lambda v, n: -v, "identity": lambda v, n: v, "gelu": _gelu_expr,
    "clip": lambda v, n: _clip_expr(v, n.attrs["min"], n.attrs["max"]),
    "cast": lambda v, n: cast(v, n.attrs["dtype"]),
}
"""Elementwise unary ops as expressions of one value (the blocked-layout lowering reuses them;
operators of ``ansor/graph/ops/`` carry theirs as ``OpDef.expr``: see ``unary_expr``)."""
for _op, _fn in UNARY_EXPR.items():
    LOWER[_op] = unary_lower(_fn)


def unary_expr(op: str) -> Callable[[Expr, Node], Expr] | None:
    """The scalar body of an elementwise unary op, or None if ``op`` is not one."""
    d = OPS.get(op)
    if op in UNARY_EXPR or d is None:
        return UNARY_EXPR.get(op)
    return d.expr if d.expr is not None and d.arity == (1, 1) and d.pattern == "elemwise" else None


def binary_expr(op: str) -> Callable[[Expr, Expr], Expr] | None:
    """The scalar body of a broadcasting binary op, or None if ``op`` is not one."""
    d = OPS.get(op)
    if op in BINARY_EXPR or d is None:
        return BINARY_EXPR.get(op)
    return d.expr if d.expr is not None and d.arity == (2, 2) and d.pattern == "broadcast" else None


def _clip_expr(v: Expr, lo: float, hi: float) -> Expr:
    if math.isfinite(hi):
        v = te.min(v, const(hi, v.dtype))
    if math.isfinite(lo):
        v = te.max(v, const(lo, v.dtype))
    return v


@_lower("conv2d")
def _conv2d(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
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


@_lower("dense")
def _dense(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    data, weight = xs
    k = next((i for i, p in enumerate(ctx.placeholders) if p is weight), None)
    bound = None if k is None else ctx.inputs[k]
    if id(weight) in ctx.read_once and isinstance(bound, str) and bound in ctx.constants:
        # A constant weight [N, K] (ONNX Gemm transB, PyTorch Linear) is bound transposed, as
        # [K, N], once at compile time: the output columns then read it contiguously, so they
        # vectorize (on [N, K] each lane would gather from a row 4*K bytes away).
        w_t = np.ascontiguousarray(ctx.constants[bound].T)
        wt = te.placeholder(w_t.shape, weight.dtype, weight.name)
        ctx.placeholders[k] = wt
        ctx.inputs[k] = w_t
        rk = te.reduce_axis((0, data.shape[1]), "k")
        return te.compute((data.shape[0], w_t.shape[1]), lambda i, j: te.sum(data[i, rk] * wt[rk, j], axis=rk),
                          name=ctx.name("dense"), tag="dense")
    return ops.dense(data, weight, name=ctx.name("dense"))


@_lower("matmul")
def _matmul(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    a, b = xs
    ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
    shape = node.type.shape
    kdim = a.shape[-2] if ta else a.shape[-1]
    k = te.reduce_axis((0, kdim), "k")
    nb = len(shape) - 2

    def body(*i: IterVar) -> Expr:
        batch, r, c = i[:nb], i[nb], i[nb + 1]
        ab = _idx_prefix(a, batch, shape[:nb])
        bb = _idx_prefix(b, batch, shape[:nb])
        av = a[(*ab, k, r)] if ta else a[(*ab, r, k)]
        bv = b[(*bb, c, k)] if tb else b[(*bb, k, c)]
        return te.sum(av * bv, axis=k)

    return te.compute(shape, body, name=ctx.name("matmul"), tag="batch_matmul")


def _idx_prefix(t: Tensor, batch: Sequence[IterVar], bshape: Sequence[int]) -> tuple:
    """Broadcast batch index of ``t`` (whose last two axes are the matrix)."""
    tb = t.shape[:-2]
    off = len(bshape) - len(tb)
    return tuple(const(0) if n == 1 and bshape[d + off] != 1 else batch[d + off] for d, n in enumerate(tb))


@_lower("batch_norm")
def _batch_norm(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x, gamma, beta, mean, var = xs
    ax, eps = node.attrs["axis"], const(node.attrs["eps"], x.dtype)

    def body(*i: IterVar) -> Expr:
        c = i[ax]
        return (x[i] - mean[c]) * (gamma[c] * te.rsqrt(var[c] + eps)) + beta[c]

    return te.compute(x.shape, body, name=ctx.name("batch_norm"), tag="injective")


def _padded(ctx: LowerCtx, x: Tensor, pads: Sequence[tuple[int, int]], value: float | Expr) -> Tensor:
    if not any(p for pp in pads for p in pp):
        return x
    return ops.pad(x, [p[0] for p in pads], [p[1] for p in pads], value, name=ctx.name("pad"))


def _pool_pads(x: Tensor, node: Node) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Padding of the NHWC input, with the extra bottom/right overhang ceil mode needs."""
    _, oh, ow, _ = node.type.shape
    (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["strides"]
    t, l, b, r = node.attrs["padding"]
    eb = max(0, (oh - 1) * sh + kh - (x.shape[1] + t + b))
    er = max(0, (ow - 1) * sw + kw - (x.shape[2] + l + r))
    return [(0, 0), (t, b + eb), (l, r + er), (0, 0)], (eb, er)


@_lower("max_pool2d")
def _max_pool(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    pads, _ = _pool_pads(x, node)
    src = _padded(ctx, x, pads, te.min_value(x.dtype))
    (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["strides"]
    rh, rw = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")
    return te.compute(node.type.shape, lambda n, h, w, c: te.max(src[n, h * sh + rh, w * sw + rw, c], axis=[rh, rw]),
                      name=ctx.name("max_pool2d"), tag="pool")


@_lower("avg_pool2d")
def _avg_pool(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    pads, (eb, er) = _pool_pads(x, node)
    src = _padded(ctx, x, pads, 0.0)
    (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["strides"]
    _, oh, ow, _ = node.type.shape
    # The divisor per output position (real pixels, plus declared padding with
    # count_include_pad, never the ceil-mode overhang): the interpreter's mask, pooled once here.
    hp, wp = x.shape[1] + pads[1][0] + pads[1][1], x.shape[2] + pads[2][0] + pads[2][1]
    mask = np.zeros((hp, wp))
    t, l, _, _ = node.attrs["padding"]
    if node.attrs["count_include_pad"]:
        mask[:hp - eb, :wp - er] = 1
    else:
        mask[t:t + x.shape[1], l:l + x.shape[2]] = 1
    count = np.zeros((oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            count += mask[ky:ky + (oh - 1) * sh + 1:sh, kx:kx + (ow - 1) * sw + 1:sw]
    inv = ctx.extra((1.0 / count).astype(x.dtype))
    rh, rw = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")
    total = te.compute(node.type.shape, lambda n, h, w, c: te.sum(src[n, h * sh + rh, w * sw + rw, c], axis=[rh, rw]),
                       name=ctx.name("pool_sum"), tag="pool")
    return te.compute(node.type.shape, lambda n, h, w, c: total[n, h, w, c] * inv[h, w],
                      name=ctx.name("avg_pool2d"), tag="elemwise")


@_lower("global_avg_pool")
def _global_pool(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    rh, rw = te.reduce_axis((0, x.shape[1]), "rh"), te.reduce_axis((0, x.shape[2]), "rw")
    inv = const(1.0 / (x.shape[1] * x.shape[2]), x.dtype)
    return te.compute(node.type.shape, lambda n, h, w, c: te.sum(x[n, h + rh, w + rw, c] * inv, axis=[rh, rw]),
                      name=ctx.name("global_avg_pool"), tag="pool")


def _reduced(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


def _full_index(i: Sequence[IterVar], axes: Sequence[int], ks: Sequence[IterVar]) -> tuple:
    """Index into the input from a keepdims output index with reduce axes replaced by ``ks``."""
    kk = dict(zip(axes, ks))
    return tuple(kk.get(d, v) for d, v in enumerate(i))


def _keep(i: Sequence[IterVar], axes: Sequence[int]) -> tuple:
    return tuple(const(0) if d in axes else v for d, v in enumerate(i))


@_lower("softmax")
def _softmax(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    ax = node.attrs["axis"]
    red = _reduced(x.shape, [ax])
    k1 = te.reduce_axis((0, x.shape[ax]), "k")
    mx = te.compute(red, lambda *i: te.max(x[_full_index(i, [ax], [k1])], axis=k1), name=ctx.name("softmax_max"),
                    tag="reduce")
    ex = te.compute(x.shape, lambda *i: te.exp(x[i] - mx[_keep(i, [ax])]), name=ctx.name("softmax_exp"),
                    tag="broadcast")
    k2 = te.reduce_axis((0, x.shape[ax]), "k")
    sm = te.compute(red, lambda *i: te.sum(ex[_full_index(i, [ax], [k2])], axis=k2), name=ctx.name("softmax_sum"),
                    tag="reduce")
    return te.compute(x.shape, lambda *i: ex[i] / sm[_keep(i, [ax])], name=ctx.name("softmax"), tag="broadcast")


@_lower("layer_norm")
def _layer_norm(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x, gamma, beta = xs
    ax, dtype = node.attrs["axis"], x.dtype
    axes = list(range(ax, x.ndim))
    red = _reduced(x.shape, axes)
    inv_n = const(1.0 / math.prod(x.shape[ax:]), dtype)
    eps = const(node.attrs["eps"], dtype)
    k1 = [te.reduce_axis((0, x.shape[d]), f"k{d}") for d in axes]
    mean = te.compute(red, lambda *i: te.sum(x[_full_index(i, axes, k1)] * inv_n, axis=k1),
                      name=ctx.name("ln_mean"), tag="reduce")
    k2 = [te.reduce_axis((0, x.shape[d]), f"k{d}") for d in axes]

    def var_body(*i: IterVar) -> Expr:
        d = x[_full_index(i, axes, k2)] - mean[i]
        return te.sum(d * d * inv_n, axis=k2)

    var = te.compute(red, var_body, name=ctx.name("ln_var"), tag="reduce")
    norm_shape = x.shape[ax:]

    def out_body(*i: IterVar) -> Expr:
        r = _keep(i, axes)
        tail = i[ax:]
        return ((x[i] - mean[r]) * te.rsqrt(var[r] + eps) * gamma[broadcast_index(gamma, tail, norm_shape)]
                + beta[broadcast_index(beta, tail, norm_shape)])

    return te.compute(x.shape, out_body, name=ctx.name("layer_norm"), tag="injective")


@_lower("lrn")
def _lrn(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    a = node.attrs
    ax, size = a["axis"], a["size"]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = te.compute(x.shape, lambda *i: x[i] * x[i], name=ctx.name("lrn_sq"), tag="elemwise")
    pads = [(lo, hi) if d == ax else (0, 0) for d in range(x.ndim)]
    sqp = _padded(ctx, sq, pads, 0.0)
    r = te.reduce_axis((0, size), "r")
    s = te.compute(x.shape, lambda *i: te.sum(sqp[tuple(v + r if d == ax else v for d, v in enumerate(i))], axis=r),
                   name=ctx.name("lrn_sum"), tag="reduce")
    bias, scale, beta = (const(a["bias"], x.dtype), const(a["alpha"] / size, x.dtype), const(a["beta"], x.dtype))
    return te.compute(x.shape, lambda *i: x[i] / te.pow(bias + scale * s[i], beta), name=ctx.name("lrn"),
                      tag="elemwise")


@_lower("reduce_mean")
def _reduce_mean(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    axes, keep = list(node.attrs["axes"]), node.attrs["keepdims"]
    inv = const(1.0 / math.prod(x.shape[d] for d in axes), x.dtype)
    ks = [te.reduce_axis((0, x.shape[d]), f"k{d}") for d in axes]
    kept = [d for d in range(x.ndim) if d not in axes]

    def body(*i: IterVar) -> Expr:
        if keep:
            idx = _full_index(i, axes, ks)
        else:
            full: dict[int, Any] = dict(zip(kept, i))
            full.update(zip(axes, ks))
            idx = tuple(full[d] for d in range(x.ndim))
        return te.sum(x[idx] * inv, axis=ks)

    return te.compute(node.type.shape, body, name=ctx.name("reduce_mean"), tag="reduce")


@_lower("reshape")
def _reshape(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    return ops.reshape(xs[0], node.type.shape, name=ctx.name("reshape"))


@_lower("transpose")
def _transpose(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    return ops.transpose(xs[0], node.attrs["perm"], name=ctx.name("transpose"))


@_lower("pad")
def _pad(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    a = node.attrs
    return ops.pad(xs[0], a["before"], a["after"], a["value"], name=ctx.name("pad"))


@_lower("slice")
def _slice(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    a = node.attrs
    # Normalise begin per axis as python's slice does, so the index is begin + i * step.
    starts = [range(*slice(b, e, s).indices(d)).start for b, e, s, d in zip(a["begin"], a["end"], a["step"], x.shape)]
    return te.compute(node.type.shape, lambda *i: x[tuple(v * s + b for v, s, b in zip(i, a["step"], starts))],
                      name=ctx.name("slice"), tag="injective")


@_lower("concat")
def _concat(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    ax = node.attrs["axis"]
    offsets = np.cumsum([0] + [t.shape[ax] for t in xs]).tolist()

    def body(*i: IterVar) -> Expr:
        v = i[ax]
        # Innermost the last input; each earlier input j wraps it as ``v < end_j ? x_j : rest``,
        # so input j is read only where v lies in [offsets[j], offsets[j + 1]).
        out: Expr | None = None
        for t, off, end in reversed(list(zip(xs, offsets, offsets[1:]))):
            val = t[tuple(v - off if d == ax else u for d, u in enumerate(i))] if off else t[i]
            out = val if out is None else te.if_then_else(v < end, val, out)
        assert out is not None
        return out

    return te.compute(node.type.shape, body, name=ctx.name("concat"), tag="injective")


def lower_group(group: FusedGroup, graph: Graph) -> LoweredGroup:
    """The group as tensors over placeholders ``p0, p1, ...`` for its inputs (first-use order)."""
    ctx = LowerCtx()
    ctx.constants = graph.constants
    env: dict[str, Tensor] = {}
    for value in group.inputs:
        t = graph.type_of(value)
        ph = te.placeholder(t.shape, t.dtype, f"p{len(ctx.placeholders)}")
        ctx.placeholders.append(ph)
        ctx.inputs.append(value)
        env[value] = ph
    reads = [i for n in group.nodes for i in n.inputs]
    ctx.read_once = {id(env[v]) for v in group.inputs if reads.count(v) == 1}
    for node in group.nodes:
        fn = LOWER.get(node.op) or OPS[node.op].lower
        if fn is None:
            raise GraphError(f"node {display_name(node.name)}: op {node.op!r} has no tensor-expression "
                             "lowering; it cannot be compiled")
        try:
            env[node.name] = fn(ctx, node, [env[i] for i in node.inputs])
        except (ValueError, TypeError) as e:
            raise GraphError(f"node {display_name(node.name)} ({node.op}): cannot lower: {e}") from None
    return LoweredGroup(ctx.placeholders, ctx.inputs, env[group.output])
