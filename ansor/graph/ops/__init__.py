"""One home per operator: each module here declares one graph operator (or a small family) with
everything it needs, through ``op_rules.register_op``: its type rule, numpy reference,
tensor-expression lowering, ONNX import rule(s), ONNX export and PyTorch peer.

Every module of this package is imported here (adding an operator is adding a file), and the
registry is checked at import: an operator missing a part, or an ONNX op type claimed by two
operators, fails the import of ``ansor.graph`` with a message naming it.

Every operator lives here (the driver modules ``interpreter.py``, ``te_ops.py``,
``onnx_export.py``, ``torch_peer.py`` and the ONNX importer have no per-op tables). A module
builds on the drivers' public helpers, on ``op_kit.py`` (a whole elementwise op in one call) and,
for ONNX import, on ``onnx_import_kit.py`` (axis, shape and padding rules shared by several ops);
it imports neither ``onnx`` nor ``ansor.frontend`` at module level. Families: ``binary.py`` (the
broadcasting arithmetic), ``unary.py`` (relu, sigmoid, tanh, exp, sqrt, erf, neg), ``pool.py``
(max, average and global average pools); ``reshape.py`` also imports Flatten, Squeeze and
Unsqueeze, ``dense.py`` Gemm, ``identity.py`` Dropout.
"""
from __future__ import annotations

import importlib
import pkgutil

from ..op_rules import OPS, OpDef

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")


def check_registry(ops: dict[str, OpDef] = OPS) -> None:
    """Raise ImportError naming every incomplete operator and every doubly-claimed ONNX op type."""
    problems = [f"{d.name} has no {', '.join(d.missing_parts())}"
                for d in ops.values() if d.missing_parts()]
    claimed: dict[str, str] = {}
    for d in ops.values():
        for op_type in d.onnx:
            if op_type in claimed:
                problems.append(f"ONNX {op_type} is imported by both {claimed[op_type]} and {d.name}")
            claimed[op_type] = d.name
    if problems:
        raise ImportError("graph operator registry: " + "; ".join(problems))


check_registry()
