"""ONNX handlers for neural-network operators: Conv (OIHW weights turned HWIO once),
BatchNormalization (folded into the preceding conv when it is the conv's only reader), pools,
LRN, Softmax, Gemm/MatMul (as dense where the weight is constant), LayerNormalization and
ReduceMean.
"""
from __future__ import annotations

import math

import numpy as np

from .onnx_fold import axis_in as _axis_in
from .onnx_importer import _NCHW_AXIS_IN_NHWC, _handles, _Importer
from .onnx_ops_elementwise import _identity
from .onnx_ops_shape import _axes_input


def _spatial_pads(imp: _Importer, node, attrs, in_hw, kernel, strides, dil) -> tuple[int, int, int, int]:
    for what, vals in (("kernel_shape", kernel), ("strides", strides), ("dilations", dil)):
        if len(vals) != 2 or any(int(v) < 1 for v in vals):
            raise imp.err(node, f"{what} {list(vals)} must be 2 positive integers (2-D spatial ops only)")
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        if len(pads) != 4:
            raise imp.err(node, f"only 2-D spatial ops are supported (pads {pads})")
        if any(p < 0 for p in pads):
            raise imp.err(node, f"pads {pads} must not be negative")
        return (pads[0], pads[1], pads[2], pads[3])
    if auto == "VALID":
        return (0, 0, 0, 0)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise imp.err(node, f"unknown auto_pad {auto!r}")
    before, after = [], []
    for size, k, s, d in zip(in_hw, kernel, strides, dil):
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        before.append(small if auto == "SAME_UPPER" else big)
        after.append(big if auto == "SAME_UPPER" else small)
    return (before[0], before[1], after[0], after[1])


@_handles("Conv")
def _conv(imp: _Importer, node, attrs) -> None:
    x = imp.val(node.input[0])
    w = imp.const_of(node, 1, "the weight")
    if len(x.shape) != 4 or w.ndim != 4:
        raise imp.err(node, f"only 2-D convolution is supported (input {list(x.shape)}, weight {list(w.shape)})")
    if str(w.dtype) != x.dtype:
        raise imp.err(node, f"the weight is {w.dtype} but the input is {x.dtype} (ONNX needs one type)")
    kernel = w.shape[2:]
    if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != kernel:
        raise imp.err(node, f"kernel_shape {attrs['kernel_shape']} differs from the weight {list(w.shape)}")
    strides = tuple(attrs.get("strides", (1, 1)))
    dil = tuple(attrs.get("dilations", (1, 1)))
    pads = _spatial_pads(imp, node, attrs, x.shape[2:], kernel, strides, dil)
    wv = imp.b.constant(np.ascontiguousarray(w.transpose(2, 3, 1, 0)), name=f"{node.input[1]}:hwio", copy=False)
    out = node.output[0]
    y = imp.b.conv2d(imp.nhwc(node.input[0]), wv, strides=strides, padding=pads, dilation=dil,
                     groups=int(attrs.get("group", 1)), name=imp.name_for(out, True) + (":conv" if len(node.input) > 2 else ""))
    conv, bias = y, None
    bias_arr = imp.const_of(node, 2, "the bias")
    if bias_arr is not None:
        bias = imp.b.constant(bias_arr.astype(w.dtype), name=node.input[2])
        y = imp.b.add(conv, bias, name=imp.name_for(out, True))
    imp.set_nhwc(out, y)
    imp.conv_of[out] = (conv, wv, bias)


@_handles("BatchNormalization")
def _batch_norm(imp: _Importer, node, attrs) -> None:
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
                imp.set_nhwc(out, imp.env[x_name].nhwc)
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


@_handles("MaxPool", "AveragePool")
def _pool(imp: _Importer, node, attrs) -> None:
    imp.single_output(node)
    x = imp.val(node.input[0])
    if "kernel_shape" not in attrs:
        raise imp.err(node, "required attribute kernel_shape is missing")
    kernel = tuple(attrs["kernel_shape"])
    if len(x.shape) != 4 or len(kernel) != 2:
        raise imp.err(node, f"only 2-D pooling is supported (input {list(x.shape)})")
    if any(d != 1 for d in attrs.get("dilations", (1, 1))):
        raise imp.err(node, "dilated pooling is not supported")
    strides = tuple(attrs.get("strides", (1, 1)))
    pads = _spatial_pads(imp, node, attrs, x.shape[2:], kernel, strides, (1, 1))
    ceil = bool(attrs.get("ceil_mode", 0))
    out, data = node.output[0], imp.nhwc(node.input[0])
    if node.op_type == "MaxPool":
        y = imp.b.max_pool2d(data, kernel, strides, pads, ceil_mode=ceil, name=imp.name_for(out, True))
    else:
        y = imp.b.avg_pool2d(data, kernel, strides, pads, count_include_pad=bool(attrs.get("count_include_pad", 0)),
                             ceil_mode=ceil, name=imp.name_for(out, True))
    imp.set_nhwc(out, y)


@_handles("GlobalAveragePool")
def _global_pool(imp: _Importer, node, attrs) -> None:
    if len(imp.val(node.input[0]).shape) != 4:
        raise imp.err(node, "only 4-D (2-D spatial) input is supported")
    out = node.output[0]
    imp.set_nhwc(out, imp.b.global_avg_pool(imp.nhwc(node.input[0]), name=imp.name_for(out, True)))


@_handles("LRN")
def _lrn(imp: _Importer, node, attrs) -> None:
    src, out = node.input[0], node.output[0]
    if int(attrs.get("size", 0)) < 1:
        raise imp.err(node, "required attribute size is missing or not positive")
    kw = dict(size=int(attrs["size"]), alpha=float(attrs.get("alpha", 1e-4)), beta=float(attrs.get("beta", 0.75)),
              bias=float(attrs.get("bias", 1.0)))
    if len(imp.val(src).shape) == 4:
        imp.set_nhwc(out, imp.b.lrn(imp.nhwc(src), axis=-1, name=imp.name_for(out, True), **kw))
    else:
        imp.set_plain(out, imp.b.lrn(imp.plain(src), axis=1, name=out, **kw))


@_handles("Softmax")
def _softmax(imp: _Importer, node, attrs) -> None:
    src, out = node.input[0], node.output[0]
    shape = imp.val(src).shape
    rank = len(shape)
    if imp.opset >= 13:
        axis = _axis_in(attrs.get("axis", -1), rank, "Softmax axis")
        if imp.is_nhwc(src):
            imp.set_nhwc(out, imp.b.softmax(imp.nhwc(src), axis=_NCHW_AXIS_IN_NHWC[axis], name=imp.name_for(out, True)))
        else:
            imp.set_plain(out, imp.b.softmax(imp.plain(src), axis=axis, name=out))
        return
    # Before opset 13: flatten to 2-D at `axis` (default 1), softmax the rows, restore the shape.
    axis = _axis_in(attrs.get("axis", 1), rank, "Softmax axis")
    if axis == rank - 1 or all(d == 1 for d in shape[axis + 1:]):
        if imp.is_nhwc(src) and rank == 4:
            imp.set_nhwc(out, imp.b.softmax(imp.nhwc(src), axis=_NCHW_AXIS_IN_NHWC[axis], name=imp.name_for(out, True)))
        else:
            imp.set_plain(out, imp.b.softmax(imp.plain(src), axis=axis, name=out))
        return
    flat = imp.b.reshape(imp.plain(src), (math.prod(shape[:axis]), math.prod(shape[axis:])), name=f"{out}:flat")
    sm = imp.b.softmax(flat, axis=1, name=f"{out}:softmax")
    imp.set_plain(out, imp.b.reshape(sm, shape, name=out))


@_handles("Gemm")
def _gemm(imp: _Importer, node, attrs) -> None:
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    ta, tb = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    out = node.output[0]
    aval, bval = imp.val(node.input[0]), imp.val(node.input[1])
    if bval.const is not None and aval.flat_nhwc is not None and not ta:
        flat, _, c = aval.flat_nhwc
        w = bval.const if tb else bval.const.T  # [N, K], K in (c, h, w) order -> (h, w, c) order
        w = w.reshape(w.shape[0], c, -1).transpose(0, 2, 1).reshape(w.shape[0], -1)
        w = np.ascontiguousarray(w * np.asarray(alpha, w.dtype) if alpha != 1.0 else w)
        y = imp.b.dense(flat, imp.b.constant(w, name=f"{node.input[1]}:dense", copy=False), name=f"{out}:dense")
    elif bval.const is not None:
        a = imp.plain(node.input[0])
        w = bval.const if tb else bval.const.T  # dense wants [N, K]
        w = np.ascontiguousarray(w * np.asarray(alpha, w.dtype) if alpha != 1.0 else w)
        if ta:
            a = imp.b.transpose(a, (1, 0), name=f"{out}:a_t")
        y = imp.b.dense(a, imp.b.constant(w, name=f"{node.input[1]}:dense", copy=False), name=f"{out}:dense")
    else:
        y = imp.b.matmul(imp.plain(node.input[0]), imp.plain(node.input[1]), transpose_a=ta, transpose_b=tb,
                         name=f"{out}:matmul")
        if alpha != 1.0:
            y = imp.b.mul(y, np.float32(alpha), name=f"{out}:alpha")
    if len(node.input) > 2 and node.input[2] and beta != 0.0:
        cval = imp.val(node.input[2])
        c = (imp.b.constant((cval.const * np.asarray(beta, cval.const.dtype)), name=node.input[2])
             if cval.const is not None else imp.plain(node.input[2]))
        if cval.const is None and beta != 1.0:
            c = imp.b.mul(c, np.float32(beta), name=f"{out}:beta")
        y = imp.b.add(y, c, name=out)
    imp.set_plain(out, y)


@_handles("MatMul")
def _matmul(imp: _Importer, node, attrs) -> None:
    a_name, b_name, out = node.input[0], node.input[1], node.output[0]
    av, bv = imp.val(a_name), imp.val(b_name)
    if len(av.shape) < 2 or len(bv.shape) < 2:
        raise imp.err(node, f"1-D MatMul operands are not supported ({list(av.shape)} @ {list(bv.shape)})")
    if bv.const is not None and bv.const.ndim == 2:
        # x[..., K] @ W[K, N]: one dense over the flattened leading dims (TVM does the same).
        k, n = bv.const.shape
        lead = av.shape[:-1]
        x = imp.plain(a_name)
        if len(lead) > 1:
            x = imp.b.reshape(x, (math.prod(lead), k), name=f"{out}:2d")
        y = imp.b.dense(x, imp.b.constant(np.ascontiguousarray(bv.const.T), name=f"{b_name}:dense", copy=False),
                        name=out if len(lead) == 1 else f"{out}:dense")
        if len(lead) > 1:
            y = imp.b.reshape(y, (*lead, n), name=out)
        imp.set_plain(out, y)
        return
    imp.set_plain(out, imp.b.matmul(imp.plain(a_name), imp.plain(b_name), name=out))


@_handles("LayerNormalization")
def _layer_norm(imp: _Importer, node, attrs) -> None:
    imp.single_output(node)
    x, out = imp.val(node.input[0]), node.output[0]
    axis = _axis_in(attrs.get("axis", -1), len(x.shape), "LayerNormalization axis")
    norm_shape = x.shape[axis:]
    gamma = imp.plain(node.input[1])
    beta = (imp.plain(node.input[2]) if len(node.input) > 2 and node.input[2]
            else imp.b.constant(np.zeros(norm_shape, x.dtype), name=f"{out}:beta"))
    imp.set_plain(out, imp.b.layer_norm(imp.plain(node.input[0]), gamma, beta, eps=float(attrs.get("epsilon", 1e-5)),
                                        axis=axis, name=out))


@_handles("ReduceMean")
def _reduce_mean(imp: _Importer, node, attrs) -> None:
    axes = _axes_input(imp, node, attrs, 18)
    if axes is None and attrs.get("noop_with_empty_axes", 0):
        _identity(imp, node, attrs)
        return
    out = node.output[0]
    imp.set_plain(out, imp.b.reduce_mean(imp.plain(node.input[0]), axes, bool(attrs.get("keepdims", 1)), name=out))
