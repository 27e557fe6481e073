"""Argument normalisation and checks shared by the operator modules.

Every public op validates its arguments up front and raises a ValueError (or TypeError for a value
of the wrong kind) whose message starts with the op's name, so that a mistake deep inside a fused
graph still says which call was wrong.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

from .. import dtype as dt
from ..expr import Expr, cast
from ..tensor import Tensor


def check_tensor(x: object, op: str, what: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {what} must be a Tensor, got {x!r} (type {type(x).__name__})")
    return x


def check_ndim(x: Tensor, ndim: int, op: str, what: str, layout: str = "") -> None:
    if x.ndim != ndim:
        lay = f" ({layout})" if layout else ""
        raise ValueError(f"{op}: {what} must be {ndim}-D{lay}, got shape {list(x.shape)}")


def check_float(x: Tensor, op: str) -> None:
    if not dt.is_float(x.dtype):
        raise ValueError(f"{op}: needs a float input, got {x.name!r} of dtype {x.dtype}")


def check_same_dtype(op: str, *tensors: Tensor) -> str:
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        desc = ", ".join(f"{t.name!r}: {t.dtype}" for t in tensors)
        raise ValueError(f"{op}: inputs have different dtypes ({desc}); cast them to one dtype")
    return tensors[0].dtype


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def int_tuple(value: int | Sequence[int], n: int, what: str, op: str, minimum: int = 1) -> tuple[int, ...]:
    """An int (same for all ``n`` dimensions) or a sequence of ``n`` ints, each >= ``minimum``."""
    vals: tuple[Any, ...]
    if _is_int(value):
        vals = (value,) * n
    else:
        try:
            vals = tuple(value)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"{op}: {what} must be an int or a sequence of {n} ints, got {value!r}") from None
        if len(vals) != n:
            raise ValueError(f"{op}: {what} must have {n} value(s), got {value!r}")
    for v in vals:
        if not _is_int(v):
            raise TypeError(f"{op}: {what} {value!r} contains the non-integer {v!r}")
        if v < minimum:
            raise ValueError(f"{op}: {what} must be >= {minimum}, got {value!r}")
    return vals


def padding_nd(padding: int | Sequence[int], n: int, op: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Padding of ``n`` spatial dimensions as (before, after).

    Accepted forms: an int (everywhere), ``n`` ints (symmetric per dimension) or ``2n`` ints (all
    befores then all afters, so for 2-D (top, left, bottom, right) as in TVM).
    """
    if _is_int(padding):
        p = int_tuple(padding, n, "padding", op, minimum=0)
        return p, p
    try:
        vals = tuple(padding)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{op}: padding must be an int or a sequence of ints, got {padding!r}") from None
    if len(vals) == n:
        p = int_tuple(vals, n, "padding", op, minimum=0)
        return p, p
    if len(vals) == 2 * n:
        p = int_tuple(vals, 2 * n, "padding", op, minimum=0)
        return p[:n], p[n:]
    raise ValueError(f"{op}: padding must be an int, {n} ints or {2 * n} ints, got {padding!r}")


def with_axis_names(fn: Callable[..., Any], names: Sequence[str]) -> Callable[..., Any]:
    """Give a ``*args`` function a signature, so te.compute names its axes ``names``.

    Ops of variable rank build their body from a ``*idx`` function; without this the axes would be
    printed as i0, i1, ... instead of n, h, w, c.
    """
    fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    return fn


def accumulate_as(value: Expr, out_dtype: str) -> Expr:
    """A loaded value widened to the accumulation dtype (e.g. int8 products summed in int32)."""
    return value if value.dtype == out_dtype else cast(value, out_dtype)


def out_dtype_of(out_dtype: str | None, in_dtype: str) -> str:
    return in_dtype if out_dtype is None else dt.canonical(out_dtype)
