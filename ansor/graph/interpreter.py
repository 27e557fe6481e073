"""The numpy reference interpreter for a whole ``Graph``: the oracle compiled networks are checked
against, and what the ONNX importer uses to fold constant subgraphs.

One numpy function per op. Convolutions and pools loop over the kernel window only (KH*KW
strided slices, each a BLAS matmul or a vector op), never over pixels, so ResNet-50 runs in
seconds. Every reduction (conv, dense, matmul, pools, normalisations) accumulates in float64 and
rounds once to the node's dtype: the oracle must not share the rounding of what it checks, and
output channels with equal weights must come out bit-identical whatever BLAS tile computed them
(the ONNX light models have constant weights and ~1e10 logits, where one ulp moves the softmax). ``erf`` reuses the operator library reference's
float64 ``erf`` (scipy is not a dependency).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
import numpy as np

from compute.reference import erf as _erf64

from .ir import OPS, Graph, GraphError, Node, display_name
from .ir_types import numpy_dtype
from .memory_plan import check_graph_memory

Kernel = Callable[..., np.ndarray]
KERNELS: dict[str, Kernel] = {}


def _kernel(*names: str) -> Callable[[Kernel], Kernel]:
    def deco(fn: Kernel) -> Kernel:
        for n in names:
            KERNELS[n] = fn
        return fn
    return deco


def run(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate ``graph`` on named input arrays; returns ``{output name: array}``.

    Every graph input must be given with its exact shape; values are converted to the input's
    dtype (a float16/bfloat16 array for an input whose ``Graph.io_dtypes`` says so becomes
    float32). Outputs with an ``io_dtypes`` entry are returned in that dtype (float16, or
    bfloat16 through ``ml_dtypes``). Errors name the input at fault.
    """
    env: dict[str, np.ndarray] = {}
    check_graph_memory(graph, compiled=False, reference=True)  # it keeps every value
    missing = [n for n in graph.inputs if n not in inputs]
    if missing:
        raise GraphError("missing graph input(s): " + ", ".join(display_name(n) for n in missing))
    unknown = [n for n in inputs if n not in graph.inputs]
    if unknown:
        raise GraphError("unknown input name(s): " + ", ".join(display_name(str(n)) for n in unknown)
                         + "; graph inputs: " + ", ".join(display_name(n) for n in graph.inputs))
    for name, t in graph.inputs.items():
        arr = np.asarray(inputs[name])
        if arr.shape != t.shape:
            raise GraphError(f"input {display_name(name)}: expected shape {list(t.shape)}, got {list(arr.shape)}")
        env[name] = arr.astype(t.dtype, copy=False)
    env.update(graph.constants)
    # NaN/inf are results here, not errors: whoever compares them reports them (no warning spam).
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            env[node.name] = eval_node(node, [env[i] for i in node.inputs])
    return {o: env[o].astype(numpy_dtype(graph.io_dtypes[o])) if o in graph.io_dtypes else env[o]
            for o in graph.outputs}


def eval_node(node: Node, args: list[np.ndarray]) -> np.ndarray:
    """One node's value from its input arrays (result has the node's dtype and shape)."""
    out = op_kernel(node.op)(*args, **node.attrs)
    out = np.asarray(out).astype(node.type.dtype, copy=False)
    if out.shape != node.type.shape:  # a kernel bug, not user error: say which node
        raise AssertionError(f"node {display_name(node.name)} ({node.op}) produced {out.shape}, "
                             f"expected {node.type.shape}")
    return out


# ---- elementwise ------------------------------------------------------------------------------------

for _op, _fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
                 ("maximum", np.maximum), ("minimum", np.minimum)):
    KERNELS[_op] = _fn


@_kernel("pow")
def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # x ** 2 and x ** 0.5 are the common cases (variance, norms); keep them exact and fast.
    if b.size == 1 and float(b.reshape(-1)[0]) == 2.0:
        return a * a
    return np.power(a, b)


for _op, _fn in (("sigmoid", lambda x: 1.0 / (1.0 + np.exp(-x))), ("tanh", np.tanh), ("exp", np.exp),
                 ("sqrt", np.sqrt), ("neg", np.negative), ("identity", lambda x: x.copy()),
                 ("relu", lambda x: np.maximum(x, 0).astype(x.dtype))):
    KERNELS[_op] = _fn


@_kernel("erf")
def _erf(x: np.ndarray) -> np.ndarray:
    return _erf64(x.astype(np.float64)).astype(x.dtype)


@_kernel("gelu")
def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        y = 0.5 * x64 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        y = 0.5 * x64 * (1.0 + _erf64(x64 / math.sqrt(2.0)))
    return y.astype(x.dtype)


@_kernel("clip")
def _clip(x: np.ndarray, min: float, max: float) -> np.ndarray:  # noqa: A002 - the attribute names
    return np.clip(x, min, max).astype(x.dtype)


@_kernel("cast")
def _cast(x: np.ndarray, dtype: str) -> np.ndarray:
    return x.astype(dtype)


# ---- convolution and linear algebra ----------------------------------------------------------------

def _window(xp: np.ndarray, ky: int, kx: int, oh: int, ow: int, strides: tuple[int, int],
            dil: tuple[int, int]) -> np.ndarray:
    """The [N, OH, OW, C] slice of padded NHWC data that kernel tap (ky, kx) reads."""
    y0, x0 = ky * dil[0], kx * dil[1]
    return xp[:, y0:y0 + (oh - 1) * strides[0] + 1:strides[0], x0:x0 + (ow - 1) * strides[1] + 1:strides[1], :]


@_kernel("conv2d")
def _conv2d(x: np.ndarray, w: np.ndarray, strides: tuple[int, int], padding: tuple[int, ...],
            dilation: tuple[int, int], groups: int) -> np.ndarray:
    n, h, wd, ci = x.shape
    kh, kw, ci_g, co = w.shape
    t, l, b, r = padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (t, b), (l, r), (0, 0)))
    w = w.astype(np.float64)
    oh = (h + t + b - (kh - 1) * dilation[0] - 1) // strides[0] + 1
    ow = (wd + l + r - (kw - 1) * dilation[1] - 1) // strides[1] + 1
    co_g = co // groups
    acc = np.zeros((n * oh * ow, co))
    for ky in range(kh):
        for kx in range(kw):
            win = _window(xp, ky, kx, oh, ow, strides, dilation).reshape(n * oh * ow, ci)
            wk = w[ky, kx]  # [CI/groups, CO]
            if groups == 1:
                acc += win @ wk
            elif ci_g == 1:  # depthwise: output channel g*co_g + m reads input channel g
                acc += (np.repeat(win, co_g, axis=1) if co_g > 1 else win) * wk[0]
            else:
                wg = wk.reshape(ci_g, groups, co_g).transpose(1, 0, 2)            # [G, CI_g, CO_g]
                xg = win.reshape(-1, groups, ci_g).transpose(1, 0, 2)             # [G, P, CI_g]
                acc += np.matmul(xg, wg).transpose(1, 0, 2).reshape(-1, co)
    return acc.reshape(n, oh, ow, co)


@_kernel("dense")
def _dense(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x.astype(np.float64) @ w.T.astype(np.float64)


@_kernel("matmul")
def _matmul(a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.matmul(np.swapaxes(a, -1, -2) if transpose_a else a, np.swapaxes(b, -1, -2) if transpose_b else b)


# ---- normalisation, pooling ---------------------------------------------------------------------------

def _channel_shape(ndim: int, axis: int) -> tuple[int, ...]:
    return tuple(-1 if i == axis else 1 for i in range(ndim))


@_kernel("batch_norm")
def _batch_norm(x, gamma, beta, mean, var, axis: int, eps: float) -> np.ndarray:
    shape = _channel_shape(x.ndim, axis)
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    shift = beta - mean * scale
    return x * scale.astype(x.dtype).reshape(shape) + shift.astype(x.dtype).reshape(shape)


def _pool_geometry(x: np.ndarray, kernel, strides, padding, ceil_mode):
    _, h, w, _ = x.shape
    t, l, b, r = padding
    outs = []
    for size, k, s, p0, p1 in ((h, kernel[0], strides[0], t, b), (w, kernel[1], strides[1], l, r)):
        span = size + p0 + p1 - k
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + p0:
            o -= 1
        outs.append(o)
    # ceil mode may need windows that run past the bottom/right padding: pad more (never counted).
    extra_b = max(0, (outs[0] - 1) * strides[0] + kernel[0] - (h + t + b))
    extra_r = max(0, (outs[1] - 1) * strides[1] + kernel[1] - (w + l + r))
    return outs, ((0, 0), (t, b + extra_b), (l, r + extra_r), (0, 0)), (extra_b, extra_r)


@_kernel("max_pool2d")
def _max_pool(x, kernel, strides, padding, ceil_mode) -> np.ndarray:
    (oh, ow), pads, _ = _pool_geometry(x, kernel, strides, padding, ceil_mode)
    xp = np.pad(x, pads, constant_values=-np.inf) if any(p for pp in pads for p in pp) else x
    out = None
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            win = _window(xp, ky, kx, oh, ow, strides, (1, 1))
            out = win.copy() if out is None else np.maximum(out, win)
    return out


@_kernel("avg_pool2d")
def _avg_pool(x, kernel, strides, padding, ceil_mode, count_include_pad) -> np.ndarray:
    (oh, ow), pads, (eb, er) = _pool_geometry(x, kernel, strides, padding, ceil_mode)
    xp = np.pad(x.astype(np.float64), pads)
    # The divisor counts real pixels (and, with count_include_pad, the declared padding, but
    # never the extra ceil-mode overhang), computed by pooling a mask the same way.
    mask = np.zeros((1, *xp.shape[1:3], 1))
    t, l, b, r = padding
    if count_include_pad:
        mask[:, :xp.shape[1] - eb, :xp.shape[2] - er] = 1
    else:
        mask[:, t:t + x.shape[1], l:l + x.shape[2]] = 1
    total = np.zeros((x.shape[0], oh, ow, x.shape[3]))
    count = np.zeros((1, oh, ow, 1))
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            total += _window(xp, ky, kx, oh, ow, strides, (1, 1))
            count += _window(mask, ky, kx, oh, ow, strides, (1, 1))
    return total / count


@_kernel("global_avg_pool")
def _global_pool(x) -> np.ndarray:
    return x.astype(np.float64).mean(axis=(1, 2), keepdims=True)


@_kernel("softmax")
def _softmax(x, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True, dtype=np.float64)


@_kernel("layer_norm")
def _layer_norm(x, gamma, beta, axis: int, eps: float) -> np.ndarray:
    axes = tuple(range(axis, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x64 - mean) / np.sqrt(var + eps) * gamma + beta


@_kernel("lrn")
def _lrn(x, size: int, alpha: float, beta: float, bias: float, axis: int) -> np.ndarray:
    # ONNX: square_sum[c] = sum over [c - floor((size-1)/2), c + ceil((size-1)/2)].
    sq = np.moveaxis(x.astype(np.float64) ** 2, axis, -1)
    c = sq.shape[-1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    csum = np.concatenate([np.zeros((*sq.shape[:-1], 1)), np.cumsum(sq, axis=-1)], axis=-1)
    idx = np.arange(c)
    s = csum[..., np.minimum(idx + hi + 1, c)] - csum[..., np.maximum(idx - lo, 0)]
    return x / np.moveaxis((bias + alpha / size * s) ** beta, -1, axis)


@_kernel("reduce_mean")
def _reduce_mean(x, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return x.astype(np.float64).mean(axis=axes, keepdims=keepdims)


# ---- data movement ------------------------------------------------------------------------------------

@_kernel("reshape")
def _reshape(x, shape) -> np.ndarray:
    return x.reshape(shape)


@_kernel("transpose")
def _transpose(x, perm) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(perm))


@_kernel("concat")
def _concat(*xs: np.ndarray, axis: int) -> np.ndarray:
    return np.concatenate(xs, axis=axis)


@_kernel("pad")
def _pad(x, before, after, value: float) -> np.ndarray:
    return np.pad(x, list(zip(before, after)), constant_values=value)


@_kernel("slice")
def _slice(x, begin, end, step) -> np.ndarray:
    return x[tuple(slice(b, e, s) for b, e, s in zip(begin, end, step))]


_missing = sorted(n for n, d in OPS.items() if d.legacy and n not in KERNELS)
if _missing:  # every legacy op must be runnable (ansor.graph.ops checks the others): fail at import
    raise ImportError(f"interpreter has no kernel for op(s): {', '.join(_missing)}")


def op_kernel(op: str) -> Kernel:
    """The numpy function for ``op`` (keyword arguments are the node's attributes)."""
    fn = KERNELS.get(op) or OPS[op].reference
    assert fn is not None, op  # ansor.graph.ops refuses an operator without a reference at import
    return fn
