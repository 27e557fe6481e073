"""JSON form of a ComputeDAG: ``to_json`` writes it, ``from_json`` rebuilds the argument tensors.

Serialisation, never code: reading a description builds expressions through the checked
constructors of ``compute.expr`` and executes nothing from the file; names are checked first
(``compute.names``). Split out of ``compute.compute_dag``, which calls it (the workload key hashes
the nameless form) and re-exports ``to_json`` / ``from_json``; this module does not import it.
"""
from __future__ import annotations

import json
from typing import Protocol

from . import expr as E
from .names import check_dag_json_names
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor


class ComputeDAG(Protocol):
    """What ``to_json`` reads of a ``compute.compute_dag.ComputeDAG`` (structural, no import)."""

    ops: list[Operation]
    tensors: list[Tensor]


SCHEMA_VERSION = 1


def to_json(dag: ComputeDAG, with_names: bool = True) -> dict:
    """A JSON-able description of the DAG; ``from_json`` rebuilds it without executing anything."""
    index = {op: i for i, op in enumerate(dag.ops)}
    ops_out = []
    for op in dag.ops:
        if isinstance(op, PlaceholderOp):
            d: dict = {"kind": "placeholder", "shape": list(op.shape), "dtype": op.dtype}
        else:
            assert isinstance(op, ComputeOp)
            axes = {id(a): ["ax", k] for k, a in enumerate(op.axes)}
            raxes = {id(a): ["rax", k] for k, a in enumerate(op.reduce_axes)}
            d = {
                "kind": "compute",
                "shape": list(op.shape),
                "reduce_axes": [[a.lo, a.extent] for a in op.reduce_axes],
                "body": _expr_json(op.body, index, {**axes, **raxes}),
                "tag": op.tag,
            }
            if with_names:
                d["axis_names"] = [a.name for a in op.axes]
                d["reduce_axis_names"] = [a.name for a in op.reduce_axes]
                if op.attrs:
                    d["attrs"] = _json_attrs(op)
        if with_names:
            d["name"] = op.name
        ops_out.append(d)
    return {"version": SCHEMA_VERSION, "ops": ops_out, "args": [index[t.op] for t in dag.tensors]}


def _json_attrs(op: ComputeOp) -> dict:
    try:
        json.dumps(op.attrs)
    except TypeError:
        return {k: v for k, v in op.attrs.items() if isinstance(v, (int, float, str, bool))}
    return op.attrs


# A body is written as one nested list (["b", "add", X, Y], ...) unless that would nest deeper than
# NESTED_MAX_DEPTH (JSON text nested thousands deep cannot be dumped or loaded by the json module)
# or repeat shared sub-expressions into more than NESTED_MAX_NODES entries. Such bodies are
# written flat instead: ["dag", [entry0, entry1, ...]], each entry a node whose operands are
# references ["@", k] to earlier entries; the last entry is the body. Every body an earlier version
# could write stays nested, so workload keys of existing logs do not change.
NESTED_MAX_DEPTH = 400
NESTED_MAX_NODES = 100_000


def _expr_json(e: E.Expr, index: dict, axes: dict) -> list:
    # (depth, size) of the nested form, per node; min() keeps exponential sizes from growing big.
    depth, size = E.fold(e, lambda n, ks: (1 + max((k[0] for k in ks), default=0),
                                           min(1 + sum(k[1] for k in ks), NESTED_MAX_NODES + 1)))
    if depth <= NESTED_MAX_DEPTH and size <= NESTED_MAX_NODES:
        return E.fold(e, lambda n, ks: _node_json(n, ks, index, axes))  # type: ignore[return-value]
    entries: list = []

    def entry(n: E.Expr, ks: list) -> list:
        entries.append(_node_json(n, ks, index, axes))
        return ["@", len(entries) - 1]

    E.fold(e, entry)
    return ["dag", entries]


def _node_json(e: E.Expr, kids: list, index: dict, axes: dict) -> list:
    """One node in the JSON form, its operands (in ``children()`` order) already written."""
    if isinstance(e, E.Const):
        v = e.value
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            v = repr(v)  # JSON has no inf/nan literals
        return ["c", e.dtype, v]
    if isinstance(e, E.Var):
        ref = axes.get(id(e))
        if ref is None:
            raise ValueError(f"cannot serialise free variable {e.name!r}")
        return ref
    if isinstance(e, E.Binary):
        return ["b", e.op, kids[0], kids[1]]
    if isinstance(e, E.Compare):
        return ["cmp", e.op, kids[0], kids[1]]
    if isinstance(e, E.Unary):
        return ["u", e.op, kids[0]]
    if isinstance(e, E.Call):
        return ["call", e.name] + kids
    if isinstance(e, E.Select):
        return ["sel"] + kids
    if isinstance(e, E.Cast):
        return ["cast", e.dtype, kids[0]]
    if isinstance(e, E.TensorLoad):
        return ["load", index[e.tensor.op]] + kids
    if isinstance(e, E.Reduce):
        return ["red", e.combiner, kids[0], [axes[id(a)][1] for a in e.axes],
                None if e.where is None else kids[1]]
    raise TypeError(f"cannot serialise {type(e).__name__}")


def from_json(data: dict) -> list[Tensor]:
    """Rebuild the argument tensors of a DAG serialised by ``to_json``."""
    from .tensor import compute, placeholder, reduce_axis

    if not isinstance(data, dict) or data.get("version") != SCHEMA_VERSION:
        raise ValueError(f"unsupported DAG description (version {data.get('version') if isinstance(data, dict) else '?'})")
    # Names come from a file: check them all, naming the field, before building anything.
    check_dag_json_names(data)
    tensors: list[Tensor] = []
    for k, d in enumerate(data["ops"]):
        name = d.get("name", f"T{k}")
        if d["kind"] == "placeholder":
            tensors.append(placeholder(tuple(d["shape"]), d["dtype"], name))
            continue
        rnames = d.get("reduce_axis_names") or [f"r{j}" for j in range(len(d["reduce_axes"]))]
        raxes = [reduce_axis((lo, lo + ext), n) for (lo, ext), n in zip(d["reduce_axes"], rnames)]

        def body(*axes, _d=d, _r=raxes):
            return _expr_from(_d["body"], tensors, axes, _r)

        names = d.get("axis_names") or [f"i{j}" for j in range(len(d["shape"]))]
        body.__signature__ = _signature(names)  # type: ignore[attr-defined]
        tensors.append(compute(tuple(d["shape"]), body, name, d.get("tag", ""), d.get("attrs") or {}))
    return [tensors[i] for i in data["args"]]


def _signature(names: list[str]):
    import inspect

    return inspect.Signature([inspect.Parameter(n if n.isidentifier() else f"i{k}",
                                                inspect.Parameter.POSITIONAL_ONLY)
                              for k, n in enumerate(names)])


# Positions of the operands in each tagged JSON node (None: a fixed count is not known up front).
_OPERANDS = {"c": (), "ax": (), "rax": (), "@": (), "b": (2, 3), "cmp": (2, 3), "u": (2,),
             "cast": (2,), "sel": (1, 2, 3), "call": None, "load": None, "red": None}


def _operand_positions(j: object) -> tuple[int, ...]:
    if not isinstance(j, list) or not j or not isinstance(j[0], str) or j[0] not in _OPERANDS:
        raise ValueError(f"malformed expression {_short(j)} in DAG description")
    tag = j[0]
    pos = _OPERANDS[tag]
    if pos is None:
        if tag == "red":
            if len(j) != 5:
                raise ValueError(f"malformed expression {_short(j)} in DAG description")
            pos = (2,) if j[4] is None else (2, 4)
        else:
            pos = tuple(range(2, len(j)))
    if len(j) < (max(pos) + 1 if pos else 2):
        raise ValueError(f"malformed expression {_short(j)} in DAG description")
    for p in pos:
        if not isinstance(j[p], list):
            raise ValueError(f"malformed expression {_short(j)} in DAG description: operand "
                             f"{_short(j[p])} is not an expression")
    return pos


def _short(j: object) -> str:
    text = json.dumps(j, default=str) if not isinstance(j, list) else repr(j[:3])
    return text if len(text) <= 80 else text[:77] + "..."


def _expr_from(root: list, tensors: list[Tensor], axes: tuple, raxes: list) -> E.Expr:
    """The expression of a JSON body, nested or flat (see ``_expr_json``). Iterative: an explicit
    stack, so a body nested as deep as the json module accepts cannot exhaust the Python stack."""
    if isinstance(root, list) and root[:1] == ["dag"]:
        if len(root) != 2 or not isinstance(root[1], list) or not root[1]:
            raise ValueError(f"malformed expression {_short(root)} in DAG description")
        refs: list[E.Expr] = []
        for entry in root[1]:
            refs.append(_expr_tree(entry, tensors, axes, raxes, refs))
        return refs[-1]
    return _expr_tree(root, tensors, axes, raxes, [])


def _expr_tree(root: list, tensors: list[Tensor], axes: tuple, raxes: list, refs: list) -> E.Expr:
    done: dict[int, E.Expr] = {}
    open_: set[int] = set()
    stack = [root]
    while stack:
        j = stack[-1]
        if id(j) in done:
            stack.pop()
            continue
        pos = _operand_positions(j)
        pending = [j[p] for p in pos if id(j[p]) not in done]
        if pending:
            if id(j) in open_:
                raise ValueError("malformed expression in DAG description: it contains itself")
            open_.add(id(j))
            stack.extend(reversed(pending))
            continue
        stack.pop()
        open_.discard(id(j))
        ops = {p: done[id(j[p])] for p in pos}
        try:
            done[id(j)] = _expr_node(j, ops, tensors, axes, raxes, refs)
        except (IndexError, KeyError, TypeError) as err:
            raise ValueError(f"malformed expression {_short(j)} in DAG description: {err}") from None
    return done[id(root)]


def _expr_node(j: list, ops: dict[int, E.Expr], tensors: list[Tensor], axes: tuple, raxes: list,
               refs: list) -> E.Expr:
    """One JSON node, its operands (by position in ``j``) already built."""
    tag = j[0]
    if tag == "c":
        v = j[2]
        if isinstance(v, str):
            v = float(v)
        return E.const(v, j[1])
    if tag in ("ax", "rax", "@"):
        k = j[1]
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise ValueError(f"malformed expression {_short(j)} in DAG description")
        if tag == "@" and k >= len(refs):
            raise ValueError(f"malformed expression {_short(j)} in DAG description: it refers to "
                             f"entry {k}, which is not an earlier one")
        return (axes if tag == "ax" else raxes if tag == "rax" else refs)[k]
    if tag == "b":
        return E.binary(j[1], ops[2], ops[3])
    if tag == "cmp":
        return E.compare(j[1], ops[2], ops[3])
    if tag == "u":
        return E.unary(j[1], ops[2])
    if tag == "call":
        return E.call(j[1], *[ops[p] for p in sorted(ops)])
    if tag == "sel":
        return E.select(ops[1], ops[2], ops[3])
    if tag == "cast":
        return E.cast(ops[2], j[1])
    if tag == "load":
        k = j[1]
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(tensors):
            raise ValueError(f"malformed expression {_short(j)} in DAG description: no tensor {k!r}")
        return tensors[k][tuple(ops[p] for p in sorted(ops))]
    assert tag == "red"
    return E.reduce(j[1], ops[2], [raxes[i] for i in j[3]], ops.get(4))
