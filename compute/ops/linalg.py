"""Linear-algebra operators at the tensor level: matmul (all transpose variants), batch matmul
and the matrix 2-norm ("NRM" in the Ansor paper's benchmark set).

The transpose flags change only how the inputs are indexed, never add a transpose stage: the
access pattern is exactly what the auto-scheduler's tiling and layout decisions react to.
"""
from __future__ import annotations

from .. import te
from ..expr import Expr, IterVar
from ..tensor import Tensor
from ._common import (accumulate_as, check_float, check_ndim, check_same_dtype, check_tensor,
                      out_dtype_of, with_axis_names)

__all__ = ["batch_matmul", "matmul", "norm"]


def _mode(transpose_a: bool, transpose_b: bool) -> str:
    return ("T" if transpose_a else "N") + ("T" if transpose_b else "N")


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False,
           out_dtype: str | None = None, name: str = "matmul") -> Tensor:
    """C[M, N] = op(A) @ op(B), where A is [M, K] ([K, M] if ``transpose_a``) and B is [K, N]
    ([N, K] if ``transpose_b``). NN, NT, TN and TT are all supported."""
    op = "matmul"
    check_tensor(a, op, "A")
    check_tensor(b, op, "B")
    check_ndim(a, 2, op, "A", "K, M" if transpose_a else "M, K")
    check_ndim(b, 2, op, "B", "N, K" if transpose_b else "K, N")
    acc = out_dtype_of(out_dtype, check_same_dtype(op, a, b))
    m, ka = a.shape[::-1] if transpose_a else a.shape
    kb, n = b.shape[::-1] if transpose_b else b.shape
    if ka != kb:
        raise ValueError(f"matmul ({_mode(transpose_a, transpose_b)}): inner dimensions differ: A "
                         f"{list(a.shape)} gives K={ka}, B {list(b.shape)} gives K={kb}")
    k = te.reduce_axis((0, ka), "k")

    def body(i: IterVar, j: IterVar) -> Expr:
        x = a[k, i] if transpose_a else a[i, k]
        y = b[j, k] if transpose_b else b[k, j]
        return te.sum(accumulate_as(x, acc) * accumulate_as(y, acc), axis=k)

    return te.compute((m, n), body, name=name, tag="matmul",
                      attrs={"transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)})


def batch_matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False,
                 out_dtype: str | None = None, name: str = "batch_matmul") -> Tensor:
    """C[B, M, N] = op(A[b]) @ op(B[b]) for each batch b.

    A is [B, M, K] ([B, K, M] if ``transpose_a``), B is [B, K, N] ([B, N, K] if ``transpose_b``;
    TVM's batch_matmul is this NT form). A batch extent of 1 on one side broadcasts.
    """
    op = "batch_matmul"
    check_tensor(a, op, "A")
    check_tensor(b, op, "B")
    check_ndim(a, 3, op, "A", "batch, K, M" if transpose_a else "batch, M, K")
    check_ndim(b, 3, op, "B", "batch, N, K" if transpose_b else "batch, K, N")
    acc = out_dtype_of(out_dtype, check_same_dtype(op, a, b))
    ba, bb = a.shape[0], b.shape[0]
    if ba != bb and 1 not in (ba, bb):
        raise ValueError(f"batch_matmul: batch sizes differ: A has {ba}, B has {bb} (only a batch "
                         "of 1 broadcasts)")
    m, ka = a.shape[:0:-1] if transpose_a else a.shape[1:]
    kb, n = b.shape[:0:-1] if transpose_b else b.shape[1:]
    if ka != kb:
        raise ValueError(f"batch_matmul ({_mode(transpose_a, transpose_b)}): inner dimensions differ: "
                         f"A {list(a.shape)} gives K={ka}, B {list(b.shape)} gives K={kb}")
    k = te.reduce_axis((0, ka), "k")
    batch = max(ba, bb)

    def body(bi: IterVar, i: IterVar, j: IterVar) -> Expr:
        pa = bi if ba == batch else 0
        pb = bi if bb == batch else 0
        x = a[pa, k, i] if transpose_a else a[pa, i, k]
        y = b[pb, j, k] if transpose_b else b[pb, k, j]
        return te.sum(accumulate_as(x, acc) * accumulate_as(y, acc), axis=k)

    return te.compute((batch, m, n), with_axis_names(body, ["b", "i", "j"]), name=name,
                      tag="batch_matmul",
                      attrs={"transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)})


def norm(x: Tensor, name: str = "norm") -> Tensor:
    """The 2-norm of all elements, sqrt(sum(x**2)) (the Frobenius norm of a matrix), shape (1,).

    Two stages: ``<name>_sumsq`` reduces every axis of ``x`` at once and ``<name>`` takes the square
    root (a reduction must be a whole compute body).
    """
    op = "norm"
    check_tensor(x, op)
    check_float(x, op)
    rnames = ["ri", "rj"] if x.ndim == 2 else [f"r{d}" for d in range(x.ndim)]
    raxes = [te.reduce_axis((0, n), rn) for n, rn in zip(x.shape, rnames)]

    def sumsq(i: IterVar) -> Expr:
        v = x[tuple(raxes)]
        return te.sum(v * v, axis=raxes)

    total = te.compute((1,), sumsq, name=f"{name}_sumsq", tag="reduce")
    return te.compute((1,), lambda i: te.sqrt(total[i]), name=name, tag="elemwise")
