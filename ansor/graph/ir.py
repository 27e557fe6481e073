"""The network graph IR: a small typed dataflow graph of operators over named values.

A ``Graph`` has typed inputs, constants (numpy arrays), ``Node``\\ s in topological order and
output value names. Every node computes exactly one value, named by the node; a value name is
unique across inputs, constants and nodes. Each op's output ``TensorType`` is inferred (and its
attributes checked) when the node is made, so a bad shape fails where it is written, with an
error naming the node and the op, instead of deep inside a later pass.

Layout conventions (our kernels are tuned channels-last):
* conv2d: data NHWC, weight HWIO ``[KH, KW, CI/groups, CO]`` (the operator library's
  ``conv2d_nhwc`` layout); depthwise is ``groups == CI`` with weight ``[KH, KW, 1, CI*M]``.
* dense: data ``[M, K]``, weight ``[N, K]`` (TVM's convention), output ``[M, N]``.
* matmul: numpy ``matmul`` semantics on rank >= 2 inputs (batch dimensions broadcast), with
  ``transpose_a``/``transpose_b`` flags on the last two axes.
* pools, global_avg_pool, lrn: NHWC (lrn normalises across ``axis``, default the last).
* padding attributes are ``(top, left, bottom, right)``.

Names (graph inputs, nodes) may be arbitrary strings: an imported model's names are untrusted.
They are kept for display and for naming inputs/outputs at run time only; printing escapes any
name that is not a plain identifier-like string, and nothing here turns a name into code.

Each op also carries a fusion pattern (relay's ``OpPattern``: elemwise, broadcast, injective,
reduce, out_elemwise_fusable, opaque) for the passes that partition the graph.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DTYPES = ("float32", "float64", "int32", "int64", "bool")


class GraphError(ValueError):
    """A malformed graph or node: wrong shapes, attributes, names or order."""


@dataclass(frozen=True)
class TensorType:
    """The static type of a value: a concrete shape (non-negative ints) and a dtype name."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        try:
            shape = tuple(int(d) for d in self.shape)
        except (TypeError, ValueError):
            raise GraphError(f"shape must be a sequence of integers, got {self.shape!r}") from None
        if any(d < 0 for d in shape) or any(isinstance(d, bool) for d in self.shape):
            raise GraphError(f"shape must hold non-negative integers, got {self.shape!r}")
        if self.dtype not in DTYPES:
            raise GraphError(f"unsupported dtype {self.dtype!r}; supported: {', '.join(DTYPES)}")
        object.__setattr__(self, "shape", shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        short = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool"}
        return f"{short[self.dtype]}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True, eq=False)
class Node:
    """``name = op(*inputs, **attrs)``: one operator application producing the value ``name``
    of type ``type``. ``inputs`` are value names; ``attrs`` are plain Python values (ints,
    floats, strings, tuples)."""

    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: Mapping[str, Any]
    type: TensorType

    @property
    def outputs(self) -> tuple[str, ...]:
        """The value names this node defines (always exactly one: its own name)."""
        return (self.name,)


# ---- op definitions ---------------------------------------------------------------------------

Infer = Callable[[Sequence[TensorType], dict[str, Any]], tuple[TensorType, dict[str, Any]]]


@dataclass(frozen=True)
class OpDef:
    """An op kind: its arity, fusion pattern and a type rule. ``infer(input_types, attrs)``
    returns the output type and the attributes normalised (defaults filled, tuples)."""

    name: str
    arity: tuple[int, int]  # (min, max) number of inputs
    pattern: str
    infer: Infer
    doc: str = ""


OPS: dict[str, OpDef] = {}


def _register(name: str, arity: int | tuple[int, int], pattern: str, doc: str = "") -> Callable[[Infer], Infer]:
    def deco(fn: Infer) -> Infer:
        ar = (arity, arity) if isinstance(arity, int) else arity
        OPS[name] = OpDef(name, ar, pattern, fn, doc)
        return fn
    return deco


def _ints(value: Any, n: int, what: str, minimum: int = 0) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value),) * n
    try:
        out = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise GraphError(f"{what} must be an int or {n} ints, got {value!r}") from None
    if len(out) != n or any(v < minimum for v in out):
        raise GraphError(f"{what} must be {n} integer(s) >= {minimum}, got {value!r}")
    return out


def _float_input(t: TensorType, what: str) -> None:
    if not t.dtype.startswith("float"):
        raise GraphError(f"{what} must be a float tensor, got {t}")


def _axis(axis: Any, ndim: int, what: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -ndim <= axis < max(ndim, 1):
        raise GraphError(f"{what} {axis!r} is out of range for rank {ndim}")
    return int(axis) % max(ndim, 1)


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """Numpy broadcasting of two shapes; a GraphError names both if they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise GraphError(f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _same_dtype(ts: Sequence[TensorType]) -> str:
    dtypes = {t.dtype for t in ts}
    if len(dtypes) > 1:
        raise GraphError(f"inputs have different dtypes: {', '.join(str(t) for t in ts)}")
    return ts[0].dtype


for _name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
    def _binary(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
        return TensorType(broadcast_shapes(ts[0].shape, ts[1].shape), _same_dtype(ts)), {}
    _register(_name, 2, "broadcast", "numpy-broadcasting binary arithmetic")(_binary)

for _name in ("relu", "sigmoid", "tanh", "exp", "sqrt", "erf", "neg", "identity"):
    def _unary(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
        return ts[0], {}
    _register(_name, 1, "elemwise")(_unary)


@_register("gelu", 1, "elemwise", "GELU; approximate='none' (erf form) or 'tanh'")
def _gelu(ts, attrs):
    _float_input(ts[0], "gelu input")
    approx = attrs.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise GraphError(f"gelu: approximate must be 'none' or 'tanh', got {approx!r}")
    return ts[0], {"approximate": approx}


@_register("clip", 1, "elemwise", "clamp to [min, max] (relu6 is clip(0, 6))")
def _clip(ts, attrs):
    lo, hi = attrs.get("min", -math.inf), attrs.get("max", math.inf)
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)) or lo > hi:
        raise GraphError(f"clip: min/max must be numbers with min <= max, got {lo!r}, {hi!r}")
    return ts[0], {"min": float(lo), "max": float(hi)}


@_register("cast", 1, "elemwise")
def _cast(ts, attrs):
    return TensorType(ts[0].shape, attrs.get("dtype", "float32")), {"dtype": attrs.get("dtype", "float32")}


@_register("conv2d", 2, "out_elemwise_fusable", "NHWC data, HWIO weight [KH, KW, CI/groups, CO]")
def _conv2d(ts, attrs):
    data, weight = ts
    if data.ndim != 4 or weight.ndim != 4:
        raise GraphError(f"conv2d: data must be 4-D NHWC and weight 4-D HWIO, got {data} and {weight}")
    _same_dtype(ts)
    strides = _ints(attrs.get("strides", 1), 2, "conv2d strides", 1)
    dil = _ints(attrs.get("dilation", 1), 2, "conv2d dilation", 1)
    pad = _ints(attrs.get("padding", 0), 4, "conv2d padding (top, left, bottom, right)")
    groups = attrs.get("groups", 1)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise GraphError(f"conv2d: groups must be a positive integer, got {groups!r}")
    n, h, w, ci = data.shape
    kh, kw, ci_g, co = weight.shape
    if ci % groups or co % groups:
        raise GraphError(f"conv2d: channels in ({ci}) and out ({co}) must be divisible by groups ({groups})")
    if ci_g * groups != ci:
        raise GraphError(f"conv2d: weight {list(weight.shape)} (HWIO) has {ci_g} input channel(s) per "
                         f"group, data has {ci} channel(s) in {groups} group(s)")
    out = []
    for size, k, d, s, p0, p1, axis in ((h, kh, dil[0], strides[0], pad[0], pad[2], "H"),
                                        (w, kw, dil[1], strides[1], pad[1], pad[3], "W")):
        eff = (k - 1) * d + 1
        if eff > size + p0 + p1:
            raise GraphError(f"conv2d: kernel extent {eff} exceeds the padded input extent "
                             f"{size + p0 + p1} along {axis}")
        out.append((size + p0 + p1 - eff) // s + 1)
    return (TensorType((n, out[0], out[1], co), data.dtype),
            {"strides": strides, "padding": pad, "dilation": dil, "groups": groups})


@_register("dense", 2, "out_elemwise_fusable", "data [M, K] @ weight[N, K]^T -> [M, N]")
def _dense(ts, attrs):
    data, weight = ts
    if data.ndim != 2 or weight.ndim != 2 or data.shape[1] != weight.shape[1]:
        raise GraphError(f"dense: need data [M, K] and weight [N, K], got {data} and {weight}")
    return TensorType((data.shape[0], weight.shape[0]), _same_dtype(ts)), {}


@_register("matmul", 2, "out_elemwise_fusable", "batched matmul with broadcast batch dims")
def _matmul(ts, attrs):
    a, b = ts
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
    if a.ndim < 2 or b.ndim < 2:
        raise GraphError(f"matmul: inputs must be at least 2-D, got {a} and {b}")
    m, ka = (a.shape[-1], a.shape[-2]) if ta else a.shape[-2:]
    kb, n = (b.shape[-1], b.shape[-2]) if tb else b.shape[-2:]
    if ka != kb:
        raise GraphError(f"matmul: inner dimensions differ ({ka} vs {kb}) for {a} and {b}"
                         f" (transpose_a={ta}, transpose_b={tb})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return TensorType((*batch, m, n), _same_dtype(ts)), {"transpose_a": ta, "transpose_b": tb}


@_register("batch_norm", 5, "injective", "inputs x, gamma, beta, mean, var; per-channel on axis")
def _batch_norm(ts, attrs):
    x = ts[0]
    axis = _axis(attrs.get("axis", -1), x.ndim, "batch_norm axis")
    for t, what in zip(ts[1:], ("gamma", "beta", "mean", "var")):
        if t.shape != (x.shape[axis],):
            raise GraphError(f"batch_norm: {what} must have shape [{x.shape[axis]}], got {t}")
    return x, {"axis": axis, "eps": float(attrs.get("eps", 1e-5))}


def _pool_attrs(op: str, x: TensorType, attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    if x.ndim != 4:
        raise GraphError(f"{op}: input must be 4-D NHWC, got {x}")
    ks = _ints(attrs.get("kernel"), 2, f"{op} kernel", 1)
    strides = _ints(attrs.get("strides", 1), 2, f"{op} strides", 1)
    pad = _ints(attrs.get("padding", 0), 4, f"{op} padding (top, left, bottom, right)")
    ceil_mode = bool(attrs.get("ceil_mode", False))
    out = []
    for size, k, s, p0, p1, axis in ((x.shape[1], ks[0], strides[0], pad[0], pad[2], "H"),
                                     (x.shape[2], ks[1], strides[1], pad[1], pad[3], "W")):
        span = size + p0 + p1 - k
        if span < 0:
            raise GraphError(f"{op}: kernel {k} exceeds the padded input extent {size + p0 + p1} along {axis}")
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + p0:  # the last window must start inside the data
            o -= 1
        out.append(o)
    return (TensorType((x.shape[0], out[0], out[1], x.shape[3]), x.dtype),
            {"kernel": ks, "strides": strides, "padding": pad, "ceil_mode": ceil_mode})


@_register("max_pool2d", 1, "out_elemwise_fusable")
def _max_pool(ts, attrs):
    return _pool_attrs("max_pool2d", ts[0], attrs)


@_register("avg_pool2d", 1, "out_elemwise_fusable", "count_include_pad decides whether padding counts in the mean")
def _avg_pool(ts, attrs):
    out, a = _pool_attrs("avg_pool2d", ts[0], attrs)
    a["count_include_pad"] = bool(attrs.get("count_include_pad", False))
    return out, a


@_register("global_avg_pool", 1, "out_elemwise_fusable", "NHWC -> [N, 1, 1, C]")
def _global_pool(ts, attrs):
    x = ts[0]
    if x.ndim != 4:
        raise GraphError(f"global_avg_pool: input must be 4-D NHWC, got {x}")
    return TensorType((x.shape[0], 1, 1, x.shape[3]), x.dtype), {}


@_register("softmax", 1, "opaque", "softmax along one axis")
def _softmax(ts, attrs):
    _float_input(ts[0], "softmax input")
    return ts[0], {"axis": _axis(attrs.get("axis", -1), ts[0].ndim, "softmax axis")}


@_register("layer_norm", 3, "opaque", "normalise over axes [axis, rank); gamma/beta of that shape")
def _layer_norm(ts, attrs):
    x, gamma, beta = ts
    _float_input(x, "layer_norm input")
    axis = _axis(attrs.get("axis", -1), x.ndim, "layer_norm axis")
    for t, what in ((gamma, "gamma"), (beta, "beta")):
        if broadcast_shapes(x.shape[axis:], t.shape) != x.shape[axis:]:
            raise GraphError(f"layer_norm: {what} {t} does not broadcast to the normalised shape "
                             f"{list(x.shape[axis:])}")
    return x, {"axis": axis, "eps": float(attrs.get("eps", 1e-5))}


@_register("lrn", 1, "opaque", "local response normalisation across channels (ONNX LRN)")
def _lrn(ts, attrs):
    x = ts[0]
    size = attrs.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GraphError(f"lrn: size must be a positive integer, got {size!r}")
    return x, {"size": size, "alpha": float(attrs.get("alpha", 1e-4)), "beta": float(attrs.get("beta", 0.75)),
               "bias": float(attrs.get("bias", 1.0)), "axis": _axis(attrs.get("axis", -1), x.ndim, "lrn axis")}


@_register("reduce_mean", 1, "reduce")
def _reduce_mean(ts, attrs):
    x = ts[0]
    axes = attrs.get("axes")
    axes = tuple(range(x.ndim)) if axes is None else tuple(sorted({_axis(a, x.ndim, "reduce_mean axis") for a in axes}))
    keep = bool(attrs.get("keepdims", True))
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
    return TensorType(shape, x.dtype), {"axes": axes, "keepdims": keep}


@_register("reshape", 1, "injective", "row-major reshape to a fully known shape")
def _reshape(ts, attrs):
    shape = tuple(int(d) for d in attrs.get("shape", ()))
    if any(d < 0 for d in shape) or math.prod(shape) != ts[0].size:
        raise GraphError(f"reshape: cannot reshape {ts[0]} to {list(shape)}")
    return TensorType(shape, ts[0].dtype), {"shape": shape}


@_register("transpose", 1, "injective")
def _transpose(ts, attrs):
    x = ts[0]
    perm = tuple(int(p) for p in attrs.get("perm", range(x.ndim - 1, -1, -1)))
    if sorted(perm) != list(range(x.ndim)):
        raise GraphError(f"transpose: perm {list(perm)} is not a permutation of {x.ndim} axes")
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype), {"perm": perm}


@_register("concat", (1, 1 << 20), "injective")
def _concat(ts, attrs):
    first = ts[0]
    axis = _axis(attrs.get("axis", 0), first.ndim, "concat axis")
    dtype = _same_dtype(ts)
    for t in ts[1:]:
        if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
            raise GraphError(f"concat: inputs {', '.join(map(str, ts))} differ outside axis {axis}")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in ts)
    return TensorType(tuple(shape), dtype), {"axis": axis}


@_register("pad", 1, "injective", "constant padding: before/after per axis")
def _pad(ts, attrs):
    x = ts[0]
    before = _ints(attrs.get("before", 0), x.ndim, "pad before")
    after = _ints(attrs.get("after", 0), x.ndim, "pad after")
    shape = tuple(d + a + b for d, a, b in zip(x.shape, before, after))
    return TensorType(shape, x.dtype), {"before": before, "after": after, "value": float(attrs.get("value", 0.0))}


@_register("slice", 1, "injective", "x[begin:end:step] per axis (positive steps)")
def _slice(ts, attrs):
    x = ts[0]
    begin = _ints(attrs.get("begin"), x.ndim, "slice begin")
    end = _ints(attrs.get("end"), x.ndim, "slice end")
    step = _ints(attrs.get("step", 1), x.ndim, "slice step", 1)
    shape = tuple(len(range(*slice(b, e, s).indices(d))) for b, e, s, d in zip(begin, end, step, x.shape))
    return TensorType(shape, x.dtype), {"begin": begin, "end": end, "step": step}


# ---- the graph ------------------------------------------------------------------------------------

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]{0,80}")


def display_name(name: str) -> str:
    """``name`` as printed: plain names as they are, anything else (control characters, quotes,
    very long names) as an escaped Python string literal."""
    return name if _PLAIN_NAME.fullmatch(name) else repr(name)


def make_node(name: str, op: str, inputs: Sequence[str], input_types: Sequence[TensorType],
              attrs: Mapping[str, Any] | None = None) -> Node:
    """A node with its output type inferred; a GraphError names the node and op otherwise."""
    where = f"node {display_name(name)} ({op})"
    opdef = OPS.get(op)
    if opdef is None:
        raise GraphError(f"{where}: unknown op {op!r}; known ops: {', '.join(sorted(OPS))}")
    lo, hi = opdef.arity
    if not lo <= len(inputs) <= hi:
        raise GraphError(f"{where}: takes {lo if lo == hi else f'{lo}..{hi}'} input(s), got {len(inputs)}")
    try:
        out, norm = opdef.infer(list(input_types), dict(attrs or {}))
    except GraphError as e:
        msg = str(e)
        raise GraphError(f"{where}: {msg[len(op) + 2:] if msg.startswith(f'{op}: ') else msg}") from None
    return Node(name, op, tuple(inputs), norm, out)


@dataclass(frozen=True, eq=False)
class Graph:
    """A typed dataflow graph. ``inputs`` maps name -> type, ``constants`` name -> array,
    ``nodes`` are in topological order and ``outputs`` are value names. Construction validates."""

    inputs: Mapping[str, TensorType]
    constants: Mapping[str, np.ndarray]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    name: str = "graph"
    _types: dict[str, TensorType] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        self.validate()

    def validate(self) -> None:
        """Check names are unique, every input is defined before use, every node's type is what
        its op infers, constants are arrays of supported dtypes and outputs exist."""
        types: dict[str, TensorType] = {}
        for name, t in self.inputs.items():
            if not isinstance(t, TensorType):
                raise GraphError(f"graph input {display_name(name)}: type must be a TensorType, got {t!r}")
            types[name] = t
        for name, arr in self.constants.items():
            if name in types:
                raise GraphError(f"constant {display_name(name)} has the name of a graph input")
            if not isinstance(arr, np.ndarray) or str(arr.dtype) not in DTYPES:
                raise GraphError(f"constant {display_name(name)} must be a numpy array of "
                                 f"{'/'.join(DTYPES)}, got {type(arr).__name__} {getattr(arr, 'dtype', '')}")
            types[name] = TensorType(arr.shape, str(arr.dtype))
        for node in self.nodes:
            if node.name in types:
                raise GraphError(f"node {display_name(node.name)} ({node.op}): the name is already defined")
            for i in node.inputs:
                if i not in types:
                    raise GraphError(f"node {display_name(node.name)} ({node.op}): input "
                                     f"{display_name(i)} is not defined before it (not topological?)")
            again = make_node(node.name, node.op, node.inputs, [types[i] for i in node.inputs], node.attrs)
            if again.type != node.type:
                raise GraphError(f"node {display_name(node.name)} ({node.op}): recorded type {node.type} "
                                 f"but the op infers {again.type}")
            types[node.name] = node.type
        if not self.outputs:
            raise GraphError("the graph has no outputs")
        for o in self.outputs:
            if o not in types:
                raise GraphError(f"graph output {display_name(o)} is not defined")
        object.__setattr__(self, "_types", types)

    def type_of(self, name: str) -> TensorType:
        """The type of value ``name`` (input, constant or node)."""
        try:
            return self._types[name]
        except KeyError:
            raise KeyError(f"no value named {display_name(name)} in graph {display_name(self.name)}") from None

    def node(self, name: str) -> Node:
        """The node defining ``name``."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {display_name(name)}")

    def consumers(self) -> dict[str, list[Node]]:
        """For each value name, the nodes that read it (in order)."""
        out: dict[str, list[Node]] = {n: [] for n in self._types}
        for node in self.nodes:
            for i in node.inputs:
                out[i].append(node)
        return out

    def op_counts(self) -> dict[str, int]:
        """How many nodes of each op kind."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    def __str__(self) -> str:
        d = display_name
        lines = [f"graph {d(self.name)}("
                 + ", ".join(f"%{d(n)}: {t}" for n, t in self.inputs.items()) + ") {"]
        for name, arr in self.constants.items():
            lines.append(f"  const %{d(name)}: {TensorType(arr.shape, str(arr.dtype))}")
        for node in self.nodes:
            attrs = "".join(f", {k}={_fmt_attr(v)}" for k, v in node.attrs.items())
            args = ", ".join(f"%{d(i)}" for i in node.inputs)
            lines.append(f"  %{d(node.name)} = {node.op}({args}{attrs}): {node.type}")
        lines.append("  return " + ", ".join(f"%{d(o)}" for o in self.outputs))
        lines.append("}")
        return "\n".join(lines)

    __repr__ = __str__


def _fmt_attr(v: Any) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(map(_fmt_attr, v)) + "]"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, str):
        return repr(v)
    return str(v)
