"""``transpose``: permute the axes (``perm``; reversed by default): ONNX ``Transpose``.

On import a Transpose of an NHWC image is composed with the NHWC -> NCHW permutation (one
transpose, not two), and one that permutes only the channel-group axes of a channel shuffle
(``reshape.py``) changes only the importer's bookkeeping.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compute import ops
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import plain_export
from ..onnx_import_kit import TO_NCHW
from ..op_rules import OpDef, register_op
from ..te_ops import LowerCtx
from ..torch_peer import plain_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    x = ts[0]
    perm = tuple(int(p) for p in attrs.get("perm", range(x.ndim - 1, -1, -1)))
    if sorted(perm) != list(range(x.ndim)):
        raise GraphError(f"transpose: perm {list(perm)} is not a permutation of {x.ndim} axes")
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype), {"perm": perm}


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    return ops.transpose(xs[0], node.attrs["perm"], name=ctx.name("transpose"))


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    src, out = node.input[0], node.output[0]
    rank = len(imp.val(src).shape)
    perm = tuple(attrs.get("perm", range(rank - 1, -1, -1)))
    v = imp.val(src)
    if v.permuted is not None and v.plain is None and sorted(perm[3:]) == [3, 4]:
        # Permuting the channel-group axes of a split NHWC map: only the bookkeeping changes.
        var, p = v.permuted
        qinv = np.argsort(perm)
        imp.set_permuted(out, tuple(v.shape[i] for i in perm), v.dtype, var, tuple(int(qinv[i]) for i in p))
    elif imp.is_nhwc(src):  # compose with the NHWC -> NCHW permutation: no extra transpose
        imp.set_plain(out, imp.b.transpose(imp.nhwc(src), tuple(TO_NCHW[p] for p in perm), name=out))
    else:
        imp.set_plain(out, imp.b.transpose(imp.plain(src), perm, name=out))


TRANSPOSE = register_op(OpDef(
    "transpose", (1, 1), "injective", _infer, "permute the axes",
    reference=lambda x, perm: np.ascontiguousarray(x.transpose(perm)), lower=_lower,
    export=plain_export(lambda e, n, xs: e.node("Transpose", xs, perm=list(n.attrs["perm"]))),
    torch=plain_torch(lambda r, n, x: x.permute(*n.attrs["perm"])), onnx={"Transpose": _import}))
