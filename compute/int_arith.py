"""Fixed-width integer semantics of the expression dtypes: constant folding, wrap-around, range.

Plain integer arithmetic on Python ints, kept apart from the expression nodes of ``compute.expr``
(which folds integer constants with it and re-exports ``int_range``).
"""
from __future__ import annotations

from . import dtype as dt


def _fold_int(op: str, x: int, y: int) -> int | None:
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    if op == "floordiv":
        return x // y if y != 0 else None
    if op == "floormod":
        return x % y if y != 0 else None
    if op == "min":
        return min(x, y)
    if op == "max":
        return max(x, y)
    return None


def _wrap_int(v: int, dtype: str) -> int:
    b = dt.bits(dtype)
    v &= (1 << b) - 1
    if dt.is_signed(dtype) and v >= 1 << (b - 1):
        v -= 1 << b
    return v


def int_range(dtype: str) -> tuple[int, int]:
    b = dt.bits(dtype)
    if dt.is_signed(dtype):
        return -(1 << (b - 1)), (1 << (b - 1)) - 1
    return 0, (1 << b) - 1
