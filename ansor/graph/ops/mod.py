"""Mod, ONNX ``Mod``: the remainder of a broadcast division. ``fmod=0`` (integers only, as the
spec requires) has the divisor's sign, as Python's ``%`` (floor modulo); ``fmod=1`` is C's fmod
(the dividend's sign), on floats or integers.

fmod is computed as ``sign(a) * (|a| mod |b|)``: on non-negative operands floor and truncated
remainders agree, and the float floor modulo of the expression language is then exactly LLVM's
``frem``, so no rounding is added (``a - trunc(a / b) * b`` would round). Integer division by
zero gives 0 (the language's rule; onnxruntime's result is undefined there) and float fmod by
zero NaN (as C).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from compute import te
from compute.expr import Expr, const

from ..ir_types import GraphError, TensorType
from ..op_kit_broadcast import broadcast_export, broadcast_import, broadcast_infer, broadcast_lower, broadcast_torch
from ..op_rules import OpDef, register_op, same_dtype


def _dtype(ts: Sequence[TensorType]) -> str:
    dtype = same_dtype(ts)
    if dtype == "bool":
        raise GraphError(f"mod: inputs must be numbers, got {ts[0]} and {ts[1]}")
    return dtype


def _attrs(t: TensorType, given: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - {"fmod"})
    if unknown:
        raise GraphError(f"mod: unknown attribute(s) {', '.join(unknown)}")
    fmod = given.get("fmod", 0)
    if isinstance(fmod, bool) or fmod not in (0, 1):
        raise GraphError(f"mod: fmod must be 0 or 1, got {fmod!r}")
    if fmod == 0 and t.dtype.startswith("float"):
        raise GraphError(f"mod: fmod=0 (floor modulo) is for integers; a float input {t} needs fmod=1")
    return {"fmod": int(fmod)}


def _body(node: Any, a: Expr, b: Expr) -> Expr:
    if node.attrs["fmod"] == 0:
        return a % b
    m = te.abs(a) % te.abs(b)
    return te.if_then_else(a < const(0, a.dtype), -m, m)


def _reference(a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    return np.fmod(a, b) if fmod else np.mod(a, b)


def _torch(r: Any, node: Any, a: Any, b: Any) -> Any:
    return r.torch.fmod(a, b) if node.attrs["fmod"] else r.torch.remainder(a, b)


def _onnx_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {"fmod": int(attrs.get("fmod", 0))}


MOD = register_op(OpDef(
    "mod", (2, 2), "broadcast", broadcast_infer("mod", _dtype, _attrs),
    "remainder: fmod=0 floor modulo (sign of the divisor), fmod=1 C fmod (sign of the dividend)",
    reference=_reference, lower=broadcast_lower(_body),
    export=broadcast_export(lambda e, n, xs: e.node("Mod", xs, fmod=n.attrs["fmod"])),
    torch=broadcast_torch(_torch), onnx={"Mod": broadcast_import("mod", _onnx_attrs)}))
