"""The tables derived from a state's operations alone, shared by every state with the same ones.

Which stage produces each tensor (``producer_table``) and which stages read each stage
(``consumer_table``, a walk of every stage's body) depend only on each stage's operation, the
operations it replaced (``aliases``) and the DAG operation it stands for (``origin``), in stage
order. A state keeps them in its memo and passes them to a child with the same operations
(``State._pass_op_tables``); but a step that makes operations (cache_write, pack) breaks that
chain, and the search then rebuilt the consumer table in most of its states, although its
samples and mutations keep arriving at the same few operation lists (the steps that make
operations are replayed from the same prefix, and the pack step's operations are cached, module
``pack_ops``). Here the tables are kept per DAG (weakly held) under the identities of those
operations; the entry holds the operations, so an identity in a live key is never reused. The
tables are shared and read only. The table of a DAG is emptied when it reaches ``MAX_ENTRIES``.
"""
from __future__ import annotations

import weakref
from typing import Sequence

from compute import expr as E
from compute.compute_dag import ComputeDAG
from compute.tensor import ComputeOp

from .stage import Stage

MAX_ENTRIES = 4096

# DAG -> operation identities -> (the operations, kept alive; producer table; consumer table)
_CACHE: "weakref.WeakKeyDictionary[ComputeDAG, dict[tuple, list]]" = weakref.WeakKeyDictionary()


def _entry(dag: ComputeDAG, stages: Sequence[Stage]) -> list:
    produced = tuple(s.produced_ops for s in stages)
    key = tuple(tuple(map(id, ops)) for ops in produced)
    table = _CACHE.get(dag)
    if table is None:
        table = _CACHE[dag] = {}
    entry = table.get(key)
    if entry is None:
        if len(table) >= MAX_ENTRIES:
            table.clear()
        entry = table[key] = [produced, None, None]
    return entry


def build_producer_table(stages: Sequence[Stage]) -> dict[int, int]:
    """id(tensor) -> index of the stage producing it (ops a stage replaced count as its own)."""
    table: dict[int, int] = {}
    for k, s in enumerate(stages):
        for o in s.produced_ops:
            table.setdefault(id(o.output), k)
    return table


def build_consumer_table(stages: Sequence[Stage], producer_of: dict[int, int]) -> dict[int, list[int]]:
    """Stage index -> indices of the stages whose bodies load its output."""
    table: dict[int, list[int]] = {k: [] for k in range(len(stages))}
    for k, s in enumerate(stages):
        if isinstance(s.op, ComputeOp):
            seen = set()
            for n in E.post_order(s.op.body):
                if isinstance(n, E.TensorLoad):
                    p = producer_of.get(id(n.tensor))
                    if p is not None and p not in seen:
                        seen.add(p)
                        table[p].append(k)
    return table


def producer_table(dag: ComputeDAG, stages: Sequence[Stage]) -> dict[int, int]:
    """``build_producer_table(stages)``, built once per (DAG, operations)."""
    entry = _entry(dag, stages)
    if entry[1] is None:
        entry[1] = build_producer_table(stages)
    return entry[1]


def consumer_table(dag: ComputeDAG, stages: Sequence[Stage]) -> dict[int, list[int]]:
    """``build_consumer_table(stages, ...)``, built once per (DAG, operations)."""
    entry = _entry(dag, stages)
    if entry[2] is None:
        if entry[1] is None:
            entry[1] = build_producer_table(stages)
        entry[2] = build_consumer_table(stages, entry[1])
    return entry[2]


def clear_cache() -> None:
    """Forget every cached table (tests; a session that wants the memory back)."""
    _CACHE.clear()
