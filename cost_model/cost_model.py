"""The cost-model interface the search uses, and the random model.

The search scores thousands of candidate programs per round and measures only the best few, so
everything it knows about speed comes through ``predict`` (higher score = faster program) and
everything it learns flows back through ``update``. The learned LightGBM model implements the same
interface; ``RandomModel`` is the baseline that shows what the search alone achieves.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from measure.measure import MeasureInput, MeasureResult
from sketch.contracts import TaskLike
from sketch.loop_state import State


class CostModel:
    """Interface: ``update`` with measured candidates, ``predict`` scores (higher is better)."""

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn from measured ``MeasureInput``s and their ``MeasureResult``s."""
        raise NotImplementedError

    def predict(self, task: TaskLike, states: Sequence[State]) -> np.ndarray:
        """One score per state (float array of len(states)); higher means predicted faster."""
        raise NotImplementedError


class RandomModel(CostModel):
    """Uniform random scores: the search without a learned model (seeded, reproducible)."""

    def __init__(self, seed: int | None = None):
        self.rng = np.random.default_rng(seed)

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        return None

    def predict(self, task: TaskLike, states: Sequence[State]) -> np.ndarray:
        return self.rng.uniform(0.0, 1.0, size=len(states))
