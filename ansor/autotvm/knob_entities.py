"""The chosen values of knobs: one split, plain value, loop order or set of annotations.

A ``ConfigEntity`` (``space.py``) maps each knob name to one of these; their ``apply`` methods
perform the schedule steps on a loop ``State`` and their ``to_json`` is what records store.
Kept apart from the knob spaces (``knob_spaces.py``), which enumerate them, because a template
only ever touches these.
"""
from __future__ import annotations

from typing import Any, Sequence

from sketch.loop_state import Iterator, State


def _stage_and_positions(state: State, stage: Any, axes: Sequence[Any]) -> tuple[int, list[int]]:
    sid = state.stage_index(stage)
    st = state.stages[sid]
    return sid, [st.position(a) for a in axes]


# ---- chosen values ------------------------------------------------------------------------------

def split_tail(stage: Any, extent: int, inner: Sequence[int]) -> str:
    """The tail strategy of a template's split: "guard" (identical code) when the parts divide
    the extent, else "shift" for a stage without a reduction and "peel" for one with (full
    tiles run without tests either way; ``sketch.stage.SPLIT_TAILS``)."""
    prod = 1
    for x in inner:
        prod *= x
    if extent % prod == 0:
        return "guard"
    return "peel" if getattr(stage.op, "reduce_axes", ()) else "shift"


class SplitEntity:
    """The chosen split of one axis: ``size`` lists the parts' extents, outermost first. The
    outermost is derived (``ceil(extent / product of the others)``), so with the "power2",
    "imperfect" and "candidate" policies the parts may multiply past the extent: the partial tile
    is then shifted inwards (a stage without reduction) or peeled (``split_tail``)."""

    __slots__ = ("size",)

    def __init__(self, size: Sequence[int]):
        self.size = tuple(int(s) for s in size)

    def apply(self, state: State, stage: Any, axis: Any) -> tuple[State, list[Iterator]]:
        """Split ``axis`` of ``stage`` into ``len(size)`` loops; returns the new state and the
        new loops (outermost first), ready for ``reorder``, ``fuse``, ``compute_at``..."""
        sid = state.stage_index(stage)
        pos = state.stages[sid].position(axis)
        if len(self.size) > 1:
            inner = list(self.size[1:])
            extent = state.stages[sid].leaf_iters[pos].extent
            state = state.split(sid, pos, inner, tail=split_tail(state.stages[sid], extent, inner))
        leaves = state.stages[sid].leaf_iters
        return state, leaves[pos:pos + len(self.size)]

    def to_json(self) -> list[int]:
        return list(self.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SplitEntity) and other.size == self.size

    def __hash__(self) -> int:
        return hash(("SP", self.size))

    def __repr__(self) -> str:
        return f"SP{list(self.size)}"


class KnobEntity:
    """The chosen value of a plain knob: ``val``."""

    __slots__ = ("val",)

    def __init__(self, val: Any):
        self.val = val

    @property
    def value(self) -> Any:
        return self.val

    def to_json(self) -> Any:
        return self.val

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KnobEntity) and type(other.val) is type(self.val) \
            and other.val == self.val

    def __hash__(self) -> int:
        return hash(("OT", repr(self.val)))

    def __repr__(self) -> str:
        return f"OT({self.val!r})"


class ReorderEntity:
    """The chosen order of a group of loops: ``perm[k]`` is the index (in the list given to
    ``apply``) of the loop that goes ``k``-th."""

    __slots__ = ("perm",)

    def __init__(self, perm: Sequence[int]):
        self.perm = tuple(int(p) for p in perm)

    def apply(self, state: State, stage: Any, axes: Sequence[Any]) -> tuple[State, list[Iterator]]:
        """Reorder ``axes`` among themselves: they keep the positions the group occupies in the
        loop order (other loops stay where they are) and fill them in ``perm`` order. Returns
        the new state and the axes in their new order."""
        if len(axes) != len(self.perm):
            raise ValueError(f"reorder knob of {len(self.perm)} axes applied to {len(axes)} axes")
        sid, pos = _stage_and_positions(state, stage, axes)
        st = state.stages[sid]
        slots = sorted(pos)
        order = list(range(len(st.leaves)))
        for slot, k in zip(slots, self.perm):
            order[slot] = pos[k]
        if order != list(range(len(st.leaves))):  # no step for an order that changes nothing
            state = state.reorder(sid, order)
        leaves = state.stages[sid].leaf_iters
        return state, [leaves[s] for s in slots]

    def to_json(self) -> list[int]:
        return list(self.perm)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReorderEntity) and other.perm == self.perm

    def __hash__(self) -> int:
        return hash(("RE", self.perm))

    def __repr__(self) -> str:
        return f"RE{list(self.perm)}"


class AnnotateEntity:
    """The chosen annotation of each loop of a group ("none", "unroll", "vectorize",
    "parallel")."""

    __slots__ = ("anns",)

    def __init__(self, anns: Sequence[str]):
        self.anns = tuple(anns)

    def apply(self, state: State, stage: Any, axes: Sequence[Any]) -> State:
        if len(axes) != len(self.anns):
            raise ValueError(f"annotate knob of {len(self.anns)} axes applied to {len(axes)} axes")
        sid = state.stage_index(stage)
        # Positions first: annotating replaces the Iterator object, but not the others' positions.
        pos = [state.stages[sid].position(a) for a in axes]
        for p, ann in zip(pos, self.anns):
            if ann != "none":
                state = state.annotate(sid, p, ann)
        return state

    def to_json(self) -> list[str]:
        return list(self.anns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnnotateEntity) and other.anns == self.anns

    def __hash__(self) -> int:
        return hash(("AN", self.anns))

    def __repr__(self) -> str:
        return f"AN{list(self.anns)}"
