"""Spatial resizing of 4-D images, nearest or bilinear: ONNX ``Resize`` (opset 10 on) and the
deprecated ``Upsample`` (opsets 7-9) that older exporters emit.

Graph op ``resize2d``: ``axes`` are the two spatial axes ((1, 2) for an NHWC image, (2, 3) for a
plain NCHW one), ``size`` the output extents; ``scales`` the scale factors the model gave (the
coordinate transform uses them, not ``size / input``), or None when it gave sizes.

Every output row reads fixed input rows with fixed weights, so the numpy reference, the lowering
and the PyTorch peer all use the same per-axis tables (``axis_table``), computed in float32 the
way onnxruntime computes them (its coordinate transforms and rounding, on float32), so a tie in
``round_prefer_floor`` falls where it does there. The lowering reads the tables as small
derived constants (a gather whose index is clamped to the image, so any table is safe to run).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, IterVar, const
from compute.tensor import Tensor

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter
from ..op_rules import OpDef, float_input, ints_attr, register_op
from ..te_ops import LowerCtx
from ..torch_peer import Runner, Value

COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _coords(out_len: int, in_len: int, scale: float, coord: str) -> np.ndarray:
    """Input coordinates of the output positions (onnxruntime's float32 arithmetic)."""
    f = np.float32
    x, s, half = np.arange(out_len, dtype=f), f(scale), f(0.5)
    if coord == "asymmetric":
        return x / s
    if coord == "align_corners":
        return np.zeros(out_len, f) if out_len == 1 else x * f(in_len - 1) / f(out_len - 1)
    if coord == "pytorch_half_pixel" and out_len == 1:
        return np.zeros(1, f)
    base = (x + half) / s - half
    if coord == "half_pixel_symmetric":
        adjustment = f(out_len) / (s * f(in_len))
        return f(in_len) / f(2) * (f(1) - adjustment) + base
    return base


def axis_table(out_len: int, in_len: int, scale: float, coord: str, mode: str,
               nearest: str) -> tuple[np.ndarray, np.ndarray]:
    """Per output position: input indices [out, taps] (int32) and weights [out, taps]
    (float32); one tap for nearest, two for linear."""
    x = _coords(out_len, in_len, scale, coord)
    if mode == "nearest":
        lo, hi = np.floor(x), np.ceil(x)
        frac = x - lo  # exact: the fractional part of a float is representable
        pick = {"round_prefer_floor": np.where(frac > 0.5, hi, lo), "round_prefer_ceil": np.where(frac >= 0.5, hi, lo),
                "floor": lo, "ceil": hi}[nearest]
        idx = np.clip(pick, 0, in_len - 1).astype(np.int32)
        return idx[:, None], np.ones((out_len, 1), np.float32)
    x = np.clip(x, np.float32(0), np.float32(in_len - 1))
    i0 = np.minimum(x.astype(np.int64), in_len - 1)
    i1 = np.minimum(i0 + 1, in_len - 1)
    w1, w0 = np.abs(x - i0.astype(np.float32)), np.abs(x - i1.astype(np.float32))
    same = i0 == i1  # at the last row: both taps read it, half each
    w0, w1 = np.where(same, np.float32(0.5), w0), np.where(same, np.float32(0.5), w1)
    return np.stack([i0, i1], 1).astype(np.int32), np.stack([w0, w1], 1).astype(np.float32)


def _tables(in_shape: Sequence[int], a: dict[str, Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for k, axis in enumerate(a["axes"]):
        scale = a["scales"][k] if a["scales"] is not None else np.float32(a["size"][k]) / np.float32(in_shape[axis])
        out.append(axis_table(a["size"][k], in_shape[axis], scale, a["coord"], a["mode"], a["nearest"]))
    return out


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    float_input(x, "resize2d input")
    if x.ndim != 4:
        raise GraphError(f"resize2d: input must be 4-D, got {x}")
    axes = tuple(attrs.get("axes", (1, 2)))
    if axes not in ((1, 2), (2, 3)):
        raise GraphError(f"resize2d: axes must be (1, 2) (NHWC) or (2, 3) (NCHW), got {axes!r}")
    size = ints_attr(attrs.get("size"), 2, "resize2d size", 1)
    scales = attrs.get("scales")
    if scales is not None:
        scales = tuple(float(np.float32(s)) for s in scales)
        if len(scales) != 2 or not all(np.isfinite(s) and s > 0 for s in scales):
            raise GraphError(f"resize2d: scales must be 2 positive numbers, got {attrs.get('scales')!r}")
    a = {"axes": axes, "size": size, "scales": scales, "mode": attrs.get("mode", "nearest"),
         "coord": attrs.get("coord", "half_pixel"), "nearest": attrs.get("nearest", "round_prefer_floor")}
    for key, allowed in (("mode", ("nearest", "linear")), ("coord", COORD_MODES), ("nearest", NEAREST_MODES)):
        if a[key] not in allowed:
            raise GraphError(f"resize2d: {key} must be one of {', '.join(allowed)}; got {a[key]!r}")
    shape = list(x.shape)
    shape[axes[0]], shape[axes[1]] = size
    return TensorType(tuple(shape), x.dtype), a


def _reference(x: np.ndarray, **a: Any) -> np.ndarray:
    (iy, wy), (ix, wx) = _tables(x.shape, a)
    ay, ax = a["axes"]
    out = np.zeros(tuple(len(iy) if d == ay else len(ix) if d == ax else n for d, n in enumerate(x.shape)))
    for ty in range(iy.shape[1]):
        rows = np.take(x.astype(np.float64), iy[:, ty], axis=ay)
        for tx in range(ix.shape[1]):
            w = wy[:, ty].astype(np.float64)[:, None] * wx[:, tx].astype(np.float64)[None, :]
            out += np.take(rows, ix[:, tx], axis=ax) * w.reshape([w.shape[0] if d == ay else w.shape[1] if d == ax
                                                                  else 1 for d in range(x.ndim)])
    return out


def _lower(ctx: LowerCtx, node: Any, xs: list[Tensor]) -> Tensor:
    x = xs[0]
    a = node.attrs
    ay, ax = a["axes"]
    (iy, wy), (ix, wx) = _tables(x.shape, a)
    ty, tx = ctx.extra(iy), ctx.extra(ix)
    ly, lx = (ctx.extra(wy.astype(x.dtype)), ctx.extra(wx.astype(x.dtype))) if a["mode"] == "linear" else (None, None)

    def clamp(v: Expr, n: int) -> Expr:  # the tables are in range; this makes that provable
        return te.min(te.max(v, const(0, "int32")), const(n - 1, "int32"))

    def body(*i: IterVar) -> Expr:
        y, xx = i[ay], i[ax]
        total: Expr | None = None
        for k in range(iy.shape[1]):
            row: Expr | None = None
            for m in range(ix.shape[1]):
                idx = list(i)
                idx[ay], idx[ax] = clamp(ty[y, k], x.shape[ay]), clamp(tx[xx, m], x.shape[ax])
                v = x[tuple(idx)]
                v = v * lx[xx, m] if lx is not None else v
                row = v if row is None else row + v
            assert row is not None
            row = row * ly[y, k] if ly is not None else row
            total = row if total is None else total + row
        assert total is not None
        return total

    return te.compute(node.type.shape, body, name=ctx.name("resize2d"), tag="injective")


def _export(e: Exporter, n: Any) -> None:
    a = n.attrs
    x = n.inputs[0]
    image = a["axes"] == (1, 2)
    src = e.get_nchw(x) if image else e.get_plain(x)
    if a["scales"] is not None:
        ins = [src, "", e.init(np.array([1.0, 1.0, *a["scales"]], np.float32), "c")]
    else:
        shape = e.graph.type_of(x).shape
        nchw = [shape[0], shape[3], shape[1], shape[2]] if image else list(shape)
        ins = [src, "", "", e.init(np.array([*nchw[:2], *a["size"]], np.int64), "s")]
    extra = {"nearest_mode": a["nearest"]} if a["mode"] == "nearest" else {}
    y = e.node("Resize", ins, mode=a["mode"], coordinate_transformation_mode=a["coord"], **extra)
    if image:
        e.nchw[n.name] = y
    else:
        e.plain[n.name] = y


def _torch(r: Runner, node: Any, xs: list[Value]) -> Value:
    a = node.attrs
    image = a["axes"] == (1, 2)
    t = xs[0].image() if image else xs[0].plain()  # NCHW-logical either way
    (iy, wy), (ix, wx) = _tables([t.shape[0], t.shape[2], t.shape[3], t.shape[1]] if image else list(t.shape), a)
    torch = r.torch
    out = None
    for k in range(iy.shape[1]):
        rows = t.index_select(2, torch.from_numpy(iy[:, k].astype(np.int64)))
        row = None
        for m in range(ix.shape[1]):
            v = rows.index_select(3, torch.from_numpy(ix[:, m].astype(np.int64)))
            if a["mode"] == "linear":
                v = v * torch.from_numpy(wx[:, m].copy()).to(t.dtype)
            row = v if row is None else row + v
        if a["mode"] == "linear":
            row = row * torch.from_numpy(wy[:, k].copy()).to(t.dtype)[:, None]
        out = row if out is None else out + row
    return Value(out, image)


def _onnx_scales_sizes(imp: Any, node: Any, attrs: dict[str, Any], shape: Sequence[int]) -> tuple[Any, Any]:
    """The model's scales (or None) and sizes (or None), each over all 4 axes."""
    if node.op_type == "Upsample" and imp.opset < 9:
        return np.asarray(attrs["scales"], np.float32), None
    if node.op_type == "Upsample" or imp.opset < 11:
        return imp.const_of(node, 1, "scales"), None
    scales = imp.const_of(node, 2, "scales")
    sizes = imp.const_of(node, 3, "sizes")
    scales = None if scales is None or scales.size == 0 else scales.astype(np.float32).reshape(-1)
    sizes = None if sizes is None or sizes.size == 0 else sizes.astype(np.int64).reshape(-1)
    if (scales is None) == (sizes is None):
        raise imp.err(node, "exactly one of scales (input 2) and sizes (input 3) must be given")
    axes = attrs.get("axes")
    if axes is not None:  # opset 18: scales/sizes for these axes only; the rest keep their extent
        axes = [int(d) % len(shape) for d in axes]
        given = scales if scales is not None else sizes
        if len(given) != len(axes):
            raise imp.err(node, f"{len(given)} scales/sizes for axes {list(attrs['axes'])}")
        full = np.array([1.0] * len(shape), np.float32) if scales is not None else np.array(shape, np.int64)
        full[axes] = given
        scales, sizes = (full, None) if scales is not None else (None, full)
    return scales, sizes


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    x = imp.val(node.input[0])
    if len(x.shape) != 4:
        raise imp.err(node, f"only 4-D (NCHW) input is supported, got {list(x.shape)}")
    mode = attrs.get("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    mode = "linear" if mode == "bilinear" else mode  # Upsample-7's spelling
    if mode not in ("nearest", "linear"):
        raise imp.err(node, f"mode {mode!r} is not supported (nearest and linear are)")
    modern = node.op_type == "Resize" and imp.opset >= 11
    coord = attrs.get("coordinate_transformation_mode", b"half_pixel") if modern else "asymmetric"
    coord = coord.decode() if isinstance(coord, bytes) else coord
    if coord not in COORD_MODES:
        raise imp.err(node, f"coordinate_transformation_mode {coord!r} is not supported"
                            + (" (it crops by the roi input)" if coord == "tf_crop_and_resize" else ""))
    for name, ok in (("antialias", 0), ("keep_aspect_ratio_policy", "stretch")):
        got = attrs.get(name, ok)
        got = got.decode() if isinstance(got, bytes) else got
        if got != ok:
            raise imp.err(node, f"{name}={got!r} is not supported")
    scales, sizes = _onnx_scales_sizes(imp, node, attrs, x.shape)
    given = scales if scales is not None else sizes
    if len(given) != 4:
        raise imp.err(node, f"{len(given)} scales/sizes for a 4-D input")
    if scales is not None:
        if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
            raise imp.err(node, f"scales {scales.tolist()} must be positive")
        out = [int(np.float32(s) * np.float32(d)) for s, d in zip(scales, x.shape)]  # as onnxruntime
    else:
        out = [int(s) for s in sizes]
    if out[:2] != list(x.shape[:2]):
        raise imp.err(node, f"only the spatial axes may be resized (input {list(x.shape)}, output {out})")
    if min(out) < 1:
        raise imp.err(node, f"the output {out} would be empty")
    nearest = attrs.get("nearest_mode", b"round_prefer_floor") if modern else None
    nearest = nearest.decode() if isinstance(nearest, bytes) else nearest
    if nearest is None:
        # Before opset 11 onnxruntime truncates when upsampling and rounds up when downsampling.
        spatial = scales[2:] if scales is not None else np.array(out[2:]) / np.array(x.shape[2:])
        if np.any(spatial > 1) and np.any(spatial < 1):
            raise imp.err(node, "nearest upsampling along one axis and downsampling along the other is not supported")
        nearest = "ceil" if np.any(spatial < 1) else "floor"
    if mode == "nearest" and nearest not in NEAREST_MODES:
        raise imp.err(node, f"nearest_mode {nearest!r} is not supported")
    src, y_name = node.input[0], node.output[0]
    attrs_out = {"size": tuple(out[2:]), "scales": None if scales is None else tuple(float(s) for s in scales[2:]),
                 "mode": mode, "coord": coord, "nearest": nearest if mode == "nearest" else "round_prefer_floor"}
    if imp.is_nhwc(src):
        imp.set_nhwc(y_name, imp.b.add_node("resize2d", [imp.nhwc(src)], {**attrs_out, "axes": (1, 2)},
                                            imp.name_for(y_name, True)))
    else:
        imp.set_plain(y_name, imp.b.add_node("resize2d", [imp.plain(src)], {**attrs_out, "axes": (2, 3)}, y_name))


RESIZE = register_op(OpDef(
    "resize2d", (1, 1), "injective", _infer, "nearest or bilinear resizing of the two spatial axes of a 4-D image",
    reference=_reference, lower=_lower, export=_export, torch=_torch,
    onnx={"Resize": _import, "Upsample": _import}))
