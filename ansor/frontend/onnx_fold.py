"""Constant folding for the ONNX importer: numpy evaluation of every node whose inputs are all
constants (Constant, ConstantOfShape, Shape, Gather, Unsqueeze, Concat, Reshape, arithmetic, ...),
so the shape computations exporters emit become plain constants at import. The ONNX shape rules
(Reshape, Flatten, Squeeze, Unsqueeze, Slice) it shares with the import rules of the operators
live in ``ansor/graph/onnx_import_kit.py``.

Fold functions take ``(imp, node, attrs, args)``: the importer (for ``opset``, ``where``, ``err``,
``val`` and ``const_of``), the ONNX node, its decoded attributes and the constant input arrays,
and return the output arrays. A model is untrusted: constants it asks for are size-capped.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ..graph.ir import display_name
from ..graph.ops.split import onnx_split
# ONNX's shape rules, shared with the import rules of the operators (ansor/graph/ops/).
from ..graph.onnx_import_kit import (ONNX_DTYPES, axis_in, flatten_axis, reshape_shape, slice_params, squeezed,
                                     unsqueezed)
from compute.errors import InputError
from compute.memory import check_bytes, nbytes_of


class OnnxImportError(InputError):
    """The model cannot be imported: not ONNX, truncated, unsupported ops or unknown shapes."""


# ONNX element types we import, as numpy dtype names (the import rules' table).
NP_DTYPES = ONNX_DTYPES


def tensor_array(t: onnx.TensorProto, where: str) -> np.ndarray:
    """A TensorProto's data; external-data tensors are refused (a model must not make us read
    other files)."""
    if t.data_location == onnx.TensorProto.EXTERNAL or t.external_data:
        raise OnnxImportError(f"{where}: tensor {display_name(t.name)} uses external data, which is not "
                              f"supported (save the model with its weights inside the file)")
    try:
        return numpy_helper.to_array(t)
    except Exception as e:
        raise OnnxImportError(f"{where}: tensor {display_name(t.name)} cannot be decoded ({e})") from None


# op type -> fold function (``(imp, node, attrs, args) -> [output arrays]``)
FOLD: dict[str, Callable[..., list[np.ndarray]]] = {}


def _folds(*ops: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        for op in ops:
            FOLD[op] = fn
        return fn
    return deco


# ---- constant folding (all inputs constant) ---------------------------------------------------------

def _attr_tensor(node, attrs, where) -> np.ndarray:
    if "value" in attrs:
        return tensor_array(attrs["value"], where)
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    raise OnnxImportError(f"{where}: Constant node {display_name(node.name)}: unsupported value attribute "
                          f"({', '.join(attrs) or 'none'})")


# A model is untrusted: a constant it asks us to fold is capped *before* it is allocated. The cap
# is per constant (2**28 elements, 1 GiB of float32, by default: the onnx wheel's light VGG-19
# makes its 4096 x 25088 = 2**26.6 weight with a ConstantOfShape; and a fold may always produce
# as many elements as its largest input) and in total (a quarter of the memory available,
# ``compute.memory``). Past either, the import fails naming the node: a 240 KB model used to
# fold a [30000, 30000] Add into 3.6 GB.
FOLD_LIMIT_ENV = "ANSOR_ONNX_FOLD_LIMIT"
DEFAULT_FOLD_ELEMS = 1 << 28


def fold_limit(explicit: int | None = None) -> int:
    """Elements a folded constant may have: ``explicit`` (``from_onnx(fold_limit=...)``), else
    ``$ANSOR_ONNX_FOLD_LIMIT``, else ``DEFAULT_FOLD_ELEMS``."""
    value: Any = explicit
    what = "from_onnx fold_limit"
    if value is None:
        text = os.environ.get(FOLD_LIMIT_ENV, "").strip()
        if not text:
            return DEFAULT_FOLD_ELEMS
        value, what = text, FOLD_LIMIT_ENV
        try:
            value = int(text)
        except ValueError:
            raise OnnxImportError(f"{what}={text!r}: not a whole number of elements") from None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise OnnxImportError(f"{what}={value!r}: must be a positive number of elements")
    return int(value)


def check_fold(imp: Any, node, shape: Sequence[int], itemsize: int, args: Sequence[Any] = ()) -> None:
    """Refuse (naming the node) a folded constant of ``shape`` before allocating it: negative
    dims, more elements than the fold limit (or than its largest input), or more bytes than
    what is left of the import's fold budget."""
    shape = [int(d) for d in shape]
    if any(d < 0 for d in shape):
        raise imp.err(node, f"constant of shape {shape} has a negative dimension")
    elems = math.prod(shape)
    biggest = max((int(a.size) for a in args if a is not None), default=0)
    if elems > max(imp.fold_elems, biggest):
        raise imp.err(node, f"folding it makes a constant of shape {shape} ({elems} elements), more than "
                            f"the {imp.fold_elems} elements a folded constant may have (set "
                            f"from_onnx(fold_limit=...) or {FOLD_LIMIT_ENV} for a larger model)")
    # The importer prefixes the node to this message (a ValueError from a rule).
    check_bytes(imp.folded_bytes + nbytes_of(shape, itemsize),
                f"folding it (shape {shape}), the constants folded at import", budget=imp.fold_budget)


@_folds("Constant")
def _f_constant(imp, node, attrs, args):
    return [_attr_tensor(node, attrs, imp.where)]


@_folds("ConstantOfShape")
def _f_constant_of_shape(imp, node, attrs, args):
    fill = tensor_array(attrs["value"], imp.where).reshape(-1) if "value" in attrs else np.zeros(1, np.float32)
    shape = tuple(int(d) for d in args[0].reshape(-1))
    check_fold(imp, node, shape, fill.dtype.itemsize)
    return [np.full(shape, fill[0], dtype=fill.dtype)]


@_folds("Shape")
def _f_shape(imp, node, attrs, args):
    shape = imp.val(node.input[0]).shape
    return [np.asarray(shape[attrs.get("start", 0):attrs.get("end", len(shape))], dtype=np.int64)]


@_folds("Gather")
def _f_gather(imp, node, attrs, args):
    axis = axis_in(attrs.get("axis", 0), args[0].ndim, "Gather axis")
    idx, n = args[1].astype(np.int64), args[0].shape[axis]
    check_fold(imp, node, args[0].shape[:axis] + idx.shape + args[0].shape[axis + 1:], args[0].itemsize, args)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise imp.err(node, f"Gather indices must be in [{-n}, {n - 1}] (axis {axis} of {list(args[0].shape)})")
    return [np.take(args[0], idx, axis=axis)]


@_folds("Unsqueeze")
def _f_unsqueeze(imp, node, attrs, args):
    axes = list(attrs["axes"]) if imp.opset < 13 else [int(a) for a in args[1].reshape(-1)]
    return [args[0].reshape(unsqueezed(args[0].shape, axes))]


@_folds("Squeeze")
def _f_squeeze(imp, node, attrs, args):
    axes = (list(attrs["axes"]) if "axes" in attrs else None) if imp.opset < 13 else (
        None if len(args) < 2 or args[1] is None else [int(a) for a in args[1].reshape(-1)])
    return [args[0].reshape(squeezed(args[0].shape, axes))]


@_folds("Concat")
def _f_concat(imp, node, attrs, args):
    parts = [a for a in args if a is not None]
    axis = axis_in(attrs["axis"], parts[0].ndim, "Concat axis")
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts if p.ndim == parts[0].ndim)
    check_fold(imp, node, shape, max(p.itemsize for p in parts))
    return [np.concatenate(parts, axis=axis)]


@_folds("Reshape")
def _f_reshape(imp, node, attrs, args):
    target = attrs["shape"] if imp.opset < 5 else args[1].reshape(-1)
    return [args[0].reshape(reshape_shape(args[0].shape, target, bool(attrs.get("allowzero", 0))))]


@_folds("Flatten")
def _f_flatten(imp, node, attrs, args):
    axis = flatten_axis(attrs, args[0].ndim)
    return [args[0].reshape(math.prod(args[0].shape[:axis]), math.prod(args[0].shape[axis:]))]


@_folds("Transpose")
def _f_transpose(imp, node, attrs, args):
    return [np.transpose(args[0], attrs.get("perm"))]


@_folds("Cast")
def _f_cast(imp, node, attrs, args):
    dtype = NP_DTYPES.get(int(attrs["to"]))
    if dtype is None:
        raise imp.err(node, f"cast to {onnx.TensorProto.DataType.Name(int(attrs['to']))} is not supported")
    return [args[0].astype(dtype)]


@_folds("Identity", "Dropout")
def _f_identity(imp, node, attrs, args):
    imp.single_output(node)
    return [args[0]]


_NP_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": None, "Pow": np.power,
              "Max": np.maximum, "Min": np.minimum, "Equal": np.equal, "Less": np.less, "Greater": np.greater,
              "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal, "And": np.logical_and,
              "Or": np.logical_or, "Xor": np.logical_xor}


@_folds("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Equal", "Less", "Greater", "LessOrEqual",
        "GreaterOrEqual", "And", "Or", "Xor")
def _f_binary(imp, node, attrs, args):
    # Broadcasting [1, N] with [N, 1] makes N * N elements from 2 * N: check before numpy does.
    check_fold(imp, node, np.broadcast_shapes(*(x.shape for x in args)), max(x.itemsize for x in args), args)
    a, b = args[0], args[1] if len(args) > 1 else None
    if node.op_type == "Sum":
        out = args[0]
        for x in args[1:]:
            out = out + x
        return [out]
    if node.op_type == "Div":  # ONNX integer division truncates
        out = (np.trunc(a / b).astype(a.dtype) if a.dtype.kind in "iu" else a / b)
        return [np.asarray(out, dtype=a.dtype)]
    out = _NP_BINARY[node.op_type](a, b)
    return [np.asarray(out) if out.dtype == bool else np.asarray(out, dtype=a.dtype)]


@_folds("Mod")
def _f_mod(imp, node, attrs, args):
    a, b = args
    check_fold(imp, node, np.broadcast_shapes(a.shape, b.shape), max(a.itemsize, b.itemsize), args)
    fmod = int(attrs.get("fmod", 0))
    if fmod == 0 and a.dtype.kind == "f":
        raise imp.err(node, "fmod=0 (floor modulo) is for integers; float inputs need fmod=1")
    if a.dtype.kind in "iu" and not np.all(b):
        raise imp.err(node, "integer Mod by zero")
    return [np.asarray(np.fmod(a, b) if fmod else np.mod(a, b), dtype=a.dtype)]


@_folds("Not")
def _f_not(imp, node, attrs, args):
    return [np.logical_not(args[0])]


@_folds("Sqrt", "Neg", "Relu", "Exp", "Tanh", "Sigmoid")
def _f_unary(imp, node, attrs, args):
    fn = {"Sqrt": np.sqrt, "Neg": np.negative, "Relu": lambda x: np.maximum(x, 0), "Exp": np.exp,
          "Tanh": np.tanh, "Sigmoid": lambda x: 1 / (1 + np.exp(-x))}[node.op_type]
    return [np.asarray(fn(args[0]), dtype=args[0].dtype)]


@_folds("Slice")
def _f_slice(imp, node, attrs, args):
    begin, end, step = slice_params(imp, node, attrs, args[0].shape)
    return [args[0][tuple(slice(b, e, s) for b, e, s in zip(begin, end, step))]]


@_folds("Range")
def _f_range(imp, node, attrs, args):
    start, limit, delta = (a.reshape(-1)[0] for a in args)
    if delta == 0:
        raise imp.err(node, "delta is 0")
    check_fold(imp, node, (max(0, math.ceil((limit - start) / delta)),), args[0].itemsize)
    return [np.arange(start, limit, delta, dtype=args[0].dtype)]


@_folds("Expand")
def _f_expand(imp, node, attrs, args):
    target = tuple(int(d) for d in args[1].reshape(-1))
    if any(d < 0 for d in target):
        raise imp.err(node, f"Expand to shape {list(target)}: negative dimension")
    shape = np.broadcast_shapes(args[0].shape, target)
    check_fold(imp, node, shape, args[0].itemsize, args)
    return [np.broadcast_to(args[0], shape).copy()]


@_folds("Where")
def _f_where(imp, node, attrs, args):
    check_fold(imp, node, np.broadcast_shapes(*(x.shape for x in args)), max(x.itemsize for x in args[1:]), args)
    return [np.where(args[0], args[1], args[2])]


@_folds("Split")
def _f_split(imp, node, attrs, args):
    # A Split of a shape (tf2onnx's Shape -> Split -> Concat -> Reshape) must stay constant.
    axis, sizes = onnx_split(imp, node, attrs, args[0].shape)
    return np.split(args[0], np.cumsum(sizes)[:-1].tolist(), axis=axis)


@_folds("Tile")
def _f_tile(imp, node, attrs, args):
    reps = [int(r) for r in args[1].reshape(-1)]
    if len(reps) != args[0].ndim or any(r < 0 for r in reps):
        raise imp.err(node, f"repeats {reps} must be one count >= 0 per axis of the input (rank {args[0].ndim})")
    check_fold(imp, node, [d * r for d, r in zip(args[0].shape, reps)], args[0].itemsize, args)
    return [np.tile(args[0], reps)]
