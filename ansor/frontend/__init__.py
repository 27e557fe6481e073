"""Model importers. ``from_onnx`` reads an ONNX model into a ``Graph``.

The ``onnx`` package is an optional dependency (``pip install 'ansor-py[onnx]'``): this module
imports it only when ``from_onnx`` is called, so ``import ansor`` works without it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..graph.ir import Graph


def from_onnx(model_or_path: Any, shape: Mapping[str, Sequence[int]] | Sequence[int] | None = None, *,
              batch: int | None = None, fold_limit: int | None = None) -> Graph:
    """Import an ONNX model (a path, bytes, or an ``onnx.ModelProto``) as a ``Graph``.

    ``shape={input name: dims}`` (or one shape for a one-input model) and ``batch=N`` (the first
    dimension of every input whose first dimension is dynamic) give the dimensions the model
    leaves dynamic, e.g. ``from_onnx("bert.onnx", shape={"input_ids": (1, 128)})`` or
    ``from_onnx("resnet.onnx", batch=8)``. float16/bfloat16 models compute in float32 and
    exchange half arrays at the boundary. See ``ansor.frontend.onnx.from_onnx`` for the details,
    the layout, the supported operators and ``fold_limit``."""
    from .onnx import from_onnx as _impl  # deferred: needs the optional onnx package
    return _impl(model_or_path, shape, batch=batch, fold_limit=fold_limit)


def supported_operators() -> dict[str, str]:
    """ONNX op type -> ``"graph"`` or ``"constant"`` (evaluated at import) for every op type
    ``from_onnx`` imports, sorted; see ``ansor.frontend.onnx.supported_operators``."""
    from .onnx import supported_operators as _impl  # deferred: needs the optional onnx package
    return _impl()


__all__ = ["from_onnx", "supported_operators"]
