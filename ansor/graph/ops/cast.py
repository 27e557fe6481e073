"""``cast``: convert to another dtype (ONNX ``Cast`` to one of the dtypes we import).

Elementwise: an NHWC image stays NHWC through it. A Cast of a constant is folded at import
(``ansor/frontend/onnx_fold.py``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compute.expr import cast

from ..ir_types import TensorType
from ..onnx_export import elementwise_export
from ..onnx_import_kit import ONNX_DTYPES
from ..op_rules import OpDef, register_op
from ..te_ops import unary_lower
from ..torch_peer import elementwise_torch


def _infer(ts, attrs) -> tuple[TensorType, dict[str, Any]]:
    return TensorType(ts[0].shape, attrs.get("dtype", "float32")), {"dtype": attrs.get("dtype", "float32")}


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    dtype = ONNX_DTYPES.get(int(attrs["to"]))
    if dtype is None:
        import onnx  # noqa: PLC0415 - for the type's name; the rule runs only while importing ONNX

        raise imp.err(node, f"cast to {onnx.TensorProto.DataType.Name(int(attrs['to']))} is not supported")
    imp.layout_preserving(node, "cast", {"dtype": dtype})


CAST = register_op(OpDef(
    "cast", (1, 1), "elemwise", _infer, "convert to attrs['dtype']",
    reference=lambda x, dtype: x.astype(dtype), lower=unary_lower(lambda v, n: cast(v, n.attrs["dtype"])),
    export=elementwise_export(lambda e, n, x: e.node("Cast", [x], to=e.helper.np_dtype_to_tensor_dtype(
        np.dtype(n.attrs["dtype"])))),
    torch=elementwise_torch(lambda r, n, t: t.to(getattr(r.torch, n.attrs["dtype"]))),
    onnx={"Cast": _import}, expr=lambda v, n: cast(v, n.attrs["dtype"])))
