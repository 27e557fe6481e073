"""``GraphBuilder``: write a network in Python, one op call per layer, and get a ``Graph``.

    b = GraphBuilder("net")
    x = b.input("data", (1, 224, 224, 3))
    y = b.relu(b.conv2d(x, w, strides=2, padding=3))   # w: numpy HWIO array -> a constant
    graph = b.build(y)

Every method returns a ``Var`` (a value name and its type); array arguments become constants.
Types are inferred as each node is added, so a shape mistake fails at the line that makes it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .ir import Graph, GraphError, Node, TensorType, make_node


@dataclass(frozen=True)
class Var:
    """A value of the graph being built: its unique name and its type."""

    name: str
    type: TensorType

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype


Operand = Var | np.ndarray | float | int


class GraphBuilder:
    """Accumulates inputs, constants and nodes; ``build(outputs)`` returns the validated Graph."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self._inputs: dict[str, TensorType] = {}
        self._consts: dict[str, np.ndarray] = {}
        self._nodes: list[Node] = []
        self._types: dict[str, TensorType] = {}
        self._counter: dict[str, int] = {}

    # ---- names and values -----------------------------------------------------------------------

    def unique_name(self, hint: str) -> str:
        """``hint`` if unused, else ``hint_1``, ``hint_2``, ..."""
        if hint not in self._types:
            return hint
        k = self._counter.get(hint, 0)
        while True:
            k += 1
            cand = f"{hint}_{k}"
            if cand not in self._types:
                self._counter[hint] = k
                return cand

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> Var:
        """A graph input (names must be unique)."""
        if name in self._types:
            raise GraphError(f"graph input {name!r}: the name is already used")
        try:
            t = TensorType(tuple(shape), dtype)
        except GraphError as e:
            raise GraphError(f"graph input {name!r}: {e}") from None
        self._inputs[name] = t
        self._types[name] = t
        return Var(name, t)

    def constant(self, value: np.ndarray | float | int, name: str = "const", dtype: str | None = None,
                 copy: bool = True) -> Var:
        """A constant array (float64 data without an explicit dtype becomes float32). It is copied
        unless ``copy=False`` (for arrays the caller made and will not change: large weights)."""
        arr = np.array(value) if copy else np.asarray(value)
        if dtype is not None:
            arr = arr.astype(dtype)
        elif arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        n = self.unique_name(name)
        self._consts[n] = arr
        self._types[n] = TensorType(arr.shape, str(arr.dtype))
        return Var(n, self._types[n])

    def set_constant(self, v: Var, value: np.ndarray) -> None:
        """Replace the array of constant ``v`` by one of the same shape and dtype (used to fold a
        batch norm into the weights of the conv before it)."""
        old = self._consts.get(v.name)
        if old is None:
            raise GraphError(f"{v.name!r} is not a constant")
        if value.shape != old.shape or value.dtype != old.dtype:
            raise GraphError(f"constant {v.name!r}: replacement {value.dtype}{list(value.shape)} differs "
                             f"from {old.dtype}{list(old.shape)}")
        self._consts[v.name] = value

    def const_value(self, v: Var) -> np.ndarray | None:
        """The array behind ``v`` if it is a constant, else None."""
        return self._consts.get(v.name)

    def _as_var(self, x: Operand, like: Var | None = None) -> Var:
        if isinstance(x, Var):
            if x.name not in self._types:
                raise GraphError(f"value {x.name!r} does not belong to this builder")
            return x
        dtype = like.dtype if like is not None and np.ndim(x) == 0 else None
        return self.constant(x, dtype=dtype)

    def add_node(self, op: str, inputs: Sequence[Operand], attrs: dict[str, Any] | None = None,
                 name: str | None = None) -> Var:
        """Append ``op(*inputs, **attrs)``; its type is inferred now (GraphError on mismatch)."""
        first = next((i for i in inputs if isinstance(i, Var)), None)
        vs = [self._as_var(i, first) for i in inputs]
        node = make_node(self.unique_name(name or op), op, [v.name for v in vs], [v.type for v in vs], attrs)
        self._nodes.append(node)
        self._types[node.name] = node.type
        return Var(node.name, node.type)

    def build(self, outputs: Var | Sequence[Var], io_dtypes: Mapping[str, str] | None = None) -> Graph:
        """The finished graph returning ``outputs``; ``io_dtypes``: ``Graph.io_dtypes``."""
        outs = [outputs] if isinstance(outputs, Var) else list(outputs)
        return Graph(dict(self._inputs), dict(self._consts), tuple(self._nodes), tuple(o.name for o in outs),
                     name=self.name, io_dtypes=dict(io_dtypes or {}))

    # ---- layers -----------------------------------------------------------------------------------

    def conv2d(self, x: Var, weight: Operand, bias: Operand | None = None, strides: int | Sequence[int] = 1,
               padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
               name: str = "conv2d") -> Var:
        """NHWC convolution with an HWIO weight ``[KH, KW, CI/groups, CO]``; ``padding`` is one int,
        (pad_h, pad_w) or (top, left, bottom, right); optional bias ``[CO]`` as a following add."""
        pad = (padding,) * 4 if isinstance(padding, int) else tuple(padding)
        if len(pad) == 2:
            pad = (pad[0], pad[1], pad[0], pad[1])
        y = self.add_node("conv2d", [x, weight], {"strides": strides, "padding": pad,
                                                  "dilation": dilation, "groups": groups}, name)
        return y if bias is None else self.add(y, bias, name=f"{y.name}_bias")

    def dense(self, x: Var, weight: Operand, bias: Operand | None = None, name: str = "dense") -> Var:
        """``x [M, K] @ weight[N, K]^T (+ bias [N])``."""
        y = self.add_node("dense", [x, weight], {}, name)
        return y if bias is None else self.add(y, bias, name=f"{y.name}_bias")

    def matmul(self, a: Var, b: Operand, transpose_a: bool = False, transpose_b: bool = False,
               name: str = "matmul") -> Var:
        return self.add_node("matmul", [a, b], {"transpose_a": transpose_a, "transpose_b": transpose_b}, name)

    batch_matmul = matmul

    def bias_add(self, x: Var, bias: Operand, name: str = "bias_add") -> Var:
        """Add a per-channel bias along the last axis (channels-last)."""
        return self.add(x, bias, name=name)

    def batch_norm(self, x: Var, gamma: Operand, beta: Operand, mean: Operand, var: Operand,
                   eps: float = 1e-5, axis: int = -1, name: str = "batch_norm") -> Var:
        return self.add_node("batch_norm", [x, gamma, beta, mean, var], {"eps": eps, "axis": axis}, name)

    def max_pool2d(self, x: Var, kernel: int | Sequence[int], strides: int | Sequence[int] = 1,
                   padding: int | Sequence[int] = 0, ceil_mode: bool = False, name: str = "max_pool2d") -> Var:
        return self.add_node("max_pool2d", [x], {"kernel": kernel, "strides": strides,
                                                 "padding": _pad4(padding), "ceil_mode": ceil_mode}, name)

    def avg_pool2d(self, x: Var, kernel: int | Sequence[int], strides: int | Sequence[int] = 1,
                   padding: int | Sequence[int] = 0, count_include_pad: bool = False,
                   ceil_mode: bool = False, name: str = "avg_pool2d") -> Var:
        return self.add_node("avg_pool2d", [x], {"kernel": kernel, "strides": strides, "padding": _pad4(padding),
                                                 "count_include_pad": count_include_pad,
                                                 "ceil_mode": ceil_mode}, name)

    def global_avg_pool(self, x: Var, name: str = "global_avg_pool") -> Var:
        return self.add_node("global_avg_pool", [x], {}, name)

    def softmax(self, x: Var, axis: int = -1, name: str = "softmax") -> Var:
        return self.add_node("softmax", [x], {"axis": axis}, name)

    def layer_norm(self, x: Var, gamma: Operand, beta: Operand, eps: float = 1e-5, axis: int = -1,
                   name: str = "layer_norm") -> Var:
        return self.add_node("layer_norm", [x, gamma, beta], {"eps": eps, "axis": axis}, name)

    def lrn(self, x: Var, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0,
            axis: int = -1, name: str = "lrn") -> Var:
        return self.add_node("lrn", [x], {"size": size, "alpha": alpha, "beta": beta, "bias": bias,
                                          "axis": axis}, name)

    def reduce_mean(self, x: Var, axes: Sequence[int] | None = None, keepdims: bool = True,
                    name: str = "reduce_mean") -> Var:
        return self.add_node("reduce_mean", [x], {"axes": axes, "keepdims": keepdims}, name)

    def reshape(self, x: Var, shape: Sequence[int], name: str = "reshape") -> Var:
        """Reshape; one ``-1`` entry is inferred."""
        shape = list(shape)
        if shape.count(-1) == 1:
            rest = int(np.prod([d for d in shape if d != -1]))
            shape[shape.index(-1)] = x.type.size // rest if rest else 0
        return self.add_node("reshape", [x], {"shape": tuple(shape)}, name)

    def flatten(self, x: Var, axis: int = 1, name: str = "flatten") -> Var:
        """[d0..d(axis-1), prod(rest)] (ONNX Flatten gives a 2-D result: leading dims merged too)."""
        lead = int(np.prod(x.shape[:axis]))
        return self.reshape(x, (lead, x.type.size // lead if lead else 0), name=name)

    def transpose(self, x: Var, perm: Sequence[int], name: str = "transpose") -> Var:
        return self.add_node("transpose", [x], {"perm": tuple(perm)}, name)

    def concat(self, xs: Sequence[Var], axis: int = -1, name: str = "concat") -> Var:
        return self.add_node("concat", list(xs), {"axis": axis}, name)

    def pad(self, x: Var, before: Sequence[int], after: Sequence[int], value: float = 0.0,
            name: str = "pad") -> Var:
        return self.add_node("pad", [x], {"before": before, "after": after, "value": value}, name)

    def relu6(self, x: Var, name: str = "relu6") -> Var:
        return self.clip(x, 0.0, 6.0, name=name)

    def clip(self, x: Var, min: float, max: float, name: str = "clip") -> Var:  # noqa: A002
        return self.add_node("clip", [x], {"min": min, "max": max}, name)

    def gelu(self, x: Var, approximate: str = "none", name: str = "gelu") -> Var:
        return self.add_node("gelu", [x], {"approximate": approximate}, name)


def _pad4(padding: int | Sequence[int]) -> tuple[int, ...]:
    pad = (padding,) * 4 if isinstance(padding, int) else tuple(padding)
    return (pad[0], pad[1], pad[0], pad[1]) if len(pad) == 2 else pad


def _binary(op: str):
    def method(self: GraphBuilder, a: Operand, b: Operand, name: str = op) -> Var:
        return self.add_node(op, [a, b], {}, name)
    method.__name__ = op
    method.__doc__ = f"Broadcasting ``{op}``; numpy arrays and numbers become constants."
    return method


def _unary(op: str):
    def method(self: GraphBuilder, x: Var, name: str = op) -> Var:
        return self.add_node(op, [x], {}, name)
    method.__name__ = op
    method.__doc__ = f"Elementwise ``{op}``."
    return method


for _op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
    setattr(GraphBuilder, _op, _binary(_op))
for _op in ("relu", "sigmoid", "tanh", "exp", "sqrt", "erf", "neg", "identity"):
    setattr(GraphBuilder, _op, _unary(_op))
