"""Pooling at the tensor level: 2-D max and average pooling (NHWC) over a strided window.

Average pooling is two stages (window sum, then the division). Re-exported by ``nn``.
"""
from __future__ import annotations

from typing import Sequence

from .. import te
from ..expr import Expr, IterVar, const
from ..tensor import Tensor
from ._common import check_float, check_ndim, check_tensor, int_tuple, padding_nd
from .padding import pad_hw


# ---- pooling -----------------------------------------------------------------------------------

def _pool_window(op: str, data: Tensor, kernel: int | Sequence[int], stride: int | Sequence[int],
                 padding: int | Sequence[int]):
    check_tensor(data, op, "data")
    check_ndim(data, 4, op, "data", "NHWC")
    ks = int_tuple(kernel, 2, "kernel", op)
    strides = int_tuple(stride, 2, "stride", op)
    before, after = padding_nd(padding, 2, op)
    out_hw = []
    for d in range(2):
        # A window made only of padding would give -inf (max) or a meaningless 0 (avg).
        if before[d] >= ks[d] or after[d] >= ks[d]:
            raise ValueError(f"{op}: padding {max(before[d], after[d])} must be smaller than the "
                             f"kernel size {ks[d]} in dimension {'HW'[d]}")
        padded = data.shape[1 + d] + before[d] + after[d]
        if ks[d] > padded:
            raise ValueError(f"{op}: kernel extent {ks[d]} is larger than the padded input extent "
                             f"{padded} in dimension {'HW'[d]}")
        out_hw.append((padded - ks[d]) // strides[d] + 1)
    return ks, strides, before, after, out_hw


def max_pool2d(data: Tensor, kernel: int | Sequence[int], stride: int | Sequence[int] = 1,
               padding: int | Sequence[int] = 0, name: str = "max_pool2d") -> Tensor:
    """Max pooling, NHWC: [N, H, W, C] -> [N, OH, OW, C]. Padding never wins (it is the dtype's
    lowest value), and padding must be smaller than the window so every window sees real data."""
    op = "max_pool2d"
    ks, strides, before, after, out_hw = _pool_window(op, data, kernel, stride, padding)
    src = pad_hw(data, before, after, te.min_value(data.dtype), name)
    rh = te.reduce_axis((0, ks[0]), "rh")
    rw = te.reduce_axis((0, ks[1]), "rw")

    def body(n: IterVar, h: IterVar, w: IterVar, c: IterVar) -> Expr:
        return te.max(src[n, h * strides[0] + rh, w * strides[1] + rw, c], axis=[rh, rw])

    return te.compute((data.shape[0], out_hw[0], out_hw[1], data.shape[3]), body, name=name,
                      tag="max_pool2d", attrs={"kernel": list(ks), "stride": list(strides)})


def avg_pool2d(data: Tensor, kernel: int | Sequence[int], stride: int | Sequence[int] = 1,
               padding: int | Sequence[int] = 0, name: str = "avg_pool2d") -> Tensor:
    """Average pooling, NHWC: [N, H, W, C] -> [N, OH, OW, C].

    count_include_pad semantics: every window sum is divided by the full window size KH*KW, padded
    positions counting as zeros (TVM's ``count_include_pad=True``, PyTorch's default). Two stages:
    ``<name>_sum`` (the window sums) and ``<name>`` (the division).
    """
    op = "avg_pool2d"
    check_tensor(data, op, "data")
    check_float(data, op)
    ks, strides, before, after, out_hw = _pool_window(op, data, kernel, stride, padding)
    src = pad_hw(data, before, after, 0, name)
    rh = te.reduce_axis((0, ks[0]), "rh")
    rw = te.reduce_axis((0, ks[1]), "rw")
    shape = (data.shape[0], out_hw[0], out_hw[1], data.shape[3])

    def window_sum(n: IterVar, h: IterVar, w: IterVar, c: IterVar) -> Expr:
        return te.sum(src[n, h * strides[0] + rh, w * strides[1] + rw, c], axis=[rh, rw])

    total = te.compute(shape, window_sum, name=f"{name}_sum", tag="reduce",
                       attrs={"kernel": list(ks), "stride": list(strides)})
    size = const(float(ks[0] * ks[1]), data.dtype)
    return te.compute(shape, lambda n, h, w, c: total[n, h, w, c] / size, name=name, tag="elemwise")
