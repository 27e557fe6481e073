"""The operations a pack step builds (the packed copy and the reader rewritten to read it), cached.

``PackStep.apply`` makes two new operations: the copy ``src.pack[d // v, ..., d % v]`` and the
reader's body with every load of ``src`` rewritten to load the copy. Both depend only on the
source stage's operations, the reader's operation, the packed dimension, the block length ``v``
and the copy's name, not on the rest of the state. The search replays a pack step for every
sample and nearly every mutation (the pack follows the tile sizes, so it comes after the splits
that are edited), and rebuilding the reader's body was a third of the time of those replays.

Operations are immutable values, so one built for an earlier state serves every later state with
the same inputs; states then also share the reader's operation object, which lets the
operation-derived tables (producers, consumers) pass from parent to child. The cache is per DAG
(weakly held: it goes with the task) and keyed by the identity of the input operations, which
the entry keeps alive so that an identity is never reused while its entry exists; it is emptied
when it reaches ``MAX_ENTRIES`` (the inputs are almost always the few operations of a sketch's
prefix, so the limit only bounds memory in long sessions).
"""
from __future__ import annotations

import weakref
from typing import Sequence

from compute import expr as E
from compute.compute_dag import ComputeDAG
from compute.tensor import ComputeOp, Operation

MAX_ENTRIES = 4096

# DAG -> key -> (the input operations, kept alive and checked on a hit; the copy; the new reader)
_CACHE: "weakref.WeakKeyDictionary[ComputeDAG, dict[tuple, tuple[tuple, ComputeOp, ComputeOp]]]" = \
    weakref.WeakKeyDictionary()


def build_pack_ops(src_op: Operation, produced: Sequence[Operation], reader: ComputeOp, dim: int,
                   v: int, name: str) -> tuple[ComputeOp, ComputeOp]:
    """The copy of ``src_op``'s output packed along ``dim`` in blocks of ``v`` (named ``name``),
    and ``reader`` rewritten so that its loads of any of ``produced`` read the copy."""
    src = src_op.output
    n = src.shape[dim]
    outer = E.iter_var("ax_o", 0, -(-n // v), "spatial")
    inner = E.iter_var("ax_i", 0, v, "spatial")
    rest = tuple(E.iter_var(f"ax{d}", 0, s, "spatial") for d, s in enumerate(src.shape) if d != dim)
    d_val = outer * v + inner
    idx = list(rest)
    idx.insert(dim, d_val)
    body: E.Expr = src[tuple(idx)]
    if n % v:
        body = E.select(d_val < n, body, E.const(0, src.dtype))
    pack = ComputeOp(name, (outer,) + rest + (inner,), body, "pack", {})
    olds = {id(o.output) for o in produced}

    def to_pack(e: E.Expr) -> E.Expr | None:
        if not (isinstance(e, E.TensorLoad) and id(e.tensor) in olds):
            return None
        ix = list(e.indices)
        d = ix.pop(dim)
        return pack.output[(E.binary("floordiv", d, v),) + tuple(ix) + (E.binary("floormod", d, v),)]

    new_op = ComputeOp(reader.name, reader.axes, E.rewrite(reader.body, to_pack), reader.tag,
                       reader.attrs)
    return pack, new_op


def pack_ops(dag: ComputeDAG, src_op: Operation, produced: Sequence[Operation], reader: ComputeOp,
             dim: int, v: int, name: str) -> tuple[ComputeOp, ComputeOp]:
    """``build_pack_ops``, built once per (DAG, input operations, dim, v, name)."""
    inputs = (src_op, tuple(produced), reader)
    key = (id(src_op), tuple(map(id, produced)), id(reader), dim, v, name)
    table = _CACHE.get(dag)
    if table is None:
        table = _CACHE[dag] = {}
    hit = table.get(key)
    if hit is not None and hit[0][0] is src_op and hit[0][2] is reader and all(
            a is b for a, b in zip(hit[0][1], inputs[1])):
        return hit[1], hit[2]
    pack, new_op = build_pack_ops(src_op, produced, reader, dim, v, name)
    if len(table) >= MAX_ENTRIES:
        table.clear()
    table[key] = (inputs, pack, new_op)
    return pack, new_op


def clear_cache() -> None:
    """Forget every cached operation (tests; a long session that wants the memory back)."""
    _CACHE.clear()
