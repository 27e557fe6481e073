"""The schedule backend of ``compute.compute_dag.ComputeDAG``: its ``init_state``, ``replay`` and
``lower`` are this layer's, registered here because ``compute`` cannot import ``sketch``.

``sketch/__init__.py`` imports this module, so importing any part of the schedule layer makes every
DAG, wherever it was made, schedulable.
"""
from __future__ import annotations

from typing import Sequence

from compute import loop_ir as L
from compute.compute_dag import ComputeDAG, set_schedule_backend

from .loop_state import State
from .lower import lower
from .replay import replay
from .transform_steps import Step


class _SketchScheduleBackend:
    """``compute.compute_dag.ScheduleBackend`` over the loop state, replay and lowering here."""

    def init_state(self, dag: ComputeDAG) -> State:
        return State.initial(dag)

    def replay(self, dag: ComputeDAG, steps: Sequence[Step]) -> State:
        return replay(dag, steps)

    def lower(self, state: State, name: str) -> L.PrimFunc:
        return lower(state, name)


set_schedule_backend(_SketchScheduleBackend())
