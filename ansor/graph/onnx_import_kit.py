"""What the ONNX import rules of several operator modules (``ansor/graph/ops/``) share: the NCHW /
NHWC axis maps, the ONNX element types we import, ONNX's axis and shape rules (Reshape, Flatten,
Squeeze, Unsqueeze, Slice; the constant folding of ``ansor/frontend/onnx_fold.py`` uses the same
ones) and the padding of Conv and the pools (``auto_pad``).

Free of ``onnx`` (and of ``ansor.frontend``): the graph package imports without onnx, and the
frontend builds on the graph. The rules take the importer (``imp``) as an argument: its
``opset``, ``const_of`` and ``err``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
NCHW_AXIS_IN_NHWC = {0: 0, 1: 3, 2: 1, 3: 2}  # ONNX (NCHW) axis -> the same axis of an NHWC image

# ONNX element types we import (TensorProto.FLOAT, DOUBLE, INT32, INT64, BOOL), as numpy dtype names.
ONNX_DTYPES = {1: "float32", 11: "float64", 6: "int32", 7: "int64", 9: "bool"}


def attr_str(value: Any) -> str:
    """A string attribute as onnx's helper gives it (bytes) or as written (str)."""
    return value.decode() if isinstance(value, bytes) else value


def axis_in(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in [0, rank) as the ONNX spec allows it: [-rank, rank - 1], negative from the back.
    Out of range is an error (onnxruntime refuses it), never wrapped."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range [{-rank}, {rank - 1}] for rank {rank}")
    return axis + rank if axis < 0 else axis


def reshape_shape(in_shape: Sequence[int], target: Sequence[int], allowzero: bool) -> tuple[int, ...]:
    """ONNX Reshape's output shape: 0 copies the input dimension (unless allowzero), -1 is inferred."""
    shape = [int(d) for d in target]
    for i, d in enumerate(shape):
        if d == 0 and not allowzero:
            shape[i] = in_shape[i]
    if shape.count(-1) > 1:
        raise ValueError(f"reshape target {list(target)} has more than one -1")
    if -1 in shape:
        rest = math.prod(d for d in shape if d != -1)
        shape[shape.index(-1)] = math.prod(in_shape) // rest if rest else 0
    if math.prod(shape) != math.prod(in_shape):
        raise ValueError(f"cannot reshape {list(in_shape)} to {list(target)}")
    return tuple(shape)


def flatten_axis(attrs: dict[str, Any], rank: int) -> int:
    """Flatten's axis in [0, rank]; a negative one counts from the back (-1 is rank - 1)."""
    axis = int(attrs.get("axis", 1))
    if not -rank <= axis <= rank:
        raise ValueError(f"Flatten axis {axis} is out of range [-{rank}, {rank}]")
    return axis + rank if axis < 0 else axis


def unsqueezed(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with 1s inserted at ``axes`` (axes of the output, negative from the back)."""
    rank = len(shape) + len(axes)
    ax = sorted(axis_in(a, rank, "Unsqueeze axis") for a in axes)
    if len(set(ax)) != len(ax):
        raise ValueError(f"Unsqueeze axes {list(axes)} repeat an axis")
    out, it = [], iter(shape)
    for i in range(rank):
        out.append(1 if i in ax else next(it))
    return tuple(out)


def squeezed(shape: Sequence[int], axes: Sequence[int] | None) -> tuple[int, ...]:
    """``shape`` without ``axes`` (all its 1s when ``axes`` is empty)."""
    ax = ({axis_in(a, len(shape), "Squeeze axis") for a in axes} if axes
          else {i for i, d in enumerate(shape) if d == 1})
    if any(shape[a] != 1 for a in ax):
        raise ValueError(f"Squeeze axes {list(axes or [])} name a dimension that is not 1 in {list(shape)}")
    return tuple(d for i, d in enumerate(shape) if i not in ax)


def slice_params(imp: Any, node: Any, attrs: dict[str, Any],
                 shape: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """ONNX Slice (attributes before opset 10, constant inputs after) as per-axis begin, end and
    step, clamped to ``shape``; negative steps are refused."""
    rank = len(shape)
    if imp.opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes, steps = list(attrs.get("axes", range(len(starts)))), [1] * len(starts)
    else:
        starts = [int(v) for v in imp.const_of(node, 1, "starts").reshape(-1)]
        ends = [int(v) for v in imp.const_of(node, 2, "ends").reshape(-1)]
        ax = imp.const_of(node, 3, "axes")
        st = imp.const_of(node, 4, "steps")
        axes = list(range(len(starts))) if ax is None else [int(a) for a in ax.reshape(-1)]
        steps = [1] * len(starts) if st is None else [int(s) for s in st.reshape(-1)]
    begin, end, step = [0] * rank, list(shape), [1] * rank
    for s, e, a, k in zip(starts, ends, axes, steps):
        if k <= 0:
            raise imp.err(node, f"only positive slice steps are supported, got {k}")
        a = axis_in(a, rank, "Slice axis")
        b0, e0, _ = slice(s, e, k).indices(shape[a])
        begin[a], end[a], step[a] = b0, max(e0, b0), k
    return begin, end, step


def axes_input(imp: Any, node: Any, attrs: dict[str, Any], since: int) -> list[int] | None:
    """The ``axes`` of a node that takes them as an attribute before opset ``since`` and as a
    constant input from it on (None: not given)."""
    if imp.opset < since:
        return list(attrs["axes"]) if "axes" in attrs else None
    arr = imp.const_of(node, 1, "axes")
    return None if arr is None else [int(a) for a in arr.reshape(-1)]


def spatial_pads(imp: Any, node: Any, attrs: dict[str, Any], in_hw: Sequence[int], kernel: Sequence[int],
                 strides: Sequence[int], dil: Sequence[int]) -> tuple[int, int, int, int]:
    """The (top, left, bottom, right) padding of a 2-D Conv or pool: ``pads``, or what
    ``auto_pad`` (VALID, SAME_UPPER, SAME_LOWER) makes of the input size."""
    for what, vals in (("kernel_shape", kernel), ("strides", strides), ("dilations", dil)):
        if len(vals) != 2 or any(int(v) < 1 for v in vals):
            raise imp.err(node, f"{what} {list(vals)} must be 2 positive integers (2-D spatial ops only)")
    auto = attr_str(attrs.get("auto_pad", b"NOTSET"))
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
