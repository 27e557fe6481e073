"""Winograd convolution F(m, 3) (Lavin & Gray 2015), NHWC, as tensor expressions.

A 3x3 stride-1 convolution computed per ``m x m`` output tile from an ``a x a`` input tile
(``a = m + 2``): ``Y = A^T [(G g G^T) * (B^T d B)] A``. Summed over input channels, the
elementwise product becomes ``a*a`` independent GEMMs ``[P tiles, CI] x [CI, CO]`` - the heavy
stage, ``a^2/m^2`` multiply-adds per output instead of 9 (2.25 at m = 4) - between two cheap
transforms. The weight transform ``U = G g G^T`` depends only on the weight, so it is done once
at compile time (``weight_transform``, numpy, float64) and the kernel reads ``U``.

The matrices are derived here (``transform_matrices``) by the Cook-Toom construction, in exact
rational arithmetic: the product of a degree-(m-1) and a degree-2 polynomial is fixed by its
values at ``a`` points, the finite ``points`` below and infinity (the leading coefficient). With
``V`` the ``a x a`` evaluation matrix of those points (row ``i``: ``p_i^0 .. p_i^(a-1)``; the
infinity row picks the last coefficient), polynomial multiplication is
``s = V^-1 [(G g) * (D x)]`` (``G``: ``a x 3``, ``D``: ``a x m`` evaluation matrices); the FIR
filter ``y_i = sum_k g_k d_(i+k)`` is its transpose in ``x``, so ``y = D^T [(G g) * (V^-T d)]``:
``A^T = D^T``, ``B^T = V^-T``. Each row of ``B^T`` is then scaled to coprime integers and the
matching row of ``G`` divided by the same factor (``G`` is applied offline, in float64).

Interpolation points (finite ones; infinity is always the last): m = 2: 0, 1, -1; m = 4: 0, 1,
-1, 2, -2; m = 6: 0, 1, -1, 2, -2, 1/2, -1/2 (halves rather than +-3: smaller entries, less
float32 error).

Numerical error in float32 against the direct convolution in float64 (``max|y - y_ref| /
max|y_ref|``; random normal inputs, He-scaled weights ``N(0, 2 / (9 CI))``, padding 1;
``winograd_numpy``, which rounds every stage to float32 as the kernel does):

    ==========================  ========  ========  ========  ===================
    layer (H=W, CI=CO)          m = 2     m = 4     m = 6     direct in float32
    ==========================  ========  ========  ========  ===================
    14x14, 256                  6.2e-7    7.9e-6    1.7e-5    3.6e-7
    28x28, 128                  4.8e-7    1.2e-5    1.2e-5    2.9e-7
    56x56, 64                   3.3e-7    7.0e-6    1.1e-5    2.0e-7
    ==========================  ========  ========  ========  ===================

The compiled kernels (rule-based schedules) on the four ResNet-50 3x3 layers (56x56x64 to
7x7x512) agree: 4e-7 to 1e-6 at m = 2, 7e-6 to 1.6e-5 at m = 4, 1.2e-5 to 2.8e-5 at m = 6.

``TOLERANCE`` is 1e-3 relative to ``max|output|``: every m above is within it by a factor of 50
or more, so ``ALLOWED_M`` keeps all three. F(8, 3) and beyond, whose points would need +-4 or
+-1/4 and whose error grows by about an order of magnitude per step, are not offered.

``conv2d_winograd_nhwc`` handles any batch and channel counts, H and W that ``m`` does not divide
(the last tiles read zero padding and their extra outputs are never stored), padding of any
sides, and 1x3 / 3x1 kernels (the transform on one axis only; the other axis has ``a = m = 1``).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import numpy as np

from .. import te
from ..expr import Expr, IterVar
from ..tensor import Tensor
from ._common import check_ndim, check_tensor, padding_nd, with_axis_names
from .padding import _pad

POINTS: dict[int, tuple[Fraction, ...]] = {
    2: (Fraction(0), Fraction(1), Fraction(-1)),
    4: (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2)),
    6: (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2), Fraction(-1, 2)),
}
TOLERANCE = 1e-3
ALLOWED_M = (2, 4, 6)
R = 3  # the kernel taps along a transformed axis
# The transforms are small fixed-size reductions: the sketch rules tile them one way only
# (``sketch.sketch_rules.RuleTileOnly``), keeping the search's alternatives for the GEMM.
_TILE_ONLY = {"sketch": "tile_only"}


def _inverse(a: list[list[Fraction]]) -> list[list[Fraction]]:
    """The inverse of a square rational matrix (Gauss-Jordan, exact)."""
    n = len(a)
    aug = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(a)]
    for col in range(n):
        piv = next(r for r in range(col, n) if aug[r][col] != 0)
        aug[col], aug[piv] = aug[piv], aug[col]
        inv = 1 / aug[col][col]
        aug[col] = [v * inv for v in aug[col]]
        for r in range(n):
            if r != col and aug[r][col] != 0:
                f = aug[r][col]
                aug[r] = [v - f * p for v, p in zip(aug[r], aug[col])]
    return [row[n:] for row in aug]


def _evaluation(points: Sequence[Fraction], cols: int) -> list[list[Fraction]]:
    """Rows ``p^0 .. p^(cols-1)`` per finite point, then the infinity row (last coefficient)."""
    rows = [[p ** j for j in range(cols)] for p in points]
    return rows + [[Fraction(int(j == cols - 1)) for j in range(cols)]]


def exact_matrices(m: int) -> tuple[list[list[Fraction]], list[list[Fraction]], list[list[Fraction]]]:
    """``(B^T, G, A^T)`` of F(m, 3) as exact fractions: ``a x a``, ``a x 3``, ``m x a``."""
    if m not in POINTS:
        raise ValueError(f"winograd: tile size m must be one of {sorted(POINTS)}, got {m!r}")
    pts = POINTS[m]
    alpha = m + R - 1
    bt = [list(col) for col in _inverse(_evaluation(pts, alpha))]  # rows of V^-T: columns of V^-1
    bt = [[bt[j][i] for j in range(alpha)] for i in range(alpha)]
    g = _evaluation(pts, R)
    at = [list(r) for r in zip(*_evaluation(pts, m))]
    for i in range(alpha):  # row i of B^T to coprime integers, G's row i divided to match
        den = math.lcm(*(v.denominator for v in bt[i]))
        num = math.gcd(*(int(v * den) for v in bt[i]))
        s = Fraction(den, num)
        bt[i] = [v * s for v in bt[i]]
        g[i] = [v / s for v in g[i]]
    return bt, g, at


def transform_matrices(m: int, k: int = R) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(B^T, G, A^T)`` as float64 arrays for one axis: F(m, 3) for a 3-tap axis, the 1x1
    identities (no transform, ``a = m = 1``) for a 1-tap axis."""
    if k == 1:
        one = np.ones((1, 1))
        return one, one.copy(), one.copy()
    if k != R:
        raise ValueError(f"winograd: only 3-tap (or 1-tap) kernel axes are supported, got {k}")
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in exact_matrices(m))  # type: ignore[return-value]


def tile_sizes(m: int, kernel: Sequence[int]) -> tuple[int, int]:
    """Output tile size per axis (H, W): ``m`` on a 3-tap axis, 1 on a 1-tap axis."""
    return tuple(m if k == R else 1 for k in kernel)  # type: ignore[return-value]


def weight_transform(w_hwio: np.ndarray, m: int) -> np.ndarray:
    """``U = G g G^T`` of an HWIO weight ``[KH, KW, CI, CO]`` (KH, KW in {1, 3}, not both 1):
    ``[aH, aW, CI, CO]``, computed in float64 and returned in the weight's dtype."""
    w = np.asarray(w_hwio)
    if w.ndim != 4 or tuple(w.shape[:2]) not in ((3, 3), (1, 3), (3, 1)):
        raise ValueError(f"winograd weight_transform: expected an HWIO weight with a 3x3, 1x3 or 3x1 "
                         f"kernel, got shape {list(w.shape)}")
    gh = transform_matrices(m, w.shape[0])[1]
    gw = transform_matrices(m, w.shape[1])[1]
    u = np.einsum("er,rsio,ns->enio", gh, w.astype(np.float64), gw, optimize=True)
    return np.ascontiguousarray(u.astype(w.dtype))


def conv2d_winograd_nhwc(data: Tensor, u: Tensor, bt_h: Tensor, at_h: Tensor, bt_w: Tensor,
                         at_w: Tensor, kernel: Sequence[int] = (3, 3),
                         padding: int | Sequence[int] = 1, name: str = "conv2d_winograd") -> Tensor:
    """Stride-1 convolution of NHWC ``data [N, H, W, CI]`` by Winograd: ``u`` is the transformed
    weight ``[aH, aW, CI, CO]`` (``weight_transform``), ``bt_*``/``at_*`` the ``B^T`` and ``A^T``
    of each axis (``transform_matrices``; the same tensors for both axes of a 3x3 kernel).
    Returns ``[N, OH, OW, CO]`` as the direct ``conv2d_nhwc`` with that ``kernel`` and ``padding``.

    Stages: ``_pad`` (zeros to whole tiles), ``_tin`` and ``_vin`` (``B^T d B``, one axis each),
    ``_gemm`` (per (eps, nu): tiles x CI times CI x CO, the heavy stage), ``_tout`` (``A^T`` on
    H) and the output (``A^T`` on W, written at each output pixel: the crop of partial tiles)."""
    op = "conv2d_winograd_nhwc"
    for t, what in ((data, "data"), (u, "u"), (bt_h, "bt_h"), (at_h, "at_h"), (bt_w, "bt_w"), (at_w, "at_w")):
        check_tensor(t, op, what)
    check_ndim(data, 4, op, "data", "NHWC")
    check_ndim(u, 4, op, "u", "aH, aW, CI, CO")
    if str(data.dtype) != "float32" or any(str(t.dtype) != "float32" for t in (u, bt_h, at_h, bt_w, at_w)):
        raise ValueError(f"{op}: only float32 is supported (Winograd's error grows quickly in lower precision)")
    kh, kw = (int(k) for k in kernel)
    n_batch, h, w, ci = data.shape
    ah, aw, u_ci, co = u.shape
    mh, mw = ah - kh + 1, aw - kw + 1
    for t, shape, what in ((bt_h, (ah, ah), "bt_h"), (at_h, (mh, ah), "at_h"),
                           (bt_w, (aw, aw), "bt_w"), (at_w, (mw, aw), "at_w")):
        if tuple(t.shape) != shape:
            raise ValueError(f"{op}: {what} must be {list(shape)} for u {list(u.shape)} and kernel "
                             f"{kh}x{kw}, got {list(t.shape)}")
    if u_ci != ci:
        raise ValueError(f"{op}: u has {u_ci} input channel(s) but data has {ci}")
    before, after = padding_nd(padding, 2, op)
    oh, ow = h + before[0] + after[0] - kh + 1, w + before[1] + after[1] - kw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: the kernel {kh}x{kw} is larger than the padded input "
                         f"{h + before[0] + after[0]}x{w + before[1] + after[1]}")
    th, tw = -(-oh // mh), -(-ow // mw)
    tiles = n_batch * th * tw
    # zeros past the real padding up to whole tiles: a partial last tile reads them
    pad_after = (th * mh + kh - 1 - h - before[0], tw * mw + kw - 1 - w - before[1])
    src = _pad(data, (0, *before, 0), (0, *pad_after, 0), 0, f"{name}_pad", ["n", "h", "w", "c"])

    def tile(p: Expr) -> tuple[Expr, Expr, Expr]:
        return p // (th * tw), (p // tw) % th * mh, p % tw * mw

    ra = te.reduce_axis((0, ah), "ra")

    def tin(e: IterVar, b: IterVar, p: IterVar, c: IterVar) -> Expr:
        n, y0, x0 = tile(p)
        return te.sum(bt_h[e, ra] * src[n, y0 + ra, x0 + b, c], axis=ra)

    t_in = te.compute((ah, aw, tiles, ci), tin, name=f"{name}_tin", tag="winograd_input", attrs=_TILE_ONLY)
    rb = te.reduce_axis((0, aw), "rb")
    v = te.compute((ah, aw, tiles, ci),
                   lambda e, nu, p, c: te.sum(t_in[e, rb, p, c] * bt_w[nu, rb], axis=rb),
                   name=f"{name}_vin", tag="winograd_input", attrs=_TILE_ONLY)
    rc = te.reduce_axis((0, ci), "rc")
    gemm = te.compute((ah, aw, tiles, co),
                      lambda e, nu, p, k: te.sum(v[e, nu, p, rc] * u[e, nu, rc, k], axis=rc),
                      name=f"{name}_gemm", tag="winograd_gemm")
    re_ = te.reduce_axis((0, ah), "re")
    t_out = te.compute((mh, aw, tiles, co),
                       lambda i, nu, p, k: te.sum(at_h[i, re_] * gemm[re_, nu, p, k], axis=re_),
                       name=f"{name}_tout", tag="winograd_output", attrs=_TILE_ONLY)
    rn = te.reduce_axis((0, aw), "rn")

    def body(n: IterVar, y: IterVar, x: IterVar, k: IterVar) -> Expr:
        p = (n * th + y // mh) * tw + x // mw
        return te.sum(t_out[y % mh, rn, p, k] * at_w[x % mw, rn], axis=rn)

    attrs = {"pad_before": list(before), "pad_after": list(after), "kernel": [kh, kw], "tile": [mh, mw]}
    return te.compute((n_batch, oh, ow, co), with_axis_names(body, ["n", "h", "w", "co"]), name=name,
                      tag="conv2d_winograd_nhwc", attrs=attrs)


def winograd_inputs(m: int, kernel: Sequence[int] = (3, 3)) -> tuple[np.ndarray, ...]:
    """The float32 ``(bt_h, at_h, bt_w, at_w)`` arrays ``conv2d_winograd_nhwc`` reads."""
    out = []
    for k in kernel:
        bt, _, at = transform_matrices(m, k)
        out += [bt.astype(np.float32), at.astype(np.float32)]
    return tuple(out)


def conv2d_winograd_workload(N: int, H: int, W: int, CI: int, CO: int, m: int = 4, padding: int = 1,
                             kernel: Sequence[int] = (3, 3)) -> list[Tensor]:
    """``[data, u, bt_h, at_h, bt_w, at_w, output]``: placeholders for the data, the transformed
    weight and the per-axis matrices (bind ``winograd_inputs(m, kernel)``), then the output."""
    kh, kw = kernel
    mh, mw = tile_sizes(m, kernel)
    data = te.placeholder((N, H, W, CI), "float32", "data")
    u = te.placeholder((mh + kh - 1, mw + kw - 1, CI, CO), "float32", "u")
    mats = [te.placeholder(a.shape, "float32", nm) for a, nm in
            zip(winograd_inputs(m, kernel), ("bt_h", "at_h", "bt_w", "at_w"))]
    return [data, u, *mats, conv2d_winograd_nhwc(data, u, *mats, kernel=kernel, padding=padding)]


def winograd_numpy(x: np.ndarray, w_hwio: np.ndarray, m: int, padding: int | Sequence[int] = 1,
                   dtype: str = "float32") -> np.ndarray:
    """The same algorithm in numpy, each stage rounded to ``dtype`` as the kernel computes it (the
    weight transform in float64): the error table's float32 model, independent of codegen."""
    kh, kw = w_hwio.shape[:2]
    (bth, _, ath), (btw, _, atw) = transform_matrices(m, kh), transform_matrices(m, kw)
    mh, mw = tile_sizes(m, (kh, kw))
    before, after = padding_nd(padding, 2, "winograd_numpy")
    n, h, wd, _ = x.shape
    oh, ow = h + before[0] + after[0] - kh + 1, wd + before[1] + after[1] - kw + 1
    th, tw = -(-oh // mh), -(-ow // mw)
    xp = np.pad(x.astype(dtype), ((0, 0), (before[0], th * mh + kh - 1 - h - before[0]),
                                  (before[1], tw * mw + kw - 1 - wd - before[1]), (0, 0)))
    ah, aw = mh + kh - 1, mw + kw - 1
    d = np.stack([np.stack([xp[:, ty * mh:ty * mh + ah, tx * mw:tx * mw + aw] for tx in range(tw)], 1)
                  for ty in range(th)], 1)  # [N, th, tw, ah, aw, CI]
    c = lambda a: a.astype(dtype)  # noqa: E731
    v = c(np.einsum("ea,ntsabc,vb->evntsc", c(bth), d, c(btw)))
    mm = c(np.einsum("evntsc,evck->evntsk", v, weight_transform(w_hwio, m).astype(dtype)))
    y = c(np.einsum("ie,evntsk,jv->ntisjk", c(ath), mm, c(atw)))  # [N, th, mh, tw, mw, CO]
    return y.reshape(n, th * mh, tw * mw, -1)[:, :oh, :ow]
