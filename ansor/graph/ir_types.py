"""The graph IR's basic records: the supported dtypes, ``GraphError``, a value's static
``TensorType`` and the ``Node`` (one operator application).

Kept apart from the op rules (``op_rules.py``) and the ``Graph`` (``ir.py``), which both build on
these, so that neither has to import the other's module.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from compute.errors import InputError

DTYPES = ("float32", "float64", "int32", "int64", "bool")
# Half-precision dtypes a graph exchanges at its boundary (``Graph.io_dtypes``): computed as
# float32 inside, converted on the way in and out.
BOUNDARY_DTYPES = ("float16", "bfloat16")


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a value or boundary dtype name. ``bfloat16`` is numpy's through the
    ``ml_dtypes`` package (a dependency of onnx, not of this package): imported only when a
    bfloat16 boundary is used, and a clear error when it is not installed."""
    if name == "bfloat16":
        try:
            import ml_dtypes  # noqa: PLC0415 - optional, see above
        except ImportError:
            raise GraphError("bfloat16 arrays need the ml_dtypes package (pip install ml_dtypes)") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)

# No tensor a machine can hold has more elements (2**48 float32 is 1 PiB): a larger shape comes
# from hostile input (a model's dims, pads, an image size), and its products (sizes, FLOPs,
# offsets) would overflow int64 downstream. Memory itself is checked before allocating
# (``graph.memory_plan``).
MAX_ELEMENTS = 1 << 48


class GraphError(InputError):
    """A malformed graph or node: wrong shapes, attributes, names or order."""


@dataclass(frozen=True)
class TensorType:
    """The static type of a value: a concrete shape (non-negative ints) and a dtype name."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        try:  # operator.index: 1.5 is refused, not truncated to 1
            shape = tuple(operator.index(d) for d in self.shape)
        except TypeError:
            raise GraphError(f"shape must be a sequence of integers, got {self.shape!r}") from None
        if any(d < 0 for d in shape) or any(isinstance(d, bool) for d in self.shape):
            raise GraphError(f"shape must hold non-negative integers, got {self.shape!r}")
        if math.prod(shape) > MAX_ELEMENTS:
            raise GraphError(f"shape {list(shape)} has {math.prod(shape)} elements, more than the "
                             f"{MAX_ELEMENTS} any tensor may have")
        if self.dtype not in DTYPES:
            raise GraphError(f"unsupported dtype {self.dtype!r}; supported: {', '.join(DTYPES)}")
        object.__setattr__(self, "shape", shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        short = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool"}
        return f"{short[self.dtype]}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True, eq=False)
class Node:
    """``name = op(*inputs, **attrs)``: one operator application producing the value ``name``
    of type ``type``. ``inputs`` are value names; ``attrs`` are plain Python values (ints,
    floats, strings, tuples)."""

    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: Mapping[str, Any]
    type: TensorType

    @property
    def outputs(self) -> tuple[str, ...]:
        """The value names this node defines (always exactly one: its own name)."""
        return (self.name,)
