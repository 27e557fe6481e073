"""Validation of an untrusted ONNX model before the importer walks it, as the ONNX spec and
onnxruntime would: a model they reject must not be imported silently (an out-of-range axis
wrapped, an opset nobody defines, a float64 weight on a float32 conv), and a malformed one must
give one ``OnnxImportError`` naming the node, its op and the problem rather than a ``KeyError``
deep inside an op rule.

Three passes, cheapest first: the opset and IR version against what this ``onnx`` package
knows; every initializer's dims (non-negative: ``numpy_helper`` would silently take -4 as 4)
and every default-domain node against its schema (``onnx.checker.check_node``: required
attributes, input and output counts, empty names); then ONNX's strict shape and type inference
(attribute values and axes, operand dtypes) on a light copy of the graph whose large weights are
replaced by typed graph inputs, so the check never copies the weights.
"""
from __future__ import annotations

import re

import onnx
from onnx import checker, shape_inference

from ..graph.ir import display_name
from .onnx_fold import OnnxImportError

# Initializers up to this many bytes stay constants in the copy that shape inference sees (a
# Reshape's target shape, a Pad's pads are read from them); larger ones are weights whose shape
# is all inference needs.
_KEEP_INIT_BYTES = 1 << 16
# Ops whose schema this onnx package calls deprecated but onnxruntime still runs, as models in
# the wild use them: GroupNormalization-18 (scale and bias per group; opset 21 made them per
# channel, and the importer reads either by the model's opset).
_DEPRECATED_BUT_RUN = frozenset({"GroupNormalization"})


def node_label(node: onnx.NodeProto, index: int) -> str:
    """What error messages call a node: its name, else its first output, else its position."""
    if node.name:
        return node.name
    first = next((o for o in node.output if o), "")
    return first or f"#{index}"


def validate_model(model: onnx.ModelProto, where: str) -> None:
    """Raise ``OnnxImportError`` (naming the node, its op and the problem) if ``model`` breaks the
    ONNX spec in a way the importer would otherwise accept or crash on."""
    _check_versions(model, where)
    _check_initializers(model, where)
    _check_nodes(model, where)
    _check_inference(model, where)


def _check_versions(model: onnx.ModelProto, where: str) -> None:
    newest = onnx.defs.onnx_opset_version()
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx") and not 1 <= imp.version <= newest:
            raise OnnxImportError(f"{where}: the model asks for ONNX opset {imp.version}; the opsets "
                                  f"defined (by onnx {onnx.__version__}) are 1 to {newest}")
    if model.ir_version > onnx.IR_VERSION:
        raise OnnxImportError(f"{where}: the model's IR version {model.ir_version} is newer than the "
                              f"newest this onnx package reads ({onnx.IR_VERSION})")


def _check_initializers(model: onnx.ModelProto, where: str) -> None:
    for t in model.graph.initializer:
        if any(d < 0 for d in t.dims):
            raise OnnxImportError(f"{where}: initializer {display_name(t.name)} has negative dims "
                                  f"{list(t.dims)}")


def _check_nodes(model: onnx.ModelProto, where: str) -> None:
    ctx = checker.C.CheckerContext()
    ctx.ir_version = model.ir_version
    ctx.opset_imports = {imp.domain: imp.version for imp in model.opset_import}
    scope = checker.C.LexicalScopeContext()
    defined = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
    for i, node in enumerate(model.graph.node):
        # Before shape inference, whose word for this is "expected to have type but is null".
        for name in node.input:
            if name and name not in defined:
                raise OnnxImportError(f"{where}: node {display_name(node_label(node, i))} ({node.op_type}): "
                                      f"input {display_name(name)} is not defined before it (graph not "
                                      f"topologically sorted, or the value is never produced)")
        defined.update(node.output)
        if node.domain not in ("", "ai.onnx"):
            continue  # other domains are refused (or not) by the importer's list of supported ops
        try:
            checker.check_node(node, ctx, scope)
        except Exception as e:  # noqa: BLE001 - ValidationError and the C++ layer's own errors
            if node.op_type in _DEPRECATED_BUT_RUN and "is deprecated" in str(e):
                continue
            raise OnnxImportError(f"{where}: node {display_name(node_label(node, i))} ({node.op_type}): "
                                  f"{_first_line(e)}") from None


_INFERENCE_MSG = re.compile(r"\(op_type:(?P<op>[^,)]*)(?:, node name: (?P<name>[^)]*))?\):\s*"
                            r"(?:\[\w+\]\s*)?(?P<msg>.*)")


def _check_inference(model: onnx.ModelProto, where: str) -> None:
    light = _light_copy(model)
    try:
        shape_inference.infer_shapes(light, check_type=True, strict_mode=True)
    except Exception as e:  # noqa: BLE001 - InferenceError, and whatever else the C++ layer raises
        text = str(e)
        m = _INFERENCE_MSG.search(text)
        if m is None:
            raise OnnxImportError(f"{where}: ONNX shape inference rejects the model: {_first_line(e)}") from None
        msg = m.group("msg").strip().splitlines()[0] if m.group("msg").strip() else "shape inference failed"
        name = (m.group("name") or "").strip()
        raise OnnxImportError(f"{where}: node {display_name(name or '?')} ({m.group('op')}): {msg} "
                              f"(ONNX shape inference)") from None


def _light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model for shape inference: nodes named (so its errors name them), large initializers
    as typed graph inputs (no copy of the weights), outputs untyped (a model's declared output
    types are not what we check)."""
    src = model.graph
    # IR 4 (ONNX 1.3) made initializers constants without a graph input each; onnxruntime (and
    # the importer) read older models that way too, so shape inference must as well.
    light = onnx.ModelProto(ir_version=max(model.ir_version, 4), producer_name=model.producer_name)
    light.opset_import.extend(model.opset_import)
    g = light.graph
    g.name = src.name or "onnx"
    g.input.extend(src.input)
    declared = {i.name for i in src.input}
    for t in src.initializer:
        if t.ByteSize() <= _KEEP_INIT_BYTES:
            g.initializer.append(t)
        elif t.name not in declared:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    for i, node in enumerate(src.node):
        copy = g.node.add()
        copy.CopyFrom(node)
        copy.name = node_label(node, i)
    g.output.extend(onnx.ValueInfoProto(name=o.name) for o in src.output)
    return light


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__
