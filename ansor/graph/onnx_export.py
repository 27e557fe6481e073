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

``onnx`` is an optional dependency (the ``onnx`` extra), imported when a model is written.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .ir import OPS, Graph, GraphError, Node, display_name

OPSET = 20  # Gelu is opset 20; reductions take their axes as an input from 18
_TO_NCHW = (0, 3, 1, 2)
_TO_NHWC = (0, 2, 3, 1)
_NHWC_AXIS_TO_NCHW = (0, 2, 3, 1)  # IR axis a of an image is NCHW axis _NHWC_AXIS_TO_NCHW[a]


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
            fn = _OPS.get(node.op) or OPS[node.op].export
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


# ---- ops ----------------------------------------------------------------------------------------

def _conv2d(e: Exporter, n: Node) -> None:
    a = n.attrs
    x, w = n.inputs
    c = e.const(w)
    wname = (e.init(c.transpose(3, 2, 0, 1)) if c is not None
             else e.node("Transpose", [e.get_plain(w)], perm=[3, 2, 0, 1]))
    kh, kw = e.graph.type_of(w).shape[:2]
    e.nchw[n.name] = e.node("Conv", [e.get_nchw(x), wname], kernel_shape=[kh, kw], strides=list(a["strides"]),
                            pads=list(a["padding"]), dilations=list(a["dilation"]), group=a["groups"])


def _pool(e: Exporter, n: Node) -> None:
    a = n.attrs
    common = dict(kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["padding"]),
                  ceil_mode=int(a["ceil_mode"]))
    if n.op == "max_pool2d":
        e.nchw[n.name] = e.node("MaxPool", [e.get_nchw(n.inputs[0])], **common)
    else:
        e.nchw[n.name] = e.node("AveragePool", [e.get_nchw(n.inputs[0])],
                                count_include_pad=int(a["count_include_pad"]), **common)


def _global_pool(e: Exporter, n: Node) -> None:
    e.nchw[n.name] = e.node("GlobalAveragePool", [e.get_nchw(n.inputs[0])])


def _binary(onnx_op: str):
    def fn(e: Exporter, n: Node) -> None:
        if len(n.type.shape) == 4 and any(e.is_image(v) for v in n.inputs):
            e.nchw[n.name] = e.node(onnx_op, [e.image_operand(v) for v in n.inputs])
        else:
            e.plain[n.name] = e.node(onnx_op, [e.get_plain(v) for v in n.inputs])
    return fn


def _unary_nodes(e: Exporter, n: Node, x: str) -> str:
    a = n.attrs
    if n.op == "gelu":
        half, one = e.init(np.array(0.5, np.float32), "c"), e.init(np.array(1.0, np.float32), "c")
        if a["approximate"] == "tanh":
            c3 = e.init(np.array(0.044715, np.float32), "c")
            k = e.init(np.array(math.sqrt(2.0 / math.pi), np.float32), "c")
            cube = e.node("Mul", [e.node("Mul", [x, x]), x])
            inner = e.node("Mul", [k, e.node("Add", [x, e.node("Mul", [c3, cube])])])
            t = e.node("Tanh", [inner])
        else:
            t = e.node("Erf", [e.node("Mul", [x, e.init(np.array(1 / math.sqrt(2.0), np.float32), "c")])])
        return e.node("Mul", [e.node("Mul", [half, x]), e.node("Add", [one, t])])
    if n.op == "clip":
        lo = e.init(np.array(a["min"], n.type.dtype), "c")
        hi = e.init(np.array(a["max"], n.type.dtype), "c")
        return e.node("Clip", [x, lo, hi])
    if n.op == "cast":
        return e.node("Cast", [x], to=_elem_type(e.onnx, a["dtype"]))
    return e.node(_UNARY[n.op], [x])


_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "sqrt": "Sqrt",
          "neg": "Neg", "erf": "Erf", "identity": "Identity"}


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


_unary = elementwise_export(lambda e, n, x: _unary_nodes(e, n, x))


def _batch_norm(e: Exporter, n: Node) -> None:
    x, gamma, beta, mean, var = n.inputs
    a = n.attrs
    if len(n.type.shape) == 4 and a["axis"] == 3:
        e.nchw[n.name] = e.node("BatchNormalization", [e.get_nchw(x)] + [e.get_plain(v) for v in (gamma, beta, mean, var)],
                                epsilon=a["eps"])
        return
    # another axis: x * scale + shift with the channel vectors shaped to broadcast
    shape = [-1 if i == a["axis"] else 1 for i in range(len(n.type.shape))]
    sh = e.init(np.array(shape, np.int64), "s")
    eps = e.init(np.array(a["eps"], n.type.dtype), "c")
    scale = e.node("Div", [e.get_plain(gamma), e.node("Sqrt", [e.node("Add", [e.get_plain(var), eps])])])
    shift = e.node("Sub", [e.get_plain(beta), e.node("Mul", [e.get_plain(mean), scale])])
    y = e.node("Mul", [e.get_plain(x), e.node("Reshape", [scale, sh])])
    e.plain[n.name] = e.node("Add", [y, e.node("Reshape", [shift, sh])])


def _lrn(e: Exporter, n: Node) -> None:
    a = n.attrs
    if len(n.type.shape) != 4 or a["axis"] != 3:
        raise GraphError(f"node {display_name(n.name)}: lrn over axis {a['axis']} has no ONNX export")
    e.nchw[n.name] = e.node("LRN", [e.get_nchw(n.inputs[0])], size=a["size"], alpha=a["alpha"],
                            beta=a["beta"], bias=a["bias"])


def _concat(e: Exporter, n: Node) -> None:
    axis = n.attrs["axis"]
    if len(n.type.shape) == 4 and any(e.is_image(v) for v in n.inputs):
        e.nchw[n.name] = e.node("Concat", [e.get_nchw(v) for v in n.inputs], axis=_NHWC_AXIS_TO_NCHW[axis])
    else:
        e.plain[n.name] = e.node("Concat", [e.get_plain(v) for v in n.inputs], axis=axis)


def _dense(e: Exporter, n: Node) -> None:
    e.plain[n.name] = e.node("Gemm", [e.get_plain(v) for v in n.inputs], transB=1)


def _matmul(e: Exporter, n: Node) -> None:
    ins = []
    for v, flag in zip(n.inputs, ("transpose_a", "transpose_b")):
        x = e.get_plain(v)
        if n.attrs[flag]:
            r = len(e.graph.type_of(v).shape)
            x = e.node("Transpose", [x], perm=list(range(r - 2)) + [r - 1, r - 2])
        ins.append(x)
    e.plain[n.name] = e.node("MatMul", ins)


def plain_export(build: Callable[[Exporter, Node, list[str]], str]) -> Callable[[Exporter, Node], None]:
    """The export of an op on its inputs in the IR's own layout: ``build(e, node, xs)`` makes the
    ONNX node(s) and returns the result's name."""
    def fn(e: Exporter, n: Node) -> None:
        e.plain[n.name] = build(e, n, [e.get_plain(v) for v in n.inputs])
    return fn


def _ints(e: Exporter, values: Any) -> str:
    return e.init(np.array(list(values), np.int64), "s")


def _layer_norm(e: Exporter, n: Node, xs: list[str]) -> str:
    return e.node("LayerNormalization", xs, axis=n.attrs["axis"], epsilon=n.attrs["eps"])


def _pad(e: Exporter, n: Node, xs: list[str]) -> str:
    a = n.attrs
    value = e.init(np.array(a["value"], n.type.dtype), "c")
    return e.node("Pad", [xs[0], _ints(e, list(a["before"]) + list(a["after"])), value])


def _slice(e: Exporter, n: Node, xs: list[str]) -> str:
    a = n.attrs
    return e.node("Slice", [xs[0], _ints(e, a["begin"]), _ints(e, a["end"]),
                            _ints(e, range(len(a["begin"]))), _ints(e, a["step"])])


_OPS: dict[str, Any] = {
    "conv2d": _conv2d, "max_pool2d": _pool, "avg_pool2d": _pool, "global_avg_pool": _global_pool,
    "add": _binary("Add"), "sub": _binary("Sub"), "mul": _binary("Mul"), "div": _binary("Div"),
    "maximum": _binary("Max"), "minimum": _binary("Min"), "pow": _binary("Pow"),
    **{op: _unary for op in (*_UNARY, "gelu", "clip", "cast")},
    "batch_norm": _batch_norm, "lrn": _lrn, "concat": _concat, "dense": _dense, "matmul": _matmul,
    "softmax": plain_export(lambda e, n, xs: e.node("Softmax", xs, axis=n.attrs["axis"])),
    "layer_norm": plain_export(_layer_norm),
    "reduce_mean": plain_export(lambda e, n, xs: e.node("ReduceMean", [*xs, _ints(e, n.attrs["axes"])],
                                                     keepdims=int(n.attrs["keepdims"]))),
    "reshape": plain_export(lambda e, n, xs: e.node("Reshape", [xs[0], _ints(e, n.type.shape)])),
    "transpose": plain_export(lambda e, n, xs: e.node("Transpose", xs, perm=list(n.attrs["perm"]))),
    "pad": plain_export(_pad), "slice": plain_export(_slice),
}


def to_onnx(graph: Graph) -> Any:
    """``graph`` as an ``onnx.ModelProto`` (see the module docstring); checked by onnx's checker."""
    if not isinstance(graph, Graph):
        raise TypeError(f"to_onnx takes an ansor.graph.Graph, got {type(graph).__name__}")
    return Exporter(graph).run()


def export_onnx(graph: Graph, path: str | os.PathLike) -> None:
    """Write ``to_onnx(graph)`` to ``path``."""
    import onnx  # noqa: PLC0415 - optional dependency

    onnx.save(to_onnx(graph), os.fspath(path))
