"""The public ComputeDAG: the compute layer's DAG plus the schedule entry points.

``compute`` knows nothing of schedules (dependencies flow downward), so the methods that create,
replay and lower loop states live on this subclass, which is what users get as ``ansor.ComputeDAG``.
"""
from __future__ import annotations

from typing import Iterable

from compute import compute_dag as _cd
from compute import loop_ir as L
from sketch.loop_state import State
from sketch.lower import lower
from sketch.replay import replay
from sketch.transform_steps import Step


class ComputeDAG(_cd.ComputeDAG):
    """A computation given by its argument tensors (inputs and outputs, in call order)."""

    def init_state(self) -> State:
        """The default schedule: every operation computed at root, loops in declaration order."""
        return State.initial(self)

    def replay(self, steps: Iterable[Step]) -> State:
        """Rebuild the state that ``steps`` produce from the initial state (deterministic)."""
        return replay(self, list(steps))

    def lower(self, state: State | None = None, name: str = "default_function") -> L.PrimFunc:
        """The loop IR of ``state`` (default: the initial state)."""
        return lower(state if state is not None else self.init_state(), name)
