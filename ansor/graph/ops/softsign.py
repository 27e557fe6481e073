"""Softsign, ``x / (1 + |x|)``: ONNX ``Softsign``, ``torch.nn.functional.softsign``."""
from __future__ import annotations

import numpy as np

from compute import te
from compute.expr import const

from ..op_kit import elementwise_unary

SOFTSIGN = elementwise_unary(
    "softsign",
    reference=lambda x: x / (1.0 + np.abs(x)),
    expr=lambda v, node: v / (const(1.0, v.dtype) + te.abs(v)),
    onnx_type="Softsign",
    torch=lambda r, node, t: r.F.softsign(t),
    doc="x / (1 + |x|)")
