"""ONNX handlers for shape and layout operators: Reshape, Flatten, Squeeze/Unsqueeze,
Transpose, Concat, Pad and Slice.

``_reshape_to`` holds the layout tricks: a flattened feature map stays in NHWC order (the Gemm
reading it permutes its weight instead) and a channel shuffle (Reshape -> Transpose -> Reshape)
becomes one transpose of NHWC data.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .onnx_fold import axis_in as _axis_in
from .onnx_fold import flatten_axis as _flatten_axis
from .onnx_fold import reshape_shape as _reshape_shape
from .onnx_fold import slice_params as _slice_params
from .onnx_fold import squeezed as _squeezed
from .onnx_fold import unsqueezed as _unsqueezed
from .onnx_importer import _NCHW_AXIS_IN_NHWC, _TO_NCHW, _handles, _Importer, _Val


def _spatial_is_1x1(imp: _Importer, name: str) -> bool:
    """An NHWC-only value whose H = W = 1 has the same row-major element order as its NCHW twin."""
    v = imp.val(name)
    return imp.is_nhwc(name) and v.shape[2:] == (1, 1)


def _reshape_to(imp: _Importer, node, src: str, shape: Sequence[int]) -> None:
    v, shape, out = imp.val(src), tuple(shape), node.output[0]
    if imp.is_nhwc(src) and len(shape) == 5 and shape[0] == v.shape[0] and shape[3:] == v.shape[2:]:
        # Channel split [N, C, H, W] -> [N, A, B, H, W]: in NHWC a free reshape to [N, H, W, A, B].
        n, a, b_, h, w = shape
        var = imp.b.reshape(imp.nhwc(src), (n, h, w, a, b_), name=f"{out}:nhwc_split")
        imp.env[out] = _Val(shape, v.dtype, permuted=(var, (0, 3, 4, 1, 2)))
        return
    if v.permuted is not None and len(shape) == 4 and shape[0] == v.shape[0] and shape[2:] == v.shape[3:]:
        # Channel merge back to [N, C, H, W]: order the stored axes as [N, H, W, A', B'] (one
        # transpose of the channel axes; none if already in order), then a free reshape to NHWC.
        var, perm = v.permuted
        want = (0, 3, 4, 1, 2)  # logical axes in NHWC-like order
        inv = np.argsort(perm)  # logical axis -> stored axis
        order = tuple(int(inv[a]) for a in want)
        if order != tuple(range(5)):
            var = imp.b.transpose(var, order, name=f"{out}:nhwc_shuffle")
        n, c, h, w = shape
        imp.set_nhwc(out, imp.b.reshape(var, (n, h, w, c), name=imp.name_for(out, True)))
        return
    if imp.is_nhwc(src) and not _spatial_is_1x1(imp, src) and tuple(shape) == (v.shape[0], math.prod(v.shape[1:])):
        # Flattening a feature map for a classifier (VGG, AlexNet): keep NHWC order, no transpose;
        # the Gemm reading it permutes its weight rows once instead.
        flat = imp.b.reshape(imp.nhwc(src), tuple(shape), name=f"{node.output[0]}:nhwc_order")
        imp.env[node.output[0]] = _Val(tuple(shape), v.dtype, flat_nhwc=(flat, src, v.shape[1]))
        return
    base = imp.nhwc(src) if _spatial_is_1x1(imp, src) else imp.plain(src)
    imp.set_plain(node.output[0], imp.b.reshape(base, tuple(shape), name=node.output[0]))


@_handles("Reshape")
def _reshape(imp: _Importer, node, attrs) -> None:
    target = attrs["shape"] if imp.opset < 5 else imp.const_of(node, 1, "the target shape")
    src = node.input[0]
    _reshape_to(imp, node, src, _reshape_shape(imp.val(src).shape, target, bool(attrs.get("allowzero", 0))))


@_handles("Flatten")
def _flatten(imp: _Importer, node, attrs) -> None:
    src = node.input[0]
    shape = imp.val(src).shape
    axis = _flatten_axis(attrs, len(shape))
    lead = math.prod(shape[:axis])
    _reshape_to(imp, node, src, (lead, math.prod(shape[axis:])))


def _axes_input(imp: _Importer, node, attrs, since: int) -> list[int] | None:
    if imp.opset < since:
        return list(attrs["axes"]) if "axes" in attrs else None
    arr = imp.const_of(node, 1, "axes")
    return None if arr is None else [int(a) for a in arr.reshape(-1)]


@_handles("Unsqueeze")
def _unsqueeze(imp: _Importer, node, attrs) -> None:
    axes = _axes_input(imp, node, attrs, 13)
    _reshape_to(imp, node, node.input[0], _unsqueezed(imp.val(node.input[0]).shape, axes or []))


@_handles("Squeeze")
def _squeeze(imp: _Importer, node, attrs) -> None:
    axes = _axes_input(imp, node, attrs, 13)
    _reshape_to(imp, node, node.input[0], _squeezed(imp.val(node.input[0]).shape, axes))


@_handles("Transpose")
def _transpose(imp: _Importer, node, attrs) -> None:
    src, out = node.input[0], node.output[0]
    rank = len(imp.val(src).shape)
    perm = tuple(attrs.get("perm", range(rank - 1, -1, -1)))
    v = imp.val(src)
    if v.permuted is not None and v.plain is None and sorted(perm[3:]) == [3, 4]:
        # Permuting the channel-group axes of a split NHWC map: only the bookkeeping changes.
        var, p = v.permuted
        qinv = np.argsort(perm)
        imp.env[out] = _Val(tuple(v.shape[i] for i in perm), v.dtype,
                            permuted=(var, tuple(int(qinv[i]) for i in p)))
    elif imp.is_nhwc(src):  # compose with the NHWC -> NCHW permutation: no extra transpose
        imp.set_plain(out, imp.b.transpose(imp.nhwc(src), tuple(_TO_NCHW[p] for p in perm), name=out))
    else:
        imp.set_plain(out, imp.b.transpose(imp.plain(src), perm, name=out))


@_handles("Concat")
def _concat(imp: _Importer, node, attrs) -> None:
    names = [i for i in node.input if i]
    vals = [imp.val(n) for n in names]
    rank = len(vals[0].shape)
    if "axis" not in attrs:
        raise imp.err(node, "required attribute axis is missing")
    axis = _axis_in(attrs["axis"], rank, "Concat axis")
    out = node.output[0]
    if rank == 4 and any(imp.is_nhwc(n) for n in names):
        y = imp.b.concat([imp.nhwc(n) for n in names], axis=_NCHW_AXIS_IN_NHWC[axis], name=imp.name_for(out, True))
        imp.set_nhwc(out, y)
    else:
        imp.set_plain(out, imp.b.concat([imp.plain(n) for n in names], axis=axis, name=out))


@_handles("Pad")
def _pad(imp: _Importer, node, attrs) -> None:
    mode = attrs.get("mode", b"constant")
    if (mode.decode() if isinstance(mode, bytes) else mode) != "constant":
        raise imp.err(node, f"only constant padding is supported, got mode {mode!r}")
    rank = len(imp.val(node.input[0]).shape)
    if imp.opset < 11:
        pads, value = list(attrs["pads"]), float(attrs.get("value", 0.0))
    else:
        pads = [int(p) for p in imp.const_of(node, 1, "pads").reshape(-1)]
        cv = imp.const_of(node, 2, "constant_value")
        value = 0.0 if cv is None or cv.size == 0 else float(cv.reshape(-1)[0])
        if len(node.input) > 3 and node.input[3]:
            axes = [_axis_in(a, rank, "Pad axis") for a in imp.const_of(node, 3, "axes").reshape(-1)]
            full = [0] * (2 * rank)
            for k, a in enumerate(axes):
                full[a], full[rank + a] = pads[k], pads[len(axes) + k]
            pads = full
    if any(p < 0 for p in pads):
        raise imp.err(node, f"negative pads (cropping) are not supported: {pads}")
    out = node.output[0]
    imp.set_plain(out, imp.b.pad(imp.plain(node.input[0]), pads[:rank], pads[rank:], value, name=out))


@_handles("Slice")
def _slice(imp: _Importer, node, attrs) -> None:
    shape = imp.val(node.input[0]).shape
    begin, end, step = _slice_params(imp, node, attrs, shape)
    out = node.output[0]
    imp.set_plain(out, imp.b.add_node("slice", [imp.plain(node.input[0])],
                                      {"begin": begin, "end": end, "step": step}, out))
