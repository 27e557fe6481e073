"""Fewer garbage collections while a search round runs.

Why: a round allocates millions of small objects (states, stages, step tuples, expressions) and
keeps tens of thousands of them alive until it ends. CPython's cyclic collector, started every
700 net allocations, walks the young objects again and again and from time to time the whole
heap, every state of the population included: about a fifth of a round's CPU time (GEMM 512^3,
population 2048, ``benchmarks/search_round.py``). Inside ``fewer_collections()`` the objects
alive on entry are frozen (no collection looks at them) and the youngest generation is collected
every ``YOUNG_THRESHOLD`` allocations; cyclic garbage made inside is still collected, later.
On exit the frozen objects return to the oldest generation and the thresholds are restored.

Uses nest and may overlap across threads (the collector's settings are per process): the first
to enter sets them, the last to leave restores them. Collection only frees memory; what the search
computes is the same with or without the pause.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

YOUNG_THRESHOLD = 50_000   # CPython's default is 700
OLDER_THRESHOLDS = (20, 20)

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, ...] | None = None
_froze = False  # did we freeze? (not when the program keeps objects frozen itself)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the body with the objects alive now frozen and rarer young collections."""
    global _depth, _saved, _froze
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            _froze = gc.get_freeze_count() == 0
            if _froze:
                gc.freeze()
            gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _saved is not None:
                    gc.set_threshold(*_saved)
                if _froze:
                    gc.unfreeze()
                _saved, _froze = None, False
