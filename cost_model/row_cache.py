"""Feature rows of store statements already featurised, reused when a statement's inputs recur.

A search round featurises ~10,000 states, nearly all distinct, but most are one mutation away from
a parent scored the generation before: a tile-size edit changes the loops of one or two stages, and
the other statements' rows come out exactly as before (35-45% of the rows of a GEMM or conv2d round).
``feature._statement_row`` is a pure function of a few values (the statement's loop nest, its
stage's static analysis, the buffers it reads); ``feature._row_key`` names all of them, and this
module keeps the rows computed under each key, so a repeated statement costs a key, not a row.

Per DAG (weakly held: the table goes with its task), the static analysis object kept with each row
and checked on a hit (the key holds its identity). The table is emptied when it reaches
``MAX_ENTRIES`` rows (about 50 MB at most): the hits come from the last generation's parents, so a
table refilled every round or two loses few of them.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

from compute.compute_dag import ComputeDAG

MAX_ENTRIES = 16384

# DAG -> row key -> (the static analysis the row was computed with, the row)
_TABLES: "weakref.WeakKeyDictionary[ComputeDAG, dict[tuple, tuple[Any, np.ndarray]]]" = \
    weakref.WeakKeyDictionary()
stats = {"hits": 0, "misses": 0}  # since the process started (tests, benchmarks)


def lookup(dag: ComputeDAG, key: tuple, info: Any) -> np.ndarray | None:
    """The row stored under ``key`` for ``dag`` if it was computed with ``info``, else None. The
    array is shared: callers copy it (``np.array(rows)`` does) and never write into it."""
    table = _TABLES.get(dag)
    hit = table.get(key) if table is not None else None
    if hit is not None and hit[0] is info:
        stats["hits"] += 1
        return hit[1]
    stats["misses"] += 1
    return None


def store(dag: ComputeDAG, key: tuple, info: Any, row: np.ndarray) -> None:
    """Keep ``row``, computed with ``info``, under ``key`` for ``dag``."""
    table = _TABLES.get(dag)
    if table is None:
        table = _TABLES[dag] = {}
    if len(table) >= MAX_ENTRIES:
        table.clear()
    table[key] = (info, row)


def cached_row(dag: ComputeDAG, key: tuple, info: Any, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The row stored under ``key`` for ``dag`` (computed with ``info``), else ``compute()``,
    stored."""
    row = lookup(dag, key, info)
    if row is None:
        row = compute()
        store(dag, key, info, row)
    return row


def cache_size(dag: ComputeDAG) -> int:
    """Rows stored for ``dag``."""
    table = _TABLES.get(dag)
    return 0 if table is None else len(table)


def clear_cache() -> None:
    """Forget every stored row (tests; a session that wants the memory back)."""
    _TABLES.clear()
