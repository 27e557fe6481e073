"""The values the emitter passes around: an SSA reference with its LLVM type, the vector
context of a vectorised loop body, and the mapping of DSL dtypes to LLVM scalar types."""
from __future__ import annotations

from dataclasses import dataclass

from compute import expr as E

from .. import intrinsics as I

_SCALAR_TY = {"float32": "float", "float64": "double", "int8": "i8", "uint8": "i8", "int32": "i32",
              "int64": "i64", "bool": "i1"}
_INDEX_DTYPES = ("int32", "int64")


def _mem_ty(dtype: str) -> str:
    return "i8" if dtype == "bool" else _SCALAR_TY[dtype]


@dataclass
class _Val:
    """An SSA value or constant literal: ``ref`` of scalar type ``st``, ``lanes`` None = scalar."""

    ref: str
    st: str
    lanes: int | None = None

    @property
    def ty(self) -> str:
        return I.vec_type(self.st, self.lanes)


@dataclass
class _VecCtx:
    var: E.Var  # the lane variable
    lanes: int
    base_var: E.Var  # stands for the first lane's value in uniform (scalar) expressions
    whole: bool  # the lanes are the whole loop (the first lane is 0), not one chunk of it
    mask: str | None = None  # <lanes x i1> of active lanes inside a masked select branch
