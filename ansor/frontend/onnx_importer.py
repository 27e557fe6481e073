"""The ONNX importer's core: loading a model, the values it tracks and the node dispatch.

``_Importer`` walks the graph in order, folds all-constant nodes (``onnx_fold.py``) and hands
every other node to the import rule registered for its op type in ``_HANDLERS``. The rules are
declared with the graph operators they make (``OpDef.onnx``, in ``ansor/graph/ops/``);
``onnx.py`` fills ``_HANDLERS`` from the registry and is the entry point. Each ONNX value is kept
as a constant or as graph vars in the model's own layout and/or NHWC (``_Val``), so that layout
conversions are added only where a value crosses layouts; the rules reach it through the
methods below (``plain``, ``nhwc``, ``set_plain``, ``set_nhwc``, ``alias``, ...).
"""
from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from compute.memory import available_bytes

from ..graph.builder import GraphBuilder, Var
from ..graph.ir import DTYPES, Graph, GraphError, display_name
from ..graph.ir_types import BOUNDARY_DTYPES
from ..graph.onnx_import_kit import TO_NCHW as _TO_NCHW
from ..graph.onnx_import_kit import TO_NHWC as _TO_NHWC
from .onnx_fold import FOLD as _FOLD
from .onnx_fold import NP_DTYPES as _NP_DTYPES
from .onnx_fold import OnnxImportError, fold_limit
from .onnx_fold import tensor_array as _tensor
from .onnx_half import HALF_NUMPY, HALF_TYPES, cast_to_half
from .onnx_inputs import InputShapes
from .onnx_validate import node_label, validate_model

# A graph error names the graph node ("node y:nhwc (prelu): "); an import error names the ONNX one.
_GRAPH_NODE_PREFIX = re.compile(r"^node .*? \([a-z0-9_]+\): ")


@dataclass
class _Val:
    """An ONNX value during import: a constant array, or graph vars in plain (the model's own
    layout) and/or NHWC form (4-D values only), with its logical (ONNX) shape."""

    shape: tuple[int, ...]
    dtype: str
    const: np.ndarray | None = None
    plain: Var | None = None
    nhwc: Var | None = None
    # A [N, C*H*W] flatten of an NHWC map, kept in NHWC element order: (var [N, H*W*C], source
    # ONNX name, C). A Gemm on it permutes its weight instead; any other reader materialises it.
    flat_nhwc: tuple[Var, str, int] | None = None
    # A 5-D value split from an NHWC map's channels ([N, A, B, H, W], ShuffleNet's channel
    # shuffle), stored as ``var = value.transpose(perm)`` with the spatial axes kept inner-most
    # but one: Transposes of it only change ``perm`` (ansor/graph/ops/reshape.py, transpose.py).
    permuted: tuple[Var, tuple[int, ...]] | None = None


# ---- loading --------------------------------------------------------------------------------------

def _load(model_or_path: Any) -> tuple[onnx.ModelProto, str]:
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path, "<ModelProto>"
    if isinstance(model_or_path, (bytes, bytearray)):
        data, where = bytes(model_or_path), "<bytes>"
    elif isinstance(model_or_path, (str, os.PathLike)):
        where = os.fspath(model_or_path)
        try:
            with open(where, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OnnxImportError(f"{where}: cannot read the model file ({e.strerror or e})") from None
    else:
        raise TypeError(f"from_onnx: expected a path, bytes or onnx.ModelProto, got {type(model_or_path).__name__}")
    try:
        model = onnx.ModelProto()
        model.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError and friends
        raise OnnxImportError(f"{where}: not a valid ONNX model (protobuf parse failed: {e}); "
                              f"is the file truncated or not an .onnx file?") from None
    # protobuf accepts many byte strings as a (mostly empty) message: check it looks like a model.
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.node or not model.graph.output:
        raise OnnxImportError(f"{where}: not a valid ONNX model (no ir_version, graph, nodes or outputs); "
                              f"is the file truncated or not an .onnx file?")
    return model, where


def _opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


# ---- the importer -----------------------------------------------------------------------------------

class _Importer:
    def __init__(self, model: onnx.ModelProto, where: str, shape: Any, fold_elems: int | None = None,
                 batch: int | None = None) -> None:
        self.model, self.where, self.g = model, where, model.graph
        self.opset = _opset(model)
        self.b = GraphBuilder(model.graph.name or "onnx")
        self.env: dict[str, _Val] = {}
        self.out_names = [o.name for o in self.g.output]
        self.uses: Counter[str] = Counter(i for n in self.g.node for i in n.input if i)
        self.uses.update(self.out_names)
        self.conv_of: dict[str, tuple[Var, Var, Var | None]] = {}  # conv output -> (conv, weight, bias)
        self.shape_arg, self.batch_arg = shape, batch
        # Graph inputs/outputs declared float16/bfloat16 (computed as float32): Graph.io_dtypes.
        self.io_dtypes: dict[str, str] = {}
        # The budget of constant folding (onnx_fold.check_fold): elements per folded constant,
        # bytes in total (a quarter of the memory available now).
        self.fold_elems = fold_limit(fold_elems)
        self.fold_budget = available_bytes() // 4
        self.folded_bytes = 0

    def err(self, node: onnx.NodeProto, msg: str) -> OnnxImportError:
        index = next((i for i, n in enumerate(self.g.node) if n is node), -1)
        return OnnxImportError(f"{self.where}: node {display_name(node_label(node, index))} "
                               f"({node.op_type}): {msg}")

    # -- values --
    def val(self, name: str) -> _Val:
        return self.env[name]

    def plain(self, name: str) -> Var:
        v = self.env[name]
        if v.plain is None:
            if v.const is not None:
                # A constant graph output gets another name: an identity node computes the
                # output (the compiled module fills outputs by kernels, not from constants).
                v.plain = self.b.constant(self._const_dtype(v.const, name), copy=False,
                                          name=f"{name}:const" if name in self.out_names else name)
            elif v.flat_nhwc is not None:
                v.plain = self.b.reshape(self.plain(v.flat_nhwc[1]), v.shape, name=name)
            elif v.permuted is not None:
                var, perm = v.permuted
                v.plain = self.b.transpose(var, tuple(int(i) for i in np.argsort(perm)), name=name)
            else:
                # A graph output's NCHW twin takes the output's own name.
                v.plain = self.b.transpose(v.nhwc, _TO_NCHW, name=name if name in self.out_names else f"{name}:nchw")
        return v.plain

    def nhwc(self, name: str) -> Var:
        v = self.env[name]
        if v.nhwc is None:
            if v.const is not None:
                arr = v.const.reshape((1,) * (4 - v.const.ndim) + v.const.shape)
                v.nhwc = self.b.constant(self._const_dtype(np.ascontiguousarray(arr.transpose(_TO_NHWC)), name),
                                         name=f"{name}:nhwc", copy=False)
            else:
                v.nhwc = self.b.transpose(v.plain, _TO_NHWC, name=f"{name}:nhwc")
        return v.nhwc

    def is_nhwc(self, name: str) -> bool:
        v = self.env[name]
        return v.const is None and v.nhwc is not None and v.plain is None

    def _const_dtype(self, arr: np.ndarray, name: str) -> np.ndarray:
        if str(arr.dtype) not in DTYPES:
            raise OnnxImportError(f"{self.where}: constant {display_name(name)} has dtype {arr.dtype}, "
                                  f"supported: {', '.join(DTYPES)}")
        return arr

    def set_plain(self, name: str, var: Var) -> None:
        self.env[name] = _Val(var.shape, var.dtype, plain=var)

    def set_nhwc(self, name: str, var: Var) -> None:
        n, h, w, c = var.shape
        self.env[name] = _Val((n, c, h, w), var.dtype, nhwc=var)

    def alias(self, name: str, src: str) -> None:
        """ONNX value ``name`` is the same value as ``src``, in every layout it is held in."""
        self.env[name] = self.env[src]

    def set_flat_nhwc(self, name: str, shape: tuple[int, ...], dtype: str, var: Var, src: str,
                      channels: int) -> None:
        """``name`` is ``src`` (an NHWC map of ``channels``) flattened to ``shape`` [N, C*H*W]
        but held as ``var`` in NHWC element order (see ``_Val.flat_nhwc``)."""
        self.env[name] = _Val(shape, dtype, flat_nhwc=(var, src, channels))

    def set_permuted(self, name: str, shape: tuple[int, ...], dtype: str, var: Var,
                     perm: tuple[int, ...]) -> None:
        """``name`` (of logical ``shape``) is held as ``var = value.transpose(perm)``."""
        self.env[name] = _Val(shape, dtype, permuted=(var, perm))

    def set_const(self, name: str, arr: np.ndarray) -> None:
        arr = np.asarray(arr)
        if arr.dtype in HALF_NUMPY:  # float16/bfloat16 data is float32 inside (exactly)
            arr = arr.astype(np.float32)
        self.env[name] = _Val(arr.shape, str(arr.dtype), const=arr)

    def const_of(self, node: onnx.NodeProto, idx: int, what: str) -> np.ndarray | None:
        if idx >= len(node.input) or not node.input[idx]:
            return None
        v = self.env[node.input[idx]]
        if v.const is None:
            raise self.err(node, f"{what} (input {idx}) must be a constant")
        return v.const

    # -- driver --
    def inputs(self) -> None:
        inits = {t.name for t in self.g.initializer}
        for t in self.g.initializer:
            self.set_const(t.name, _tensor(t, self.where))
        real = [i for i in self.g.input if i.name not in inits]
        shapes = InputShapes(self.where, real, self.shape_arg, self.batch_arg)
        for i in real:  # element types first: a bad one is named before any shape
            self._input_dtype(i)
        resolved = shapes.resolve()
        for i in real:
            try:
                self.set_plain(i.name, self.b.input(i.name, resolved[i.name], self._input_dtype(i)))
            except GraphError as e:
                raise OnnxImportError(f"{self.where}: {e}") from None  # the builder names the input

    def _input_dtype(self, i: onnx.ValueInfoProto) -> str:
        """A graph input's dtype inside: its own, or float32 for a float16/bfloat16 input (whose
        boundary dtype is remembered)."""
        elem = i.type.tensor_type.elem_type
        if elem in HALF_TYPES:
            self.io_dtypes[i.name] = HALF_TYPES[elem]
            return "float32"
        dtype = _NP_DTYPES.get(elem)
        if dtype is None:
            raise OnnxImportError(f"{self.where}: input {display_name(i.name)} has element type "
                                  f"{onnx.TensorProto.DataType.Name(elem)}; supported: "
                                  f"{', '.join(DTYPES + BOUNDARY_DTYPES)}")
        return dtype

    def check_supported(self) -> None:
        bad: dict[str, list] = {}
        for n in self.g.node:
            key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
            if key not in _HANDLERS:
                entry = bad.setdefault(key, [0, n.name or (n.output[0] if n.output else "?")])
                entry[0] += 1
        if bad:
            lines = "; ".join(f"{op} x{cnt} (first: {display_name(first)})" for op, (cnt, first) in sorted(bad.items()))
            raise OnnxImportError(f"{self.where}: unsupported ONNX operator(s): {lines}")

    def run(self) -> Graph:
        self.check_supported()
        validate_model(self.model, self.where)
        self.inputs()
        for node in self.g.node:
            for i in node.input:
                if i and i not in self.env:
                    raise self.err(node, f"input {display_name(i)} is not defined before it (graph not "
                                         f"topologically sorted?)")
            for o in node.output:
                if o and o in self.env:
                    raise self.err(node, f"output {display_name(o)} is already defined (the graph is not SSA)")
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            try:
                if node.op_type == "Cast" and int(attrs.get("to", 0)) in HALF_TYPES:
                    cast_to_half(self, node, HALF_TYPES[int(attrs["to"])])
                    continue
                if all(self.env[i].const is not None for i in node.input if i) and node.op_type in _FOLD:
                    outs = _FOLD[node.op_type](self, node, attrs, [self.env[i].const if i else None
                                                                   for i in node.input])
                    for name, arr in zip(node.output, outs):
                        self.set_const(name, arr)
                        self.folded_bytes += arr.nbytes if arr.base is None else 0  # views are free
                    continue
                _HANDLERS[node.op_type](self, node, attrs)
            except OnnxImportError:
                raise
            except (GraphError, ValueError) as e:
                # The graph op's own "node NAME (op): " goes: the ONNX node is named once, below.
                raise self.err(node, _GRAPH_NODE_PREFIX.sub("", str(e), count=1)) from None
            except KeyError as e:  # a rule reading an attribute the model left out
                raise self.err(node, f"missing attribute or input {e}") from None
            except (IndexError, TypeError, ZeroDivisionError, OverflowError, AttributeError) as e:
                # The net under the explicit checks: a malformed node must not crash a rule.
                raise self.err(node, f"malformed node ({type(e).__name__}: {e})") from None
        outs = []
        declared = {o.name: o.type.tensor_type.elem_type for o in self.g.output}
        for name in self.out_names:
            if name not in self.env:
                raise OnnxImportError(f"{self.where}: graph output {display_name(name)} is never computed")
            decl = declared.get(name, 0)
            # A float16/bfloat16 output is float32 inside, rounded on the way out.
            want = "float32" if decl in HALF_TYPES else _NP_DTYPES.get(decl)
            if decl in HALF_TYPES and self.env[name].dtype == "float32":
                self.io_dtypes[name] = HALF_TYPES[decl]
            if decl and want != self.env[name].dtype:  # onnxruntime refuses these too
                raise OnnxImportError(
                    f"{self.where}: graph output {display_name(name)} is declared "
                    f"{onnx.TensorProto.DataType.Name(declared[name])} but computes {self.env[name].dtype}")
            var = self.plain(name)
            if var.name != name:
                var = self.b.add_node("identity", [var], {}, name)
            outs.append(var)
        return self.b.build(outs, self.io_dtypes)

    # -- shared node helpers (the import rules of ansor/graph/ops/ call these) --
    def layout_preserving(self, node: onnx.NodeProto, op: str, attrs: dict[str, Any]) -> None:
        """Import a one-input elementwise node as graph op ``op``, keeping its input's layout
        (an NHWC image stays NHWC, so activations between convolutions need no transposes)."""
        src, out = node.input[0], node.output[0]
        if self.is_nhwc(src):
            self.set_nhwc(out, self.b.add_node(op, [self.nhwc(src)], attrs, self.name_for(out, True)))
        else:
            self.set_plain(out, self.b.add_node(op, [self.plain(src)], attrs, out))

    def name_for(self, onnx_name: str, nhwc: bool = False) -> str:
        # An NHWC value that is a graph output gets a suffix: its plain (NCHW) twin takes the name.
        return f"{onnx_name}:nhwc" if nhwc and onnx_name in self.out_names else onnx_name

    def single_output(self, node: onnx.NodeProto) -> None:
        for extra in node.output[1:]:
            if extra and self.uses[extra]:
                raise self.err(node, f"only the first output is supported, but output "
                                     f"{display_name(extra)} is used")


# ---- node handlers ---------------------------------------------------------------------------------

Handler = Callable[[_Importer, onnx.NodeProto, dict[str, Any]], None]
# ONNX op type -> import rule (filled by onnx.py from the operators' OpDef.onnx)
_HANDLERS: dict[str, Handler] = {}


def _const_only(imp: _Importer, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    raise imp.err(node, "supported only on constant inputs (it is evaluated at import)")
