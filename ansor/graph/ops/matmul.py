"""``matmul``: numpy ``matmul`` of rank >= 2 inputs, batch dimensions broadcast, with
``transpose_a``/``transpose_b`` flags on the last two axes (ONNX ``MatMul``; a ``Gemm`` of two
variables, ``dense.py``).

Import: ``x[..., K] @ W[K, N]`` with a constant 2-D ``W`` becomes one ``dense`` over the
flattened leading dimensions (as TVM does), which is what transformer projections are.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, IterVar, const
from compute.tensor import Tensor

from ..ir_types import GraphError, Node, TensorType
from ..onnx_export import Exporter
from ..op_rules import OpDef, broadcast_shapes, register_op, same_dtype
from ..te_ops import LowerCtx
from ..torch_peer import Runner, Value


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    a, b = ts
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
    if a.ndim < 2 or b.ndim < 2:
        raise GraphError(f"matmul: inputs must be at least 2-D, got {a} and {b}")
    m, ka = (a.shape[-1], a.shape[-2]) if ta else a.shape[-2:]
    kb, n = (b.shape[-1], b.shape[-2]) if tb else b.shape[-2:]
    if ka != kb:
        raise GraphError(f"matmul: inner dimensions differ ({ka} vs {kb}) for {a} and {b}"
                         f" (transpose_a={ta}, transpose_b={tb})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return TensorType((*batch, m, n), same_dtype(ts)), {"transpose_a": ta, "transpose_b": tb}


def _reference(a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.matmul(np.swapaxes(a, -1, -2) if transpose_a else a, np.swapaxes(b, -1, -2) if transpose_b else b)


def _batch_index(t: Tensor, batch: Sequence[IterVar], bshape: Sequence[int]) -> tuple:
    """Broadcast batch index of ``t`` (whose last two axes are the matrix)."""
    tb = t.shape[:-2]
    off = len(bshape) - len(tb)
    return tuple(const(0) if n == 1 and bshape[d + off] != 1 else batch[d + off] for d, n in enumerate(tb))


def _lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
    a, b = xs
    ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
    shape = node.type.shape
    kdim = a.shape[-2] if ta else a.shape[-1]
    k = te.reduce_axis((0, kdim), "k")
    nb = len(shape) - 2

    def body(*i: IterVar) -> Expr:
        batch, r, c = i[:nb], i[nb], i[nb + 1]
        ab = _batch_index(a, batch, shape[:nb])
        bb = _batch_index(b, batch, shape[:nb])
        av = a[(*ab, k, r)] if ta else a[(*ab, r, k)]
        bv = b[(*bb, c, k)] if tb else b[(*bb, k, c)]
        return te.sum(av * bv, axis=k)

    return te.compute(shape, body, name=ctx.name("matmul"), tag="batch_matmul")


def _export(e: Exporter, n: Node) -> None:
    ins = []
    for v, flag in zip(n.inputs, ("transpose_a", "transpose_b")):
        x = e.get_plain(v)
        if n.attrs[flag]:
            r = len(e.graph.type_of(v).shape)
            x = e.node("Transpose", [x], perm=list(range(r - 2)) + [r - 1, r - 2])
        ins.append(x)
    e.plain[n.name] = e.node("MatMul", ins)


def _torch(r: Runner, node: Node, xs: list[Value]) -> Value:
    a, b = (v.plain() for v in xs)
    if node.attrs["transpose_a"]:
        a = a.transpose(-1, -2)
    if node.attrs["transpose_b"]:
        b = b.transpose(-1, -2)
    return Value(r.torch.matmul(a, b))


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
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


MATMUL = register_op(OpDef(
    "matmul", (2, 2), "out_elemwise_fusable", _infer, "batched matmul with broadcast batch dims",
    reference=_reference, lower=_lower, export=_export, torch=_torch, onnx={"MatMul": _import}))
