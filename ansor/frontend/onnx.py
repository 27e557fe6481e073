"""ONNX import: ``from_onnx(model_or_path, shape=None) -> Graph``.

Layout. ONNX vision models are NCHW; our kernels are tuned NHWC. The importer converts inside:
conv weights are transposed once at import (OIHW -> HWIO), and 4-D values flowing between
layout-aware ops (Conv, pools, BatchNormalization, LRN, elementwise ops, Concat, Softmax on the
channel axis, Flatten/Reshape of a feature map, Transpose) stay NHWC; a Gemm after a flattened
feature map (VGG, AlexNet) gets its weight rows permuted to NHWC order at import, and a channel
shuffle (Reshape -> Transpose -> Reshape, ShuffleNet) becomes one transpose of NHWC data. Other
transposes are added only where a value crosses into a layout-agnostic op (e.g. a general
Reshape of a feature map) and at the graph boundary: **the imported graph takes and returns
the model's own layout** (NCHW in, NCHW out, as onnxruntime does), with a transpose after each
4-D input and before each 4-D output.

Import also folds BatchNormalization into the preceding Conv (when the conv's output feeds
only it), evaluates every node whose inputs are all constant (Constant, ConstantOfShape, Shape,
Gather, Unsqueeze, Concat, ... chains feeding Reshape; Shape of any value is constant since
shapes are static), and is opset-aware (Softmax before/after 13, Clip, Pad, Squeeze/Unsqueeze,
ReduceMean axes as attributes or inputs).

The model is untrusted input: it is parsed from bytes (external-data references are refused,
so a model cannot make us read other files), names are kept only to label inputs, outputs and
printed nodes (``display_name`` escapes them), and nothing from the model becomes code.
"""
from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import onnx
except ImportError as e:  # pragma: no cover - exercised by a subprocess test without onnx
    raise ImportError("ansor.frontend.onnx needs the onnx package: pip install 'ansor-py[onnx]'") from e

from ..graph.builder import GraphBuilder, Var
from ..graph.ir import DTYPES, Graph, GraphError, display_name
from .onnx_fold import FOLD as _FOLD
from .onnx_fold import NP_DTYPES as _NP_DTYPES
from .onnx_fold import OnnxImportError
from .onnx_fold import flatten_axis as _flatten_axis
from .onnx_fold import reshape_shape as _reshape_shape
from .onnx_fold import slice_params as _slice_params
from .onnx_fold import squeezed as _squeezed
from .onnx_fold import tensor_array as _tensor
from .onnx_fold import unsqueezed as _unsqueezed


_TO_NHWC = (0, 2, 3, 1)
_TO_NCHW = (0, 3, 1, 2)
_NCHW_AXIS_IN_NHWC = {0: 0, 1: 3, 2: 1, 3: 2}


@dataclass
class _Val:
    """An ONNX value during import: a constant array, or graph vars in plain (the model's own
    layout) and/or NHWC form (4-D values only), with its logical (ONNX) shape."""

    shape: tuple[int, ...]
    dtype: str
    const: np.ndarray | None = None
    plain: Var | None = None
    nhwc: Var | None = None
    # A [N, C*H*W] flatten of an NHWC map, kept in NHWC element order: (var [N, H*W*C], source
    # ONNX name, C). A Gemm on it permutes its weight instead; any other reader materialises it.
    flat_nhwc: tuple[Var, str, int] | None = None
    # A 5-D value split from an NHWC map's channels ([N, A, B, H, W], ShuffleNet's channel
    # shuffle), stored as ``var = value.transpose(perm)`` with the spatial axes kept inner-most
    # but one: Transposes of it only change ``perm``; see _reshape_to.
    permuted: tuple[Var, tuple[int, ...]] | None = None


# ---- loading --------------------------------------------------------------------------------------

def _load(model_or_path: Any) -> tuple[onnx.ModelProto, str]:
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path, "<ModelProto>"
    if isinstance(model_or_path, (bytes, bytearray)):
        data, where = bytes(model_or_path), "<bytes>"
    elif isinstance(model_or_path, (str, os.PathLike)):
        where = os.fspath(model_or_path)
        try:
            with open(where, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OnnxImportError(f"{where}: cannot read the model file ({e.strerror or e})") from None
    else:
        raise TypeError(f"from_onnx: expected a path, bytes or onnx.ModelProto, got {type(model_or_path).__name__}")
    try:
        model = onnx.ModelProto()
        model.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError and friends
        raise OnnxImportError(f"{where}: not a valid ONNX model (protobuf parse failed: {e}); "
                              f"is the file truncated or not an .onnx file?") from None
    # protobuf accepts many byte strings as a (mostly empty) message: check it looks like a model.
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.node or not model.graph.output:
        raise OnnxImportError(f"{where}: not a valid ONNX model (no ir_version, graph, nodes or outputs); "
                              f"is the file truncated or not an .onnx file?")
    return model, where


def _opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


# ---- the importer -----------------------------------------------------------------------------------

class _Importer:
    def __init__(self, model: onnx.ModelProto, where: str, shape: Any) -> None:
        self.model, self.where, self.g = model, where, model.graph
        self.opset = _opset(model)
        self.b = GraphBuilder(model.graph.name or "onnx")
        self.env: dict[str, _Val] = {}
        self.out_names = [o.name for o in self.g.output]
        self.uses: Counter[str] = Counter(i for n in self.g.node for i in n.input if i)
        self.uses.update(self.out_names)
        self.conv_of: dict[str, tuple[Var, Var, Var | None]] = {}  # conv output -> (conv, weight, bias)
        self.shape_arg = shape

    def err(self, node: onnx.NodeProto, msg: str) -> OnnxImportError:
        return OnnxImportError(f"{self.where}: node {display_name(node.name or node.output[0])} "
                               f"({node.op_type}): {msg}")

    # -- values --
    def val(self, name: str) -> _Val:
        return self.env[name]

    def plain(self, name: str) -> Var:
        v = self.env[name]
        if v.plain is None:
            if v.const is not None:
                v.plain = self.b.constant(self._const_dtype(v.const, name), name=f"{name}", copy=False)
            elif v.flat_nhwc is not None:
                v.plain = self.b.reshape(self.plain(v.flat_nhwc[1]), v.shape, name=name)
            elif v.permuted is not None:
                var, perm = v.permuted
                v.plain = self.b.transpose(var, tuple(int(i) for i in np.argsort(perm)), name=name)
            else:
                # A graph output's NCHW twin takes the output's own name.
                v.plain = self.b.transpose(v.nhwc, _TO_NCHW, name=name if name in self.out_names else f"{name}:nchw")
        return v.plain

    def nhwc(self, name: str) -> Var:
        v = self.env[name]
        if v.nhwc is None:
            if v.const is not None:
                arr = v.const.reshape((1,) * (4 - v.const.ndim) + v.const.shape)
                v.nhwc = self.b.constant(self._const_dtype(np.ascontiguousarray(arr.transpose(_TO_NHWC)), name),
                                         name=f"{name}:nhwc", copy=False)
            else:
                v.nhwc = self.b.transpose(v.plain, _TO_NHWC, name=f"{name}:nhwc")
        return v.nhwc

    def is_nhwc(self, name: str) -> bool:
        v = self.env[name]
        return v.const is None and v.nhwc is not None and v.plain is None

    def _const_dtype(self, arr: np.ndarray, name: str) -> np.ndarray:
        if str(arr.dtype) not in DTYPES:
            raise OnnxImportError(f"{self.where}: constant {display_name(name)} has dtype {arr.dtype}, "
                                  f"supported: {', '.join(DTYPES)}")
        return arr

    def set_plain(self, name: str, var: Var) -> None:
        self.env[name] = _Val(var.shape, var.dtype, plain=var)

    def set_nhwc(self, name: str, var: Var) -> None:
        n, h, w, c = var.shape
        self.env[name] = _Val((n, c, h, w), var.dtype, nhwc=var)

    def set_const(self, name: str, arr: np.ndarray) -> None:
        arr = np.asarray(arr)
        self.env[name] = _Val(arr.shape, str(arr.dtype), const=arr)

    def const_of(self, node: onnx.NodeProto, idx: int, what: str) -> np.ndarray | None:
        if idx >= len(node.input) or not node.input[idx]:
            return None
        v = self.env[node.input[idx]]
        if v.const is None:
            raise self.err(node, f"{what} (input {idx}) must be a constant")
        return v.const

    # -- driver --
    def inputs(self) -> None:
        inits = {t.name for t in self.g.initializer}
        for t in self.g.initializer:
            self.set_const(t.name, _tensor(t, self.where))
        real = [i for i in self.g.input if i.name not in inits]
        given = self.shape_arg
        if given is not None and not isinstance(given, Mapping):
            if len(real) != 1:
                raise OnnxImportError(f"{self.where}: shape= as one shape needs a model with one input; "
                                      f"this one has {len(real)}: pass a dict {{input name: shape}}")
            given = {real[0].name: given}
        given = dict(given or {})
        unknown = [k for k in given if k not in {i.name for i in real}]
        if unknown:
            raise OnnxImportError(f"{self.where}: shape= names unknown input(s) "
                                  f"{', '.join(display_name(str(k)) for k in unknown)}; inputs: "
                                  f"{', '.join(display_name(i.name) for i in real)}")
        for i in real:
            tt = i.type.tensor_type
            dtype = _NP_DTYPES.get(tt.elem_type)
            if dtype is None:
                raise OnnxImportError(f"{self.where}: input {display_name(i.name)} has element type "
                                      f"{onnx.TensorProto.DataType.Name(tt.elem_type)}; supported: {', '.join(DTYPES)}")
            dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim]
            shown = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
            if i.name in given:
                shp = tuple(int(d) for d in given[i.name])
                if not tt.HasField("shape"):
                    pass
                elif len(shp) != len(dims) or any(d is not None and d != s for d, s in zip(dims, shp)):
                    raise OnnxImportError(f"{self.where}: shape= gives {list(shp)} for input "
                                          f"{display_name(i.name)}, which the model declares as {shown}")
            elif not tt.HasField("shape") or any(d is None for d in dims):
                example = ", ".join(str(d) if d is not None else "1" for d in dims) if tt.HasField("shape") else "..."
                raise OnnxImportError(
                    f"{self.where}: input {display_name(i.name)} has a dynamic or missing shape "
                    f"({shown if tt.HasField('shape') else 'no shape'}); pass it explicitly, e.g. "
                    f"from_onnx(..., shape={{{i.name!r}: ({example})}})")
            else:
                shp = tuple(dims)
            self.set_plain(i.name, self.b.input(i.name, shp, dtype))

    def check_supported(self) -> None:
        bad: dict[str, list] = {}
        for n in self.g.node:
            key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
            if key not in _HANDLERS:
                entry = bad.setdefault(key, [0, n.name or (n.output[0] if n.output else "?")])
                entry[0] += 1
        if bad:
            lines = "; ".join(f"{op} x{cnt} (first: {display_name(first)})" for op, (cnt, first) in sorted(bad.items()))
            raise OnnxImportError(f"{self.where}: unsupported ONNX operator(s): {lines}")

    def run(self) -> Graph:
        self.check_supported()
        self.inputs()
        for node in self.g.node:
            for i in node.input:
                if i and i not in self.env:
                    raise self.err(node, f"input {display_name(i)} is not defined before it (graph not "
                                         f"topologically sorted?)")
            for o in node.output:
                if o and o in self.env:
                    raise self.err(node, f"output {display_name(o)} is already defined (the graph is not SSA)")
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            try:
                if all(self.env[i].const is not None for i in node.input if i) and node.op_type in _FOLD:
                    outs = _FOLD[node.op_type](self, node, attrs, [self.env[i].const if i else None
                                                                   for i in node.input])
                    for name, arr in zip(node.output, outs):
                        self.set_const(name, arr)
                    continue
                _HANDLERS[node.op_type](self, node, attrs)
            except (GraphError, ValueError, IndexError) as e:
                if isinstance(e, OnnxImportError):
                    raise
                raise self.err(node, str(e)) from None
        outs = []
        for name in self.out_names:
            if name not in self.env:
                raise OnnxImportError(f"{self.where}: graph output {display_name(name)} is never computed")
            var = self.plain(name)
            if var.name != name:
                var = self.b.add_node("identity", [var], {}, name)
            outs.append(var)
        return self.b.build(outs)

    # -- shared node helpers --
    def name_for(self, onnx_name: str, nhwc: bool = False) -> str:
        # An NHWC value that is a graph output gets a suffix: its plain (NCHW) twin takes the name.
        return f"{onnx_name}:nhwc" if nhwc and onnx_name in self.out_names else onnx_name

    def single_output(self, node: onnx.NodeProto) -> None:
        for extra in node.output[1:]:
            if extra and self.uses[extra]:
                raise self.err(node, f"only the first output is supported, but output "
                                     f"{display_name(extra)} is used")


# ---- node handlers ---------------------------------------------------------------------------------

Handler = Callable[[_Importer, onnx.NodeProto, dict[str, Any]], None]
_HANDLERS: dict[str, Handler] = {}


def _handles(*ops: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for op in ops:
            _HANDLERS[op] = fn
        return fn
    return deco


def _const_only(imp: _Importer, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    raise imp.err(node, "supported only on constant inputs (it is evaluated at import)")


def _spatial_pads(imp: _Importer, node, attrs, in_hw, kernel, strides, dil) -> tuple[int, int, int, int]:
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        if len(pads) != 4:
            raise imp.err(node, f"only 2-D spatial ops are supported (pads {pads})")
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


_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Sqrt": "sqrt", "Erf": "erf",
          "Neg": "neg"}


def _layout_preserving(imp: _Importer, node, op: str, attrs: dict[str, Any]) -> None:
    src, out = node.input[0], node.output[0]
    if imp.is_nhwc(src):
        imp.set_nhwc(out, imp.b.add_node(op, [imp.nhwc(src)], attrs, imp.name_for(out, True)))
    else:
        imp.set_plain(out, imp.b.add_node(op, [imp.plain(src)], attrs, out))


@_handles(*_UNARY)
def _unary(imp: _Importer, node, attrs) -> None:
    _layout_preserving(imp, node, _UNARY[node.op_type], {})


@_handles("Gelu")
def _gelu(imp: _Importer, node, attrs) -> None:
    approx = attrs.get("approximate", b"none")
    _layout_preserving(imp, node, "gelu", {"approximate": approx.decode() if isinstance(approx, bytes) else approx})


@_handles("Clip")
def _clip(imp: _Importer, node, attrs) -> None:
    if imp.opset < 11:
        lo, hi = attrs.get("min", -math.inf), attrs.get("max", math.inf)
    else:
        lo_a, hi_a = imp.const_of(node, 1, "min"), imp.const_of(node, 2, "max")
        lo = -math.inf if lo_a is None else float(lo_a)
        hi = math.inf if hi_a is None else float(hi_a)
    _layout_preserving(imp, node, "clip", {"min": float(lo), "max": float(hi)})


@_handles("Identity", "Dropout")
def _identity(imp: _Importer, node, attrs) -> None:
    imp.single_output(node)  # Dropout's mask
    imp.env[node.output[0]] = imp.env[node.input[0]]  # the same value, in every layout it has


_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Sum": "add",
           "Max": "maximum", "Min": "minimum"}


@_handles(*_BINARY)
def _binary(imp: _Importer, node, attrs) -> None:
    if imp.opset < 7 and attrs.get("broadcast", 0):
        raise imp.err(node, "legacy broadcast (opset < 7, broadcast=1) is not supported")
    op, names, out = _BINARY[node.op_type], [i for i in node.input if i], node.output[0]
    vals = [imp.val(n) for n in names]
    shape = tuple(np.broadcast_shapes(*(v.shape for v in vals)))
    use_nhwc = (len(shape) == 4 and any(imp.is_nhwc(n) for n in names)
                and all(v.const is not None or v.nhwc is not None or len(v.shape) == 4 for v in vals))
    # In NHWC, lower-rank constants (e.g. a [C, 1, 1] scale) are lifted to 4-D and transposed.
    args = [(imp.nhwc if use_nhwc else imp.plain)(n) for n in names]
    acc = args[0]
    for k, a in enumerate(args[1:]):
        last = k == len(args) - 2
        acc = imp.b.add_node(op, [acc, a], {}, imp.name_for(out, use_nhwc) if last else f"{out}:partial")
    if len(args) == 1:
        acc = imp.b.add_node("identity", [acc], {}, imp.name_for(out, use_nhwc))
    (imp.set_nhwc if use_nhwc else imp.set_plain)(out, acc)


@_handles("MaxPool", "AveragePool")
def _pool(imp: _Importer, node, attrs) -> None:
    imp.single_output(node)
    x = imp.val(node.input[0])
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
    kw = dict(size=int(attrs["size"]), alpha=float(attrs.get("alpha", 1e-4)), beta=float(attrs.get("beta", 0.75)),
              bias=float(attrs.get("bias", 1.0)))
    if len(imp.val(src).shape) == 4:
        imp.set_nhwc(out, imp.b.lrn(imp.nhwc(src), axis=-1, name=imp.name_for(out, True), **kw))
    else:
        imp.set_plain(out, imp.b.lrn(imp.plain(src), axis=1, name=out, **kw))


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
    axis = int(attrs["axis"]) % rank
    out = node.output[0]
    if rank == 4 and any(imp.is_nhwc(n) for n in names):
        y = imp.b.concat([imp.nhwc(n) for n in names], axis=_NCHW_AXIS_IN_NHWC[axis], name=imp.name_for(out, True))
        imp.set_nhwc(out, y)
    else:
        imp.set_plain(out, imp.b.concat([imp.plain(n) for n in names], axis=axis, name=out))


@_handles("Softmax")
def _softmax(imp: _Importer, node, attrs) -> None:
    src, out = node.input[0], node.output[0]
    shape = imp.val(src).shape
    rank = len(shape)
    if imp.opset >= 13:
        axis = int(attrs.get("axis", -1)) % rank
        if imp.is_nhwc(src):
            imp.set_nhwc(out, imp.b.softmax(imp.nhwc(src), axis=_NCHW_AXIS_IN_NHWC[axis], name=imp.name_for(out, True)))
        else:
            imp.set_plain(out, imp.b.softmax(imp.plain(src), axis=axis, name=out))
        return
    # Before opset 13: flatten to 2-D at `axis` (default 1), softmax the rows, restore the shape.
    axis = int(attrs.get("axis", 1)) % rank
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
    axis = int(attrs.get("axis", -1)) % len(x.shape)
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
            axes = [int(a) % rank for a in imp.const_of(node, 3, "axes").reshape(-1)]
            full = [0] * (2 * rank)
            for k, a in enumerate(axes):
                full[a], full[rank + a] = pads[k], pads[len(axes) + k]
            pads = full
    if any(p < 0 for p in pads):
        raise imp.err(node, f"negative pads (cropping) are not supported: {pads}")
    out = node.output[0]
    imp.set_plain(out, imp.b.pad(imp.plain(node.input[0]), pads[:rank], pads[rank:], value, name=out))


@_handles("Cast")
def _cast(imp: _Importer, node, attrs) -> None:
    dtype = _NP_DTYPES.get(int(attrs["to"]))
    if dtype is None:
        raise imp.err(node, f"cast to {onnx.TensorProto.DataType.Name(int(attrs['to']))} is not supported")
    _layout_preserving(imp, node, "cast", {"dtype": dtype})


@_handles("Slice")
def _slice(imp: _Importer, node, attrs) -> None:
    shape = imp.val(node.input[0]).shape
    begin, end, step = _slice_params(imp, node, attrs, shape)
    out = node.output[0]
    imp.set_plain(out, imp.b.add_node("slice", [imp.plain(node.input[0])],
                                      {"begin": begin, "end": end, "step": step}, out))


# Shape is constant for any input (shapes are static): fold it even when its input is not.
_HANDLERS["Shape"] = lambda imp, node, attrs: imp.set_const(node.output[0], _FOLD["Shape"](imp, node, attrs, [])[0])
# An op that can only be folded (Gather, ConstantOfShape, ...) is an error on non-constant inputs.
for _op in _FOLD:
    _HANDLERS.setdefault(_op, _const_only)


def from_onnx(model_or_path: Any, shape: Mapping[str, Sequence[int]] | Sequence[int] | None = None) -> Graph:
    """Import an ONNX model as a ``Graph`` (see the module docstring for layout and limits).

    ``model_or_path``: a path to an ``.onnx`` file, its bytes, or an ``onnx.ModelProto``.
    ``shape``: ``{input name: shape}`` for inputs whose shape the model leaves dynamic or
    missing (or one shape for a single-input model). Errors are ``OnnxImportError`` naming
    the file, and the node or input at fault.
    """
    model, where = _load(model_or_path)
    return _Importer(model, where, shape).run()


__all__ = ["OnnxImportError", "from_onnx"]
