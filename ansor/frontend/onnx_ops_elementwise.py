"""ONNX handlers for elementwise operators: unary math, Gelu, Clip, Identity/Dropout, Cast and
the broadcasting binary ops.

They keep a 4-D value in the layout it already has (NHWC after a conv stays NHWC), so chains of
activations and residual adds between convolutions need no transposes.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from .onnx_fold import NP_DTYPES as _NP_DTYPES
from .onnx_importer import _handles, _Importer

_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Sqrt": "sqrt", "Erf": "erf",
          "Neg": "neg"}


@_handles(*_UNARY)
def _unary(imp: _Importer, node, attrs) -> None:
    imp.layout_preserving(node, _UNARY[node.op_type], {})


@_handles("Gelu")
def _gelu(imp: _Importer, node, attrs) -> None:
    approx = attrs.get("approximate", b"none")
    imp.layout_preserving(node, "gelu", {"approximate": approx.decode() if isinstance(approx, bytes) else approx})


@_handles("Clip")
def _clip(imp: _Importer, node, attrs) -> None:
    # A bound left out is the type's numeric_limits lowest()/max() (the ONNX spec, onnxruntime):
    # a float input's +-inf is clamped to the largest finite value, not passed through.
    dtype = np.dtype(imp.val(node.input[0]).dtype)
    lo_d, hi_d = ((float(np.finfo(dtype).min), float(np.finfo(dtype).max)) if dtype.kind == "f"
                  else (-math.inf, math.inf))  # an integer has no inf to clamp
    if imp.opset < 11:
        lo, hi = attrs.get("min", lo_d), attrs.get("max", hi_d)
    else:
        lo_a, hi_a = imp.const_of(node, 1, "min"), imp.const_of(node, 2, "max")
        for what, a in (("min", lo_a), ("max", hi_a)):
            if a is not None and a.size != 1:
                raise imp.err(node, f"{what} must be a scalar, got shape {list(a.shape)}")
        lo = lo_d if lo_a is None else float(lo_a.reshape(-1)[0])
        hi = hi_d if hi_a is None else float(hi_a.reshape(-1)[0])
    imp.layout_preserving(node, "clip", {"min": float(lo), "max": float(hi)})


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


@_handles("Cast")
def _cast(imp: _Importer, node, attrs) -> None:
    dtype = _NP_DTYPES.get(int(attrs["to"]))
    if dtype is None:
        raise imp.err(node, f"cast to {onnx.TensorProto.DataType.Name(int(attrs['to']))} is not supported")
    imp.layout_preserving(node, "cast", {"dtype": dtype})
