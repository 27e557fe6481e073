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

Code: ``ir_types.py`` (dtypes, ``GraphError``, ``TensorType``, ``Node``), ``op_rules.py`` (the
registry ``OPS`` of ``OpDef``\\ s and the helpers of type rules), ``ops/`` (one module per operator
or small family, with everything the op needs: arity, pattern, type rule, numpy reference,
lowering, ONNX import and export, PyTorch peer), this module (``make_node``, ``Graph``, printing).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# The records and op rules lived here first: re-exported so ``from ansor.graph.ir import OPS,
# TensorType, ...`` keeps working.
from .ir_types import BOUNDARY_DTYPES, DTYPES, GraphError, Node, TensorType
from .op_rules import OPS, Infer, OpDef, broadcast_shapes  # noqa: F401


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
    # The dtype callers exchange at the boundary where it is not the value's own: {graph input
    # or output name: "float16" | "bfloat16"} for a float32 value (an imported half-precision
    # model computes in float32 inside; ``boundary_dtype``, ``interpreter.run`` and the compiled
    # module convert on the way in and out).
    io_dtypes: Mapping[str, str] = field(default_factory=dict)
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
        object.__setattr__(self, "io_dtypes", dict(self.io_dtypes))
        for name, dtype in self.io_dtypes.items():
            if name not in self.inputs and name not in self.outputs:
                raise GraphError(f"io_dtypes: {display_name(str(name))} is not a graph input or output")
            if dtype not in BOUNDARY_DTYPES or types[name].dtype != "float32":
                raise GraphError(f"io_dtypes: {display_name(name)} is {types[name].dtype}; a boundary dtype "
                                 f"({', '.join(BOUNDARY_DTYPES)}) is for a float32 value, got {dtype!r}")
        object.__setattr__(self, "_types", types)

    def boundary_dtype(self, name: str) -> str:
        """The dtype a caller gives (input) or gets (output) for ``name``: its ``io_dtypes``
        entry, else its own dtype."""
        return self.io_dtypes.get(name) or self.type_of(name).dtype

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
                 + ", ".join(f"%{d(n)}: {t}" + (f" as {self.io_dtypes[n]}" if n in self.io_dtypes else "")
                             for n, t in self.inputs.items()) + ") {"]
        for name, arr in self.constants.items():
            lines.append(f"  const %{d(name)}: {TensorType(arr.shape, str(arr.dtype))}")
        for node in self.nodes:
            attrs = "".join(f", {k}={_fmt_attr(v)}" for k, v in node.attrs.items())
            args = ", ".join(f"%{d(i)}" for i in node.inputs)
            lines.append(f"  %{d(node.name)} = {node.op}({args}{attrs}): {node.type}")
        lines.append("  return " + ", ".join(f"%{d(o)}" + (f" as {self.io_dtypes[o]}" if o in self.io_dtypes else "")
                                             for o in self.outputs))
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
