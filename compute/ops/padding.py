"""Constant padding as its own compute stage, and the default output axis names of the ops.

``pad`` is public (``ops.pad``); ``_pad`` is what the convolutions and pooling use for their
``<name>_pad`` stage, which the search may inline or compute at a tile. Re-exported by ``nn``.
"""
from __future__ import annotations

from typing import Sequence

from .. import te
from ..expr import Expr, IterVar, cast, const
from ..tensor import Tensor
from ._common import check_tensor, int_tuple, with_axis_names


def axis_names(ndim: int) -> list[str]:
    """Default names of the output axes of a rank-``ndim`` op (i, j for matrices, as in TVM)."""
    if ndim == 1:
        return ["i"]
    if ndim == 2:
        return ["i", "j"]
    return [f"ax{d}" for d in range(ndim)]


# ---- padding -----------------------------------------------------------------------------------

def pad(data: Tensor, pad_before: int | Sequence[int], pad_after: int | Sequence[int] | None = None,
        pad_value: float | int | Expr = 0.0, name: str = "pad") -> Tensor:
    """``data`` padded with a constant: ``pad_before[d]`` elements before and ``pad_after[d]``
    after dimension ``d`` (an int applies to every dimension; ``pad_after`` defaults to
    ``pad_before``). The result is always a new compute, even when nothing is padded."""
    op = "pad"
    check_tensor(data, op, "data")
    before = int_tuple(pad_before, data.ndim, "pad_before", op, minimum=0)
    after = before if pad_after is None else int_tuple(pad_after, data.ndim, "pad_after", op, minimum=0)
    return _pad(data, before, after, pad_value, name, axis_names(data.ndim))


def _pad(data: Tensor, before: Sequence[int], after: Sequence[int], pad_value: float | int | Expr,
         name: str, names: Sequence[str]) -> Tensor:
    value = cast(pad_value, data.dtype) if isinstance(pad_value, Expr) else const(pad_value, data.dtype)
    shape = tuple(n + b + a for n, b, a in zip(data.shape, before, after))

    def body(*idx: IterVar) -> Expr:
        # Only padded sides get a bound test, so a dimension padded on one side costs one compare
        # and an unpadded one none; the read in the untaken branch may be out of bounds, which is
        # why this must stay a select (TVM does the same).
        conds = []
        src = []
        for i, b, a, n in zip(idx, before, after, data.shape):
            if b:
                conds.append(i >= b)
            if a:
                conds.append(i < b + n)
            src.append(i - b)
        load = data[tuple(src)]
        return te.if_then_else(te.all(*conds), load, value) if conds else load

    return te.compute(shape, with_axis_names(body, names), name=name, tag="pad",
                      attrs={"pad_before": list(before), "pad_after": list(after)})


def pad_hw(data: Tensor, before: Sequence[int], after: Sequence[int], pad_value: float | int | Expr,
           name: str) -> Tensor:
    """An NHWC tensor padded in H and W (a ``<name>_pad`` stage), or ``data`` itself when no side
    is padded: the input stage of the NHWC convolutions and pools."""
    if not any(before) and not any(after):
        return data
    return _pad(data, (0, *before, 0), (0, *after, 0), pad_value, f"{name}_pad", ["n", "h", "w", "c"])
