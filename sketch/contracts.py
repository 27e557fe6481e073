"""The contracts the search holds its callers to, as Protocols: what a task and a cost model must
offer. ``sketch`` cannot import the packages that implement them (``ansor.SearchTask``,
``cost_model.CostModel`` sit above it), so it states here the little it uses, and the type checker
holds the implementations to it structurally.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from compute.compute_dag import ComputeDAG

from .loop_state import State


class TaskLike(Protocol):
    """A computation to search: its DAG and the key its records are filed under (an
    ``ansor.SearchTask``; the measurement layer accepts any such object too)."""

    @property
    def compute_dag(self) -> ComputeDAG: ...

    @property
    def workload_key(self) -> str: ...


class CostModelLike(Protocol):
    """What the search asks of a cost model: one score per state, higher meaning faster."""

    def predict(self, task: TaskLike, states: Sequence[State]) -> np.ndarray: ...
