"""ONNX import: ``from_onnx(model_or_path, shape=None, batch=None) -> Graph``.

Layout. ONNX vision models are NCHW; our kernels are tuned NHWC. The importer converts inside:
conv weights are transposed once at import (OIHW -> HWIO), and 4-D values flowing between
layout-aware ops (Conv, pools, BatchNormalization, LRN, elementwise ops, Concat, Softmax on the
channel axis, Flatten/Reshape of a feature map, Transpose) stay NHWC; a Gemm after a flattened
feature map (VGG, AlexNet) gets its weight rows permuted to NHWC order at import, and a channel
shuffle (Reshape -> Transpose -> Reshape, ShuffleNet) becomes one transpose of NHWC data. Other
transposes are added only where a value crosses into a layout-agnostic op (e.g. a general
Reshape of a feature map) and at the graph boundary: **the imported graph takes and returns
the model's own layout** (NCHW in, NCHW out, as onnxruntime does), with a transpose after each
4-D input and before each 4-D output.

Import also folds BatchNormalization into the preceding Conv (when the conv's output feeds
only it), evaluates every node whose inputs are all constant (Constant, ConstantOfShape, Shape,
Gather, Unsqueeze, Concat, ... chains feeding Reshape; Shape of any value is constant since
shapes are static), and is opset-aware (Softmax before/after 13, Clip, Pad, Squeeze/Unsqueeze,
ReduceMean axes as attributes or inputs).

The model is untrusted input: it is parsed from bytes (external-data references are refused,
so a model cannot make us read other files), names are kept only to label inputs, outputs and
printed nodes (``display_name`` escapes them), and nothing from the model becomes code. It is
validated as onnxruntime would before any rule runs (``onnx_validate.py``: opset, node schemas,
strict shape and type inference), every error is one ``OnnxImportError`` naming the node and its
op, and constant folding has a budget checked before allocating (``fold_limit``).

Shapes are static: dynamic input dimensions are given with ``shape=``/``batch=``
(``onnx_inputs.py``). Half precision (float16, bfloat16) is computed in float32, converted at
the graph's boundary (``onnx_half.py``).

Code: ``onnx_importer.py`` (loading, the importer and its dispatch), the import rule of each
ONNX op with the graph operator it makes (``OpDef.onnx`` in ``ansor/graph/ops/``: e.g. Conv in
``conv2d.py``, BatchNormalization and its folding in ``batch_norm.py``, the NHWC reshape tricks in
``reshape.py``), the ONNX shape and padding rules they share in ``ansor/graph/onnx_import_kit.py``,
constant folding in ``onnx_fold.py``, validation in ``onnx_validate.py``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

try:
    import onnx  # noqa: F401 - checked first, for the install hint
except ImportError as e:  # pragma: no cover - exercised by a subprocess test without onnx
    raise ImportError("ansor.frontend.onnx needs the onnx package: pip install 'ansor-py[onnx]'") from e

from ..graph.ir import OPS, Graph
from .onnx_fold import FOLD as _FOLD
from .onnx_fold import OnnxImportError
from .onnx_importer import _HANDLERS, _const_only, _Importer, _load
from .onnx_inputs import ShapeArgumentError


# The import rules of the operators declared in ansor/graph/ops/ (one home per operator); the
# fold-only fallbacks below come after them (setdefault keeps the real rules).
for _def in OPS.values():
    for _op_type, _rule in _def.onnx.items():
        if _op_type in _HANDLERS:
            raise ImportError(f"ONNX operator {_op_type} has two import rules (graph op {_def.name} and another)")
        _HANDLERS[_op_type] = _rule
# Shape is constant for any input (shapes are static): fold it even when its input is not.
_HANDLERS["Shape"] = lambda imp, node, attrs: imp.set_const(node.output[0], _FOLD["Shape"](imp, node, attrs, [])[0])
# An op that can only be folded (ConstantOfShape, Range, ...) is an error on non-constant inputs.
for _op in _FOLD:
    _HANDLERS.setdefault(_op, _const_only)

# The rules whose output is a constant computed at import (the fold-only ones, and Shape's, since
# shapes are static): a node of one of them never runs in the network.
_AT_IMPORT = (_const_only, _HANDLERS["Shape"])


def supported_operators() -> dict[str, str]:
    """Every ONNX op type ``from_onnx`` has an import rule for, sorted by name, mapped to
    ``"graph"`` (imported as graph operators, which the compiled network runs; folded at import
    too when all its inputs are constant) or ``"constant"`` (evaluated at import only: its inputs
    must be constants, except ``Shape``, whose output always is one since shapes are static).
    This is the importer's own rule table (``ansor network ops`` prints it), so it is what an
    import accepts; the ONNX validation (opset, schemas, types) still applies to each node."""
    return {op: "constant" if _HANDLERS[op] in _AT_IMPORT else "graph" for op in sorted(_HANDLERS)}


def from_onnx(model_or_path: Any, shape: Mapping[str, Sequence[int]] | Sequence[int] | None = None, *,
              batch: int | None = None, fold_limit: int | None = None) -> Graph:
    """Import an ONNX model as a ``Graph`` (see the module docstring for layout and limits).

    ``model_or_path``: a path to an ``.onnx`` file, its bytes, or an ``onnx.ModelProto``.
    ``shape``: ``{input name: shape}`` for inputs whose shape the model leaves dynamic or
    missing (or one shape for a single-input model), e.g. ``shape={"input_ids": (1, 128)}``;
    a static dimension given must equal the model's.
    ``batch``: the first dimension of every input whose first dimension is dynamic (a static
    first dimension is the model's own and is kept; ``batch=`` that contradicts a static batch of
    every input is an error). ``shape`` wins for the inputs it names. A dynamic dimension left
    without a value is an error naming the input, the dimension and the ``shape=``/``batch=`` to
    pass (``onnx_inputs.ShapeArgumentError``).
    Dtypes: float32, float64, int32, int64 and bool values as they are; float16 and bfloat16
    weights, inputs and outputs are computed in float32 (``Graph.io_dtypes`` keeps the boundary
    dtype: runs take and return half arrays; a ``Cast`` to a half type rounds; ``onnx_half.py``).
    Errors are ``OnnxImportError`` naming the file, and the node or input at fault.
    ``fold_limit``: elements a constant folded at import may have (default
    ``$ANSOR_ONNX_FOLD_LIMIT``, else 2**28; a fold may always be as large as its largest input);
    all folded constants together may take a quarter of the memory available.
    """
    model, where = _load(model_or_path)
    return _Importer(model, where, shape, fold_limit, batch).run()


__all__ = ["OnnxImportError", "ShapeArgumentError", "from_onnx"]
