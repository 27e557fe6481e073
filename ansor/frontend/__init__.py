"""Model importers. ``from_onnx`` reads an ONNX model into a ``Graph``.

The ``onnx`` package is an optional dependency (``pip install 'ansor-py[onnx]'``): this module
imports it only when ``from_onnx`` is called, so ``import ansor`` works without it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..graph.ir import Graph


def from_onnx(model_or_path: Any, shape: Mapping[str, Sequence[int]] | Sequence[int] | None = None, *,
              fold_limit: int | None = None) -> Graph:
    """Import an ONNX model (a path, bytes, or an ``onnx.ModelProto``) as a ``Graph``; see
    ``ansor.frontend.onnx`` for the layout, the supported operators and ``fold_limit``."""
    from .onnx import from_onnx as _impl  # deferred: needs the optional onnx package
    return _impl(model_or_path, shape, fold_limit=fold_limit)


def supported_operators() -> dict[str, str]:
    """ONNX op type -> ``"graph"`` or ``"constant"`` (evaluated at import) for every op type
    ``from_onnx`` imports, sorted; see ``ansor.frontend.onnx.supported_operators``."""
    from .onnx import supported_operators as _impl  # deferred: needs the optional onnx package
    return _impl()


__all__ = ["from_onnx", "supported_operators"]
