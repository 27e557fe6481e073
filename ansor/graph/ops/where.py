"""Where, ``cond ? x : y`` elementwise with numpy broadcasting of all three (ONNX ``Where``; an
all-constant one is folded at import). The use case is a mask computed at run time, such as
``Where(Greater(x, 0), x, -1e9)`` before a softmax."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compute import te

from ..ir_types import GraphError, TensorType
from ..op_kit_broadcast import broadcast_export, broadcast_import, broadcast_infer, broadcast_lower, broadcast_torch
from ..op_rules import OpDef, register_op, same_dtype


def _dtype(ts: Sequence[TensorType]) -> str:
    cond, x, y = ts
    if cond.dtype != "bool":
        raise GraphError(f"where: the condition must be bool, got {cond}")
    return same_dtype([x, y])


WHERE = register_op(OpDef(
    "where", (3, 3), "broadcast", broadcast_infer("where", _dtype), "cond ? x : y (broadcast)",
    reference=np.where, lower=broadcast_lower(lambda node, c, x, y: te.if_then_else(c, x, y)),
    export=broadcast_export(lambda e, n, xs: e.node("Where", xs)),
    torch=broadcast_torch(lambda r, n, c, x, y: r.torch.where(c, x, y)),
    onnx={"Where": broadcast_import("where")}))
