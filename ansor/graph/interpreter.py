"""The numpy reference interpreter for a whole ``Graph``: the oracle compiled networks are checked
against, and what the ONNX importer uses to fold constant subgraphs.

One numpy function per op, the ``reference`` of its ``OpDef`` (declared with the operator in
``ansor/graph/ops/``); this module only walks the graph. Convolutions and pools loop over the
kernel window only (KH*KW strided slices, each a BLAS matmul or a vector op), never over pixels,
so ResNet-50 runs in seconds. Every reduction (conv, dense, matmul, pools, normalisations)
accumulates in float64 and rounds once to the node's dtype: the oracle must not share the
rounding of what it checks, and output channels with equal weights must come out bit-identical
whatever BLAS tile computed them (the ONNX light models have constant weights and ~1e10 logits,
where one ulp moves the softmax).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from .ir import OPS, Graph, GraphError, Node, display_name
from .ir_types import numpy_dtype
from .memory_plan import check_graph_memory

Kernel = Callable[..., np.ndarray]


def run(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate ``graph`` on named input arrays; returns ``{output name: array}``.

    Every graph input must be given with its exact shape; values are converted to the input's
    dtype (a float16/bfloat16 array for an input whose ``Graph.io_dtypes`` says so becomes
    float32). Outputs with an ``io_dtypes`` entry are returned in that dtype (float16, or
    bfloat16 through ``ml_dtypes``). Errors name the input at fault.
    """
    env: dict[str, np.ndarray] = {}
    check_graph_memory(graph, compiled=False, reference=True)  # it keeps every value
    missing = [n for n in graph.inputs if n not in inputs]
    if missing:
        raise GraphError("missing graph input(s): " + ", ".join(display_name(n) for n in missing))
    unknown = [n for n in inputs if n not in graph.inputs]
    if unknown:
        raise GraphError("unknown input name(s): " + ", ".join(display_name(str(n)) for n in unknown)
                         + "; graph inputs: " + ", ".join(display_name(n) for n in graph.inputs))
    for name, t in graph.inputs.items():
        arr = np.asarray(inputs[name])
        if arr.shape != t.shape:
            raise GraphError(f"input {display_name(name)}: expected shape {list(t.shape)}, got {list(arr.shape)}")
        env[name] = arr.astype(t.dtype, copy=False)
    env.update(graph.constants)
    # NaN/inf are results here, not errors: whoever compares them reports them (no warning spam).
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            env[node.name] = eval_node(node, [env[i] for i in node.inputs])
    return {o: env[o].astype(numpy_dtype(graph.io_dtypes[o])) if o in graph.io_dtypes else env[o]
            for o in graph.outputs}


def eval_node(node: Node, args: list[np.ndarray]) -> np.ndarray:
    """One node's value from its input arrays (result has the node's dtype and shape)."""
    out = op_kernel(node.op)(*args, **node.attrs)
    out = np.asarray(out).astype(node.type.dtype, copy=False)
    if out.shape != node.type.shape:  # a kernel bug, not user error: say which node
        raise AssertionError(f"node {display_name(node.name)} ({node.op}) produced {out.shape}, "
                             f"expected {node.type.shape}")
    return out


def op_kernel(op: str) -> Kernel:
    """The numpy function for ``op`` (keyword arguments are the node's attributes)."""
    fn = OPS[op].reference
    assert fn is not None, op  # ansor.graph.ops refuses an operator without a reference at import
    return fn
