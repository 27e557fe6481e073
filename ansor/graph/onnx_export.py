"""A network graph as an ONNX model: to run a zoo network (or any graph) in onnxruntime and elsewhere.

``export_onnx(graph, path)`` writes an ONNX model (opset ``OPSET``) computing what the graph does, with
the graph's inputs and outputs in the IR's own layout (NHWC images), so the same arrays feed both.
Inside, images are NCHW, ONNX's layout for Conv and the pools: an NHWC image crosses to NCHW once
(a Transpose) where it first meets an image op, and stays NCHW through the elementwise ops,
batch norms and concats that follow (a per-channel constant is rewritten to [1, C, 1, 1] rather
than transposing the image); it goes back to NHWC only where a layout-blind op (reshape, dense,
softmax, ...) or a graph output reads it. Weights are converted once (conv HWIO -> OIHW).

Names: ONNX value names are generated (``v0``, ``w3``), never taken from the graph (whose names
may come from an untrusted model); graph inputs/outputs are ``input_0``... / ``output_0``...
in ``graph.inputs`` / ``graph.outputs`` order. A half-precision boundary (``Graph.io_dtypes``)
is declared as such, with a Cast to float32 after the input and to the half type before the output.

Each node is written by the ``export`` of its op's ``OpDef`` (declared with the operator in
``ansor/graph/ops/``); here is the ``Exporter`` those call (names, initializers, the crossing of
layouts) and the helpers ``elementwise_export`` and ``plain_export``.

``onnx`` is an optional dependency (the ``onnx`` extra), imported when a model is written.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .ir import OPS, Graph, GraphError, Node, display_name

OPSET = 20  # Gelu is opset 20; reductions take their axes as an input from 18
_TO_NCHW = (0, 3, 1, 2)
_TO_NHWC = (0, 2, 3, 1)


class Exporter:
    def __init__(self, graph: Graph):
        import onnx  # noqa: PLC0415 - optional dependency, only when exporting
        from onnx import helper, numpy_helper  # noqa: PLC0415

        self.onnx, self.helper, self.numpy_helper = onnx, helper, numpy_helper
        self.graph = graph
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.count = 0
        # IR value -> ONNX names: its plain (IR layout) form and, for 4-D images, its NCHW form
        self.plain: dict[str, str] = {}
        self.nchw: dict[str, str] = {}
        self.const_names: dict[str, str] = {}

    # ---- names, constants, nodes --------------------------------------------------------------
    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def init(self, arr: np.ndarray, prefix: str = "w") -> str:
        name = self.fresh(prefix)
        # np.require, not np.ascontiguousarray: the latter makes a 0-d array 1-d (a scalar
        # Gather index would then add an axis)
        self.inits.append(self.numpy_helper.from_array(np.require(arr, requirements="C"), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = self.fresh()
        self.nodes.append(self.helper.make_node(op, inputs, [out], **attrs))
        return out

    def ints(self, values: Any) -> str:
        """An int64 vector initializer (shapes, axes, pads)."""
        return self.init(np.array(list(values), np.int64), "s")

    def const(self, value: str) -> np.ndarray | None:
        return self.graph.constants.get(value)

    def get_plain(self, value: str) -> str:
        if value not in self.plain:
            if value in self.graph.constants:
                self.plain[value] = self.init(self.graph.constants[value])
            else:
                self.plain[value] = self.node("Transpose", [self.nchw[value]], perm=list(_TO_NHWC))
        return self.plain[value]

    def get_nchw(self, value: str) -> str:
        if value not in self.nchw:
            c = self.const(value)
            self.nchw[value] = (self.init(c.transpose(_TO_NCHW)) if c is not None
                                else self.node("Transpose", [self.get_plain(value)], perm=list(_TO_NCHW)))
        return self.nchw[value]

    def is_image(self, value: str) -> bool:
        return value in self.nchw

    def image_operand(self, value: str) -> str:
        """An elementwise operand next to an NCHW image (see the module docstring)."""
        if value in self.nchw:
            return self.nchw[value]
        t = self.graph.type_of(value)
        c = self.const(value)
        if len(t.shape) < 4:
            shape4 = (1,) * (4 - len(t.shape)) + tuple(t.shape)
            if c is not None:
                return self.init(c.reshape(shape4).transpose(_TO_NCHW))
            r = self.node("Reshape", [self.get_plain(value), self.init(np.array(shape4, np.int64), "s")])
            return self.node("Transpose", [r], perm=list(_TO_NCHW))
        return self.get_nchw(value)

    # ---- the model ------------------------------------------------------------------------------
    def run(self) -> Any:
        h, onnx = self.helper, self.onnx
        inputs = []
        half = {"float16": onnx.TensorProto.FLOAT16, "bfloat16": onnx.TensorProto.BFLOAT16}
        io_dtypes = self.graph.io_dtypes  # a half-precision boundary: declared, cast inside
        for i, (name, t) in enumerate(self.graph.inputs.items()):
            self.plain[name] = f"input_{i}"
            if name in io_dtypes:
                self.plain[name] = self.node("Cast", [f"input_{i}"], to=onnx.TensorProto.FLOAT)
            inputs.append(h.make_tensor_value_info(
                f"input_{i}", half[io_dtypes[name]] if name in io_dtypes else _elem_type(onnx, t.dtype), list(t.shape)))
        for node in self.graph.nodes:
            fn = OPS[node.op].export
            if fn is None:
                raise GraphError(f"node {display_name(node.name)}: op {node.op!r} has no ONNX export")
            fn(self, node)
        outputs = []
        for i, name in enumerate(self.graph.outputs):
            src = self.get_plain(name)
            t = self.graph.type_of(name)
            if name in io_dtypes:
                self.nodes.append(h.make_node("Cast", [src], [f"output_{i}"], to=half[io_dtypes[name]]))
            else:
                self.nodes.append(h.make_node("Identity", [src], [f"output_{i}"]))
            outputs.append(h.make_tensor_value_info(
                f"output_{i}", half[io_dtypes[name]] if name in io_dtypes else _elem_type(onnx, t.dtype), list(t.shape)))
        g = h.make_graph(self.nodes, "ansor_graph", inputs, outputs, self.inits)
        model = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], producer_name="ansor-py")
        model.ir_version = min(model.ir_version, 8)  # readable by onnxruntime releases of 2022 on
        onnx.checker.check_model(model)
        return model


def _elem_type(onnx: Any, dtype: str) -> int:
    return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


# ---- helpers of the operators' exports ------------------------------------------------------------

def elementwise_export(build: Callable[[Exporter, Node, str], str]) -> Callable[[Exporter, Node], None]:
    """The export of a one-input elementwise op: ``build(e, node, x)`` makes its ONNX node(s) on
    ONNX value ``x`` and returns the result's name; an image stays in the layout it is in."""
    def fn(e: Exporter, n: Node) -> None:
        x = n.inputs[0]
        if e.is_image(x):
            e.nchw[n.name] = build(e, n, e.nchw[x])
        else:
            e.plain[n.name] = build(e, n, e.get_plain(x))
    return fn


def plain_export(build: Callable[[Exporter, Node, list[str]], str]) -> Callable[[Exporter, Node], None]:
    """The export of an op on its inputs in the IR's own layout: ``build(e, node, xs)`` makes the
    ONNX node(s) and returns the result's name."""
    def fn(e: Exporter, n: Node) -> None:
        e.plain[n.name] = build(e, n, [e.get_plain(v) for v in n.inputs])
    return fn


def to_onnx(graph: Graph) -> Any:
    """``graph`` as an ``onnx.ModelProto`` (see the module docstring); checked by onnx's checker."""
    if not isinstance(graph, Graph):
        raise TypeError(f"to_onnx takes an ansor.graph.Graph, got {type(graph).__name__}")
    return Exporter(graph).run()


def export_onnx(graph: Graph, path: str | os.PathLike) -> None:
    """Write ``to_onnx(graph)`` to ``path``."""
    import onnx  # noqa: PLC0415 - optional dependency

    onnx.save(to_onnx(graph), os.fspath(path))
