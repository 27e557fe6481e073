"""Data types of the tensor-expression language.

One canonical spelling per type (the numpy name), so dtype checks are string compares. The set is
deliberately small: what the CPU backend can load, store and compute on natively.
"""
from __future__ import annotations

import numpy as np

DTYPES = ("float32", "float64", "int8", "uint8", "int32", "int64", "bool")
FLOAT_DTYPES = frozenset({"float32", "float64"})
INT_DTYPES = frozenset({"int8", "uint8", "int32", "int64"})
SIGNED_INT_DTYPES = frozenset({"int8", "int32", "int64"})
INDEX_DTYPE = "int32"  # loop and axis variables; codegen widens to 64 bits for addressing

_BITS = {"float32": 32, "float64": 64, "int8": 8, "uint8": 8, "int32": 32, "int64": 64, "bool": 1}


def canonical(dtype: object) -> str:
    """Return the canonical name of ``dtype`` or raise a TypeError naming the bad value."""
    if isinstance(dtype, str) and dtype in _BITS:
        return dtype
    if dtype is float:
        return "float32"
    if dtype is int:
        return "int32"
    if dtype is bool:
        return "bool"
    try:
        name = np.dtype(dtype).name  # type: ignore[arg-type]
    except TypeError:
        name = None
    if name in _BITS:
        return name
    raise TypeError(f"unknown dtype {dtype!r}; supported dtypes are {', '.join(DTYPES)}")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_signed(dtype: str) -> bool:
    return dtype in SIGNED_INT_DTYPES


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def bits(dtype: str) -> int:
    return _BITS[dtype]


def nbytes(dtype: str) -> int:
    return 1 if dtype == "bool" else _BITS[dtype] // 8


def to_numpy(dtype: str) -> np.dtype:
    return np.dtype(dtype)
