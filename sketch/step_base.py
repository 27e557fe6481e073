"""The base of the transform steps and the checks and stage-list edits they share.

``Step`` (a frozen record with ``tag``, ``apply`` and ``to_json``), the lookups that validate a
stage or loop index and raise ``InvalidStepError`` naming it, and the renumbering of attach targets
when loops or stages are replaced or inserted. Both ``transform_steps`` (the loop and location
steps) and ``new_stage_steps`` (cache_write, cache_read, rfactor) build on it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from compute.tensor import ComputeOp

from .stage import InvalidStepError, Iterator, Stage, replace_stage

if TYPE_CHECKING:
    # For annotations only: State's building API creates steps, so at run time the dependency
    # goes loop_state -> transform_steps -> step_base; a step reaches its state through its methods.
    from .loop_state import State


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


class Step:
    tag: ClassVar[str]
    optional_fields: ClassVar[int] = 0  # trailing fields with defaults a record may omit
    stage_id: int

    def apply(self, state: State) -> State:  # pragma: no cover - overridden
        raise NotImplementedError

    def to_json(self) -> list:
        return [self.tag] + [list(v) if isinstance(v, tuple) else v for v in self.__dict__.values()]


def _stage(state: State, sid: int) -> Stage:
    if not 0 <= sid < len(state.stages):
        raise InvalidStepError(f"stage index {sid} out of range (0..{len(state.stages) - 1})")
    return state.stages[sid]


def _compute_stage(state: State, sid: int, what: str) -> Stage:
    st = _stage(state, sid)
    if not isinstance(st.op, ComputeOp):
        raise InvalidStepError(f"cannot {what} placeholder {st.name!r}")
    if st.compute_at == "inline":
        raise InvalidStepError(f"cannot {what} stage {st.name!r}: it is inlined")
    return st


def _leaf(st: Stage, pos: int) -> tuple[int, Iterator]:
    p = st.position(pos)
    return st.leaves[p], st.iters[st.leaves[p]]


def _move_attachments(stages: list[Stage], sid: int, old_ids: tuple[int, ...], new_id: int) -> None:
    """Stages attached at a split or fused iterator move to the loop that replaces it."""
    olds = set(old_ids)
    for k, s in enumerate(stages):
        if s.attach is not None and s.attach[0] == sid and s.attach[1] in olds:
            stages[k] = replace_stage(s, attach=(sid, new_id))


def _shift_stage_ids(stages: list[Stage], at: int, by: int = 1) -> None:
    """Renumber attach targets after inserting ``by`` stages at index ``at``."""
    for k, s in enumerate(stages):
        if s.attach is not None and s.attach[0] >= at:
            stages[k] = replace_stage(s, attach=(s.attach[0] + by, s.attach[1]))


def _check_not_target(state: State, sid: int, what: str) -> None:
    for s in state.stages:
        if s.compute_at == "iter" and s.attach is not None and s.attach[0] == sid:
            raise InvalidStepError(f"cannot {what} {state.stages[sid].name!r}: stage {s.name!r} is "
                                   "computed inside it")
