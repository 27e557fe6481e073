"""``reshape``: row-major reshape to a fully known shape. ONNX ``Reshape``, ``Flatten``,
``Squeeze`` and ``Unsqueeze`` all import as it, with the importer's NHWC tricks:

* flattening a feature map for a classifier (VGG, AlexNet) keeps NHWC element order, no
  transpose: the Gemm reading it (``dense.py``) permutes its weight rows once instead;
* a channel shuffle (ShuffleNet: Reshape [N, C, H, W] -> [N, A, B, H, W], Transpose of A and B,
  Reshape back) becomes one transpose of NHWC data: the 5-D value is kept as a transpose of a
  free NHWC reshape (``transpose.py`` only updates that bookkeeping);
* an NHWC map whose H = W = 1 has its NCHW element order: reshaped without a transpose.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import ops
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import plain_export
from ..onnx_import_kit import axes_input, flatten_axis, reshape_shape, squeezed, unsqueezed
from ..op_rules import OpDef, register_op
from ..te_ops import LowerCtx
from ..torch_peer import plain_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    shape = tuple(int(d) for d in attrs.get("shape", ()))
    if any(d < 0 for d in shape) or math.prod(shape) != ts[0].size:
        raise GraphError(f"reshape: cannot reshape {ts[0]} to {list(shape)}")
    return TensorType(shape, ts[0].dtype), {"shape": shape}


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    return ops.reshape(xs[0], node.type.shape, name=ctx.name("reshape"))


# ---- ONNX import ----------------------------------------------------------------------------------

def _spatial_is_1x1(imp: Any, name: str) -> bool:
    """An NHWC-only value whose H = W = 1 has the same row-major element order as its NCHW twin."""
    v = imp.val(name)
    return imp.is_nhwc(name) and v.shape[2:] == (1, 1)


def reshape_to(imp: Any, node: Any, src: str, shape: Sequence[int]) -> None:
    """Import ``node`` as ``src`` reshaped to ``shape`` (ONNX's layout), with the tricks above."""
    v, shape, out = imp.val(src), tuple(shape), node.output[0]
    if imp.is_nhwc(src) and len(shape) == 5 and shape[0] == v.shape[0] and shape[3:] == v.shape[2:]:
        # Channel split [N, C, H, W] -> [N, A, B, H, W]: in NHWC a free reshape to [N, H, W, A, B].
        n, a, b_, h, w = shape
        var = imp.b.reshape(imp.nhwc(src), (n, h, w, a, b_), name=f"{out}:nhwc_split")
        imp.set_permuted(out, shape, v.dtype, var, (0, 3, 4, 1, 2))
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
        flat = imp.b.reshape(imp.nhwc(src), tuple(shape), name=f"{out}:nhwc_order")
        imp.set_flat_nhwc(out, tuple(shape), v.dtype, flat, src, v.shape[1])
        return
    base = imp.nhwc(src) if _spatial_is_1x1(imp, src) else imp.plain(src)
    imp.set_plain(out, imp.b.reshape(base, tuple(shape), name=out))


def _import_reshape(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    target = attrs["shape"] if imp.opset < 5 else imp.const_of(node, 1, "the target shape")
    src = node.input[0]
    reshape_to(imp, node, src, reshape_shape(imp.val(src).shape, target, bool(attrs.get("allowzero", 0))))


def _import_flatten(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    src = node.input[0]
    shape = imp.val(src).shape
    axis = flatten_axis(attrs, len(shape))
    reshape_to(imp, node, src, (math.prod(shape[:axis]), math.prod(shape[axis:])))


def _import_unsqueeze(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    axes = axes_input(imp, node, attrs, 13)
    reshape_to(imp, node, node.input[0], unsqueezed(imp.val(node.input[0]).shape, axes or []))


def _import_squeeze(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    axes = axes_input(imp, node, attrs, 13)
    reshape_to(imp, node, node.input[0], squeezed(imp.val(node.input[0]).shape, axes))


RESHAPE = register_op(OpDef(
    "reshape", (1, 1), "injective", _infer, "row-major reshape to a fully known shape",
    reference=lambda x, shape: x.reshape(shape), lower=_lower,
    export=plain_export(lambda e, n, xs: e.node("Reshape", [xs[0], e.ints(n.type.shape)])),
    torch=plain_torch(lambda r, n, x: x.reshape(n.attrs["shape"])),
    onnx={"Reshape": _import_reshape, "Flatten": _import_flatten, "Unsqueeze": _import_unsqueeze,
          "Squeeze": _import_squeeze}))
