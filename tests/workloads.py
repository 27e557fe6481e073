"""The shared test workloads: every library op on small shapes, each with an independent numpy
implementation.

Every test file that needs "some real computations" (reference evaluator, lowering, codegen, random
schedules, the search) takes them from ``CASES``, so a new op or an edge case added here is
exercised everywhere. The numpy implementations are written from the ops' definitions with numpy
primitives only (float64, rounded to the output dtype at the end), never through the reference
evaluator, so a case checks the op's tensor expression rather than restating it.

Cases are deliberately small (at most a few thousand output points, short reductions): they are
compiled with LLVM and run under many random schedules. Odd extents (1, 3, 7, 17), non-square
shapes, strides, dilations, groups and asymmetric padding are all represented.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from compute import ops, te
from compute.ops import workloads as W
from compute.ops.winograd import conv2d_winograd_workload, weight_transform, winograd_inputs
from compute.tensor import Tensor

Arrays = list[np.ndarray]
IntOrSeq = int | Sequence[int]


@dataclass(frozen=True)
class Case:
    """One test computation.

    ``make()`` builds fresh argument tensors (inputs then outputs); ``numpy_impl(inputs)`` returns
    the expected values of the compute tensors among them, in order. ``inputs(seed)``, when set,
    draws inputs from a domain the op needs (otherwise ``compute.reference.random_inputs``).
    """

    id: str
    make: Callable[[], list[Tensor]]
    numpy_impl: Callable[[Arrays], Arrays]
    inputs: Callable[[int], Arrays] | None = field(default=None)
    rtol: float = 1e-4
    atol: float = 1e-5

    def make_inputs(self, seed: int = 0) -> Arrays:
        """Inputs for this case: the custom generator if any, else the reference's random ones."""
        if self.inputs is not None:
            return self.inputs(seed)
        from compute.reference import random_inputs

        return random_inputs(self.make(), seed)


# ---- numpy building blocks ---------------------------------------------------------------------

def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _as(dtype: str) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.asarray(x).astype(dtype)


_f32 = _as("float32")


def _tup(v: int | Sequence[int], n: int) -> tuple[int, ...]:
    return (v,) * n if isinstance(v, int) else tuple(v)


def _pads(padding: int | Sequence[int], n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    p = _tup(padding, n)
    return (p, p) if len(p) == n else (p[:n], p[n:])


def np_conv_channels_last(x: np.ndarray, w: np.ndarray, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
                          dilation: IntOrSeq = 1, groups: int = 1) -> np.ndarray:
    """N-D convolution, x [N, *S, CI], w [*K, CI/groups, CO], one GEMM per kernel tap and group."""
    nsp = x.ndim - 2
    s, d = _tup(stride, nsp), _tup(dilation, nsp)
    before, after = _pads(padding, nsp)
    xp = np.pad(_f64(x), [(0, 0), *zip(before, after), (0, 0)])
    ks = w.shape[:nsp]
    ci_g, co = w.shape[nsp:]
    co_g = co // groups
    out_sp = [(xp.shape[1 + i] - (ks[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(nsp)]
    out = np.zeros((x.shape[0], *out_sp, co))
    for tap in np.ndindex(*ks):
        sl = tuple(slice(tap[i] * d[i], tap[i] * d[i] + (out_sp[i] - 1) * s[i] + 1, s[i])
                   for i in range(nsp))
        patch = xp[(slice(None), *sl, slice(None))]
        wt = _f64(w[tap])
        for g in range(groups):
            out[..., g * co_g:(g + 1) * co_g] += (patch[..., g * ci_g:(g + 1) * ci_g]
                                                  @ wt[:, g * co_g:(g + 1) * co_g])
    return out


def np_conv2d_nchw(x: np.ndarray, w: np.ndarray, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
                   dilation: IntOrSeq = 1, groups: int = 1) -> np.ndarray:
    out = np_conv_channels_last(np.transpose(x, (0, 2, 3, 1)), np.transpose(w, (2, 3, 1, 0)),
                                stride, padding, dilation, groups)
    return np.transpose(out, (0, 3, 1, 2))


def np_depthwise_nhwc(x: np.ndarray, w: np.ndarray, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
                      dilation: IntOrSeq = 1) -> np.ndarray:
    """x [N, H, W, C], w [KH, KW, C, M]; output channel c*M + m."""
    s, d = _tup(stride, 2), _tup(dilation, 2)
    before, after = _pads(padding, 2)
    xp = np.pad(_f64(x), [(0, 0), *zip(before, after), (0, 0)])
    kh, kw, c, m = w.shape
    oh = (xp.shape[1] - (kh - 1) * d[0] - 1) // s[0] + 1
    ow = (xp.shape[2] - (kw - 1) * d[1] - 1) // s[1] + 1
    out = np.zeros((x.shape[0], oh, ow, c, m))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i * d[0]:i * d[0] + (oh - 1) * s[0] + 1:s[0],
                       j * d[1]:j * d[1] + (ow - 1) * s[1] + 1:s[1], :]
            out += patch[..., None] * _f64(w[i, j])
    return out.reshape(x.shape[0], oh, ow, c * m)


def np_conv2d_transpose_nhwc(x: np.ndarray, w: np.ndarray, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
                             output_padding: IntOrSeq = 0, dilation: IntOrSeq = 1) -> np.ndarray:
    """Scatter form: input pixel (iy, ix) adds x * w[ky, kx] at (iy*s + ky*d - pt, ix*s + kx*d - pl)."""
    s, d, op = _tup(stride, 2), _tup(dilation, 2), _tup(output_padding, 2)
    (pt, pl), (pb, pr) = _pads(padding, 2)
    n, h, wd, _ = x.shape
    kh, kw, _, co = w.shape
    full_h = (h - 1) * s[0] + (kh - 1) * d[0] + 1 + op[0]
    full_w = (wd - 1) * s[1] + (kw - 1) * d[1] + 1 + op[1]
    full = np.zeros((n, full_h, full_w, co))
    for ky in range(kh):
        for kx in range(kw):
            contrib = _f64(x) @ _f64(w[ky, kx])
            full[:, ky * d[0]:ky * d[0] + (h - 1) * s[0] + 1:s[0],
                 kx * d[1]:kx * d[1] + (wd - 1) * s[1] + 1:s[1], :] += contrib
    oh = full_h - pt - pb
    ow = full_w - pl - pr
    return full[:, pt:pt + oh, pl:pl + ow, :]


def np_pool2d_nhwc(x: np.ndarray, kernel: IntOrSeq, stride: IntOrSeq, padding: IntOrSeq,
                   kind: str) -> np.ndarray:
    ks, s = _tup(kernel, 2), _tup(stride, 2)
    before, after = _pads(padding, 2)
    if kind == "max":
        fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
        xp = np.pad(x, [(0, 0), *zip(before, after), (0, 0)], constant_values=fill)
    else:
        xp = np.pad(_f64(x), [(0, 0), *zip(before, after), (0, 0)])
    oh = (xp.shape[1] - ks[0]) // s[0] + 1
    ow = (xp.shape[2] - ks[1]) // s[1] + 1
    windows = [xp[:, i:i + (oh - 1) * s[0] + 1:s[0], j:j + (ow - 1) * s[1] + 1:s[1], :]
               for i in range(ks[0]) for j in range(ks[1])]
    if kind == "max":
        return np.max(np.stack(windows), axis=0)
    return np.sum(np.stack(windows), axis=0) / (ks[0] * ks[1])  # count_include_pad


def np_softmax(x: np.ndarray) -> np.ndarray:
    x = _f64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x = _f64(x)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * _f64(gamma) + _f64(beta)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_gelu(x: np.ndarray) -> np.ndarray:
    x = _f64(x)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def np_matmul(a: np.ndarray, b: np.ndarray, ta: bool = False, tb: bool = False) -> np.ndarray:
    a, b = _f64(a), _f64(b)
    return (np.swapaxes(a, -1, -2) if ta else a) @ (np.swapaxes(b, -1, -2) if tb else b)


def _uniform(shapes: Sequence[tuple[int, ...]], lo: float, hi: float,
             offset: float = 0.0) -> Callable[[int], Arrays]:
    def gen(seed: int) -> Arrays:
        rng = np.random.default_rng(seed)
        return [(rng.uniform(lo, hi, s) + offset).astype(np.float32) for s in shapes]
    return gen


# ---- case builders -----------------------------------------------------------------------------

CASES: list[Case] = []


def _add(case_id: str, make: Callable[[], list[Tensor]], impl: Callable[[Arrays], Arrays],
         **kw: object) -> None:
    CASES.append(Case(case_id, make, impl, **kw))  # type: ignore[arg-type]


def _tensor_case(case_id: str, shapes: Sequence[tuple[int, ...]], build: Callable[..., Tensor],
                 impl: Callable[..., np.ndarray], dtype: str = "float32", out_dtype: str | None = None,
                 names: Sequence[str] | None = None, **kw: object) -> None:
    """A case from a tensor-level op: placeholders of ``shapes`` -> ``build(*placeholders)``."""
    names = names or [chr(ord("A") + i) for i in range(len(shapes))]
    cast = _as(out_dtype or dtype)

    def make() -> list[Tensor]:
        phs = [te.placeholder(s, dtype, n) for s, n in zip(shapes, names)]
        return [*phs, build(*phs)]

    _add(case_id, make, lambda xs: [cast(impl(*xs))], **kw)


# matmul family ----------------------------------------------------------------------------------
for _m, _n, _k, _ta, _tb in [(17, 7, 9, False, False), (7, 17, 16, False, True),
                             (16, 3, 17, True, False), (5, 7, 9, True, True),
                             (1, 33, 17, False, False), (8, 8, 1, False, False)]:
    _mode = ("T" if _ta else "N") + ("T" if _tb else "N")
    _add(f"matmul_{_mode.lower()}_{_m}x{_n}x{_k}",
         lambda m=_m, n=_n, k=_k, ta=_ta, tb=_tb: W.matmul(m, n, k, transpose_a=ta, transpose_b=tb),
         lambda xs, ta=_ta, tb=_tb: [_f32(np_matmul(xs[0], xs[1], ta, tb))])

# One larger GEMM, so that multi-level tiling has room for several non-trivial split levels.
_add("matmul_nn_64x48x32", lambda: W.matmul(64, 48, 32), lambda xs: [_f32(np_matmul(xs[0], xs[1]))])
_tensor_case("matmul_int8_to_int32", [(9, 17), (17, 7)],
             lambda a, b: ops.matmul(a, b, out_dtype="int32"),
             lambda a, b: a.astype(np.int64) @ b.astype(np.int64), dtype="int8", out_dtype="int32")
_add("matmul_relu_17x7x9", lambda: W.matmul_relu(17, 7, 9),
     lambda xs: [_f32(np_relu(np_matmul(xs[0], xs[1])))])

for _b, _m, _n, _k, _ta, _tb in [(3, 7, 5, 9, False, False), (2, 5, 6, 7, False, True),
                                 (2, 4, 3, 5, True, False)]:
    _mode = ("T" if _ta else "N") + ("T" if _tb else "N")
    _add(f"batch_matmul_{_mode.lower()}_{_b}x{_m}x{_n}x{_k}",
         lambda b=_b, m=_m, n=_n, k=_k, ta=_ta, tb=_tb: W.batch_matmul(b, m, n, k, transpose_a=ta,
                                                                       transpose_b=tb),
         lambda xs, ta=_ta, tb=_tb: [_f32(np_matmul(xs[0], xs[1], ta, tb))])
_tensor_case("batch_matmul_broadcast_1x7x5_3x5x4", [(1, 7, 5), (3, 5, 4)], ops.batch_matmul,
             lambda a, b: np_matmul(a, b))

_add("dense_bias_7x17x16", lambda: W.dense(7, 17, 16),
     lambda xs: [_f32(np_matmul(xs[0], xs[1], tb=True) + xs[2])])
_add("dense_nobias_1x17x8", lambda: W.dense(1, 17, 8, bias=False),
     lambda xs: [_f32(np_matmul(xs[0], xs[1], tb=True))])
_add("dense_bias_gelu_7x17x9", lambda: W.dense_bias_gelu(7, 17, 9),
     lambda xs: [_f32(np_gelu(np_matmul(xs[0], xs[1], tb=True) + xs[2]))])
_add("dense_bias_relu_7x17x9", lambda: W.dense_bias_relu(7, 17, 9),
     lambda xs: [_f32(np_relu(np_matmul(xs[0], xs[1], tb=True) + xs[2]))])
_add("batch_matmul_softmax_2x7x17x5", lambda: W.batch_matmul_softmax(2, 7, 17, 5),
     lambda xs: [_f32(np_softmax(np_matmul(xs[0], xs[1])))])

for _shape in [(17, 7), (1, 17)]:
    _add(f"norm_{_shape[0]}x{_shape[1]}", lambda s=_shape: W.norm(*s),
         lambda xs: [_f32(np.sqrt(np.sum(_f64(xs[0]) ** 2)).reshape(1))])
_tensor_case("norm_3d_2x3x5", [(2, 3, 5)], ops.norm,
             lambda a: np.sqrt(np.sum(_f64(a) ** 2)).reshape(1))

# convolutions -----------------------------------------------------------------------------------
# (id suffix, workload args, stride, padding, dilation, groups)
for _sfx, _args in [
    ("basic", dict(N=1, L=17, CI=3, CO=4, K=3)),
    ("s2_p1", dict(N=2, L=17, CI=3, CO=4, K=3, stride=2, padding=1)),
    ("d2_p2", dict(N=1, L=17, CI=2, CO=3, K=3, padding=2, dilation=2)),
    ("g2", dict(N=1, L=7, CI=4, CO=6, K=3, padding=1, groups=2)),
    ("k1_l1", dict(N=3, L=1, CI=5, CO=2, K=1)),
]:
    _add(f"conv1d_{_sfx}", lambda a=_args: W.conv1d(**a),
         lambda xs, a=_args: [_f32(np_conv_channels_last(
             xs[0], xs[1], a.get("stride", 1), a.get("padding", 0), a.get("dilation", 1),
             a.get("groups", 1)))])

_CONV2D = [  # (suffix, N, H, W, CI, CO, KH, KW, stride, padding, dilation, groups)
    ("basic_p1", 1, 7, 7, 3, 4, 3, 3, 1, 1, 1, 1),
    ("s2_p1", 1, 9, 9, 3, 4, 3, 3, 2, 1, 1, 1),
    ("d2_p2", 1, 9, 9, 2, 3, 3, 3, 1, 2, 2, 1),
    ("g2", 1, 7, 7, 4, 6, 3, 3, 1, 1, 1, 2),
    ("g3_depthwise_like", 1, 5, 5, 3, 3, 3, 3, 1, 1, 1, 3),
    ("1x1_n2", 2, 5, 5, 8, 4, 1, 1, 1, 0, 1, 1),
    ("nonsquare", 1, 5, 9, 3, 4, 3, 1, (1, 2), (1, 0), 1, 1),
    ("asym_pad", 1, 6, 6, 2, 3, 3, 3, 1, (0, 1, 2, 1), 1, 1),
    ("s2_nopad_17", 1, 17, 5, 2, 3, 3, 3, 2, 0, 1, 1),
    ("medium_14x14x16", 1, 14, 14, 16, 16, 3, 3, 1, 1, 1, 1),
]
for _sfx, _n, _h, _w, _ci, _co, _kh, _kw, _s, _p, _d, _g in _CONV2D:
    _add(f"conv2d_nhwc_{_sfx}",
         lambda a=(_n, _h, _w, _ci, _co, _kh, _kw, _s, _p, _d, _g): W.conv2d_nhwc(*a),
         lambda xs, s=_s, p=_p, d=_d, g=_g: [_f32(np_conv_channels_last(xs[0], xs[1], s, p, d, g))])

for _sfx, _n, _h, _w, _ci, _co, _kh, _kw, _s, _p, _d, _g in [
    ("basic_p1", 1, 7, 7, 3, 4, 3, 3, 1, 1, 1, 1),
    ("s2_p1", 2, 7, 9, 3, 2, 3, 3, 2, 1, 1, 1),
    ("d2_g2", 1, 9, 9, 4, 2, 3, 3, 1, 2, 2, 2),
    ("nonsquare_asym", 1, 5, 7, 2, 3, 1, 3, (2, 1), (1, 0, 0, 2), 1, 1),
]:
    _add(f"conv2d_nchw_{_sfx}",
         lambda a=(_n, _h, _w, _ci, _co, _kh, _kw, _s, _p, _d, _g): W.conv2d_nchw(*a),
         lambda xs, s=_s, p=_p, d=_d, g=_g: [_f32(np_conv2d_nchw(xs[0], xs[1], s, p, d, g))])

for _sfx, _a in [  # N, H, W, C, KH, KW, stride, padding, dilation, multiplier
    ("basic_p1", (1, 7, 7, 3, 3, 3, 1, 1, 1, 1)),
    ("s2_p1", (1, 9, 9, 4, 3, 3, 2, 1, 1, 1)),
    ("mult2", (2, 5, 5, 3, 3, 3, 1, 1, 1, 2)),
    ("d2_nonsquare", (1, 9, 7, 2, 3, 1, 1, (2, 0), 2, 1)),
]:
    _add(f"depthwise_conv2d_nhwc_{_sfx}", lambda a=_a: W.depthwise_conv2d_nhwc(*a),
         lambda xs, a=_a: [_f32(np_depthwise_nhwc(xs[0], xs[1], a[6], a[7], a[8]))])

for _sfx, _a in [  # N, D, H, W, CI, CO, KD, KH, KW, stride, padding, dilation, groups
    ("basic_p1", (1, 4, 5, 5, 2, 3, 3, 3, 3, 1, 1, 1, 1)),
    ("s2_p1", (1, 5, 5, 5, 2, 3, 3, 3, 3, 2, 1, 1, 1)),
    ("g2_k1x3x3", (1, 3, 5, 5, 4, 4, 1, 3, 3, 1, (0, 1, 1), 1, 2)),
]:
    _add(f"conv3d_ndhwc_{_sfx}", lambda a=_a: W.conv3d_ndhwc(*a),
         lambda xs, a=_a: [_f32(np_conv_channels_last(xs[0], xs[1], a[9], a[10], a[11], a[12]))])

for _sfx, _a in [  # N, H, W, CI, CO, KH, KW, stride, padding, output_padding, dilation
    ("s2_p1_k4", (1, 3, 3, 2, 3, 4, 4, 2, 1, 0, 1)),
    ("s1_p0_k3", (1, 4, 4, 3, 2, 3, 3, 1, 0, 0, 1)),
    ("s2_p1_op1", (1, 3, 3, 2, 2, 3, 3, 2, 1, 1, 1)),
    ("s3_nonsquare", (2, 2, 3, 2, 2, 2, 2, 3, 0, 0, 1)),
    ("d2_p1", (1, 4, 4, 2, 2, 3, 3, 1, 1, 0, 2)),
    ("1x1_nopad", (1, 3, 3, 2, 4, 1, 1, 1, 0, 0, 1)),
]:
    _add(f"conv2d_transpose_nhwc_{_sfx}", lambda a=_a: W.conv2d_transpose_nhwc(*a),
         lambda xs, a=_a: [_f32(np_conv2d_transpose_nhwc(xs[0], xs[1], a[7], a[8], a[9], a[10]))])


def np_winograd_nhwc(x: np.ndarray, u: np.ndarray, bt: np.ndarray, at: np.ndarray, pad: int) -> np.ndarray:
    """Winograd from the transformed weight ``u`` [a, a, CI, CO] (3x3 kernel, stride 1): per
    ``m x m`` output tile, ``A^T [sum_ci (B^T d B) * U] A``, partial tiles cropped."""
    a, m = bt.shape[0], at.shape[0]
    n, h, w, _ = x.shape
    oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.pad(_f64(x), [(0, 0), (pad, th * m + 2 - h - pad), (pad, tw * m + 2 - w - pad), (0, 0)])
    out = np.zeros((n, th * m, tw * m, u.shape[3]))
    for ty in range(th):
        for tx in range(tw):
            d = xp[:, ty * m:ty * m + a, tx * m:tx * m + a]                      # [N, a, a, CI]
            v = np.einsum("ea,nabc,vb->nevc", _f64(bt), d, _f64(bt))
            mm = np.einsum("nevc,evck->nevk", v, _f64(u))
            out[:, ty * m:(ty + 1) * m, tx * m:(tx + 1) * m] = np.einsum("ie,nevk,jv->nijk", _f64(at), mm, _f64(at))
    return out[:, :oh, :ow]


def _winograd_inputs(n: int, h: int, w: int, ci: int, co: int, m: int) -> Callable[[int], Arrays]:
    def gen(seed: int) -> Arrays:
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, (n, h, w, ci)).astype(np.float32)
        u = weight_transform(rng.uniform(-1, 1, (3, 3, ci, co)).astype(np.float32), m)
        return [x, u, *winograd_inputs(m)]
    return gen


for _a in [(2, 5, 6, 3, 4, 2, 1), (1, 6, 3, 2, 3, 4, 0)]:  # N, H, W, CI, CO, m, padding
    _add(f"conv2d_winograd_m{_a[5]}_p{_a[6]}_{_a[1]}x{_a[2]}", lambda a=_a: conv2d_winograd_workload(*a),
         lambda xs, a=_a: [_f32(np_winograd_nhwc(xs[0], xs[1], xs[2], xs[3], a[6]))],
         inputs=_winograd_inputs(*_a[:6]), rtol=1e-3, atol=1e-4)

_add("conv2d_bias_relu_p1", lambda: W.conv2d_bias_relu(1, 7, 7, 3, 4, 3, 3, 1, 1),
     lambda xs: [_f32(np_relu(np_conv_channels_last(xs[0], xs[1], 1, 1) + xs[2]))])
_add("conv2d_bias_relu_s2_nopad", lambda: W.conv2d_bias_relu(1, 8, 8, 3, 5, 3, 3, 2, 0),
     lambda xs: [_f32(np_relu(np_conv_channels_last(xs[0], xs[1], 2, 0) + xs[2]))])

# pooling ----------------------------------------------------------------------------------------
for _kind, _wl in (("max", W.max_pool2d), ("avg", W.avg_pool2d)):
    for _sfx, _a in [  # N, H, W, C, KH, KW, stride, padding
        ("k3_s2_p1", (1, 7, 7, 3, 3, 3, 2, 1)),
        ("k2_s2", (2, 8, 8, 3, 2, 2, 2, 0)),
        ("k3_s1_p1_17", (1, 5, 17, 2, 3, 3, 1, 1)),
        ("nonsquare", (1, 6, 7, 3, 3, 1, (1, 2), (1, 0))),
        ("global_7x7", (1, 7, 7, 5, 7, 7, 1, 0)),
        # channels wide enough for the lane-reduction sketches (a multiple of 8, and a prime)
        ("global_7x7_c40", (1, 7, 7, 40, 7, 7, 1, 0)),
        ("k3_s2_p1_c19", (1, 9, 9, 19, 3, 3, 2, 1)),
    ]:
        _add(f"{_kind}_pool2d_{_sfx}", lambda wl=_wl, a=_a: wl(*a),
             lambda xs, k=_kind, a=_a: [_f32(np_pool2d_nhwc(xs[0], (a[4], a[5]), a[6], a[7], k))])
_add("max_pool2d_int32_p1", lambda: W.max_pool2d(1, 5, 5, 2, 3, 3, 2, 1, dtype="int32"),
     lambda xs: [np_pool2d_nhwc(xs[0], 3, 2, 1, "max").astype(np.int32)])

# normalisation ----------------------------------------------------------------------------------
for _shape in [(7, 17), (1, 17), (17, 1)]:
    _add(f"softmax_{_shape[0]}x{_shape[1]}", lambda s=_shape: W.softmax(*s),
         lambda xs: [_f32(np_softmax(xs[0]))])
_tensor_case("softmax_3d_2x3x17", [(2, 3, 17)], ops.softmax, np_softmax)
# Values up to +-100: exp(x) alone overflows float32, so only the max-subtracting form passes.
_add("softmax_large_values_7x17", lambda: W.softmax(7, 17), lambda xs: [_f32(np_softmax(xs[0]))],
     inputs=_uniform([(7, 17)], -100.0, 100.0))

for _shape in [(7, 17), (3, 1)]:
    _add(f"layer_norm_{_shape[0]}x{_shape[1]}", lambda s=_shape: W.layer_norm(*s),
         lambda xs: [_f32(np_layer_norm(*xs))])
_tensor_case("layer_norm_3d_2x3x17", [(2, 3, 17), (17,), (17,)],
             lambda x, g, b: ops.layer_norm(x, g, b, eps=1e-3),
             lambda x, g, b: np_layer_norm(x, g, b, eps=1e-3), names=["x", "gamma", "beta"])
# Rows centred near 100: E[x^2] - E[x]^2 would lose every digit in float32; two passes do not.
_add("layer_norm_offset_7x17", lambda: W.layer_norm(7, 17), lambda xs: [_f32(np_layer_norm(*xs))],
     inputs=lambda seed: [_uniform([(7, 17)], -1.0, 1.0, 100.0)(seed)[0],
                          *_uniform([(17,), (17,)], -1.0, 1.0)(seed + 1)],
     rtol=1e-3, atol=1e-4)

# activations, bias ------------------------------------------------------------------------------
_add("relu_7x17", lambda: W.relu(7, 17), lambda xs: [np_relu(xs[0])])
_add("relu_4d_1x3x5x7", lambda: W.relu(1, 3, 5, 7), lambda xs: [np_relu(xs[0])])
_add("gelu_7x17", lambda: W.gelu(7, 17), lambda xs: [_f32(np_gelu(xs[0]))])
_add("gelu_wide_range_3x17", lambda: W.gelu(3, 17), lambda xs: [_f32(np_gelu(xs[0]))],
     inputs=_uniform([(3, 17)], -5.0, 5.0))
_add("bias_add_7x17", lambda: W.bias_add(7, 17), lambda xs: [xs[0] + xs[1]])
_tensor_case("bias_add_nchw_axis1_2x3x4x5", [(2, 3, 4, 5), (3,)],
             lambda x, b: ops.bias_add(x, b, axis=1), lambda x, b: x + b[:, None, None])

# broadcast elementwise --------------------------------------------------------------------------
for _fname, _np_fn in (("add", np.add), ("multiply", np.multiply)):
    _wl = getattr(W, _fname)
    for _sa, _sb in [((7, 17), (7, 17)), ((7, 17), (17,)), ((7, 1), (1, 17)),
                     ((3, 1, 5), (3, 4, 1)), ((1,), (5, 3)), ((2, 3, 4, 5), (3, 1, 1))]:
        _sid = "x".join(map(str, _sa)) + "_" + "x".join(map(str, _sb))
        _add(f"{_fname}_{_sid}", lambda wl=_wl, a=_sa, b=_sb: wl(a, b),
             lambda xs, f=_np_fn: [_f32(f(_f64(xs[0]), _f64(xs[1])))])
_tensor_case("add_scalar_7x17", [(7, 17)], lambda a: ops.add(a, 2.5), lambda a: _f64(a) + 2.5)
_tensor_case("multiply_scalar_left_3x5", [(3, 5)], lambda a: ops.multiply(-3.0, a),
             lambda a: -3.0 * _f64(a))

# layout ------------------------------------------------------------------------------------------
for _shape, _axes in [((7, 17), None), ((2, 3, 5, 7), (0, 2, 3, 1)), ((3, 1, 17), (2, 0, 1)),
                      ((5, 7, 3), (-1, 0, 1))]:
    _sid = "x".join(map(str, _shape)) + ("_rev" if _axes is None else "_" + "".join(
        str(a % len(_shape)) for a in _axes))
    _add(f"transpose_{_sid}", lambda s=_shape, a=_axes: W.transpose(s, a),
         lambda xs, a=_axes: [np.ascontiguousarray(np.transpose(xs[0], a))])

for _shape, _new in [((6, 10), (3, 4, 5)), ((2, 3, 4), (24,)), ((24,), (2, 3, 4)),
                     ((7, 12), (-1, 28)), ((1, 17, 1), (17,)), ((4, 6), (6, 4))]:
    _sid = "x".join(map(str, _shape)) + "_to_" + "x".join(str(v) for v in _new).replace("-1", "m1")
    _add(f"reshape_{_sid}", lambda s=_shape, n=_new: W.reshape(s, n),
         lambda xs, n=_new: [np.reshape(xs[0], n)])

for _sid, _shape, _before, _after, _val in [
    ("nhwc_1x5x7x3", (1, 5, 7, 3), (0, 1, 2, 0), (0, 2, 1, 0), 0.0),
    ("2d_7x17_value", (7, 17), (1, 2), (3, 0), 0.5),
    ("1d_17_neg", (17,), 3, 3, -1.0),
    ("zero_3x5", (3, 5), 0, 0, 0.0),
]:
    _add(f"pad_{_sid}", lambda s=_shape, b=_before, a=_after, v=_val: W.pad(s, b, a, v),
         lambda xs, s=_shape, b=_before, a=_after, v=_val: [np.pad(
             xs[0], list(zip(_tup(b, len(s)), _tup(a, len(s)))), constant_values=v)])


_BY_ID = {c.id: c for c in CASES}
assert len(_BY_ID) == len(CASES), "duplicate case ids"


def case_by_id(case_id: str) -> Case:
    """The case named ``case_id``; a KeyError lists the ids otherwise."""
    try:
        return _BY_ID[case_id]
    except KeyError:
        raise KeyError(f"unknown case {case_id!r}; known: {', '.join(sorted(_BY_ID))}") from None
