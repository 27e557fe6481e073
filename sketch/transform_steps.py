"""Transform steps: small frozen records that change a loop state, replayable and serialisable.

Each step holds only integers and strings (stage index, iterator position, factors), so it can be
hashed, mutated by the search, written to a record file and replayed on a fresh DAG to rebuild the
same state. ``apply`` checks validity and raises ``InvalidStepError`` with a message naming the
stage and loop; the search uses the same check to discard bad candidates.

Record tags follow TVM's auto_scheduler (SP, FSP, FFSP, FU, RE, CA, CI, CR, CHW, CHR, RF, AN, PR),
so the records look familiar to its users.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from compute import expr as E
from compute.tensor import ComputeOp

# The cache and rfactor steps are re-exported here with the others (STEP_TYPES needs them).
from .new_stage_steps import CacheReadStep, CacheWriteStep, PackStep, RfactorStep
from .stage import (ANNOTATIONS, SPLIT_TAILS, FuseRel, InvalidStepError, Iterator, SplitRel,
                    replace_stage, split_extents)
from .step_base import (Step, _check_not_target, _compute_stage, _leaf, _move_attachments, _prod,
                        _stage)

if TYPE_CHECKING:
    # For annotations only: State's building API creates steps, so at run time the dependency
    # goes loop_state -> transform_steps; a step reaches the state it gets through its methods.
    from .loop_state import State


@functools.lru_cache(maxsize=1 << 16)
def _split_iters(name: str, kind: str, exts: tuple[int, ...]) -> tuple[Iterator, ...]:
    """The loops a split makes of loop ``name``: immutable, so one tuple serves every state whose
    split makes the same parts (a search round replays the same splits thousands of times)."""
    return tuple(Iterator(f"{name}.{k}", e, kind) for k, e in enumerate(exts))


def _do_split(state: State, step: Step, sid: int, pos: int, lengths: tuple[int, ...],
              inner_to_outer: bool, tail: str = "guard") -> State:
    st = _compute_stage(state, sid, "split")
    leaf_id, it = _leaf(st, pos)
    if tail not in SPLIT_TAILS:
        raise InvalidStepError(f"split of {it.name} in stage {st.name}: unknown tail strategy "
                               f"{tail!r} (one of {', '.join(SPLIT_TAILS)})")
    if tail == "shift" and isinstance(st.op, ComputeOp) and st.op.reduce_axes:
        # A shifted tile computes some points twice; a reduction would accumulate them twice.
        raise InvalidStepError(f"split of {it.name} in stage {st.name}: the shift tail strategy "
                               "needs a stage without a reduction")
    if tail == "pad" and it.kind == "reduce":
        # Points past a reduction's extent would add to real outputs; only spatial axes pad.
        raise InvalidStepError(f"split of {it.name} in stage {st.name}: the pad tail strategy "
                               "needs a spatial loop")
    if it.annotation != "none":
        raise InvalidStepError(f"cannot split {it.name} of stage {st.name}: it is annotated "
                               f"{it.annotation}; split before annotating")
    if not lengths or any((not isinstance(x, int)) or isinstance(x, bool) or x < 1 for x in lengths):
        raise InvalidStepError(f"split of {it.name} in stage {st.name}: lengths must be positive "
                               f"integers, got {list(lengths)}")
    if _prod(lengths) > it.extent:
        # Parts that multiply past the extent only enumerate guarded-out iterations, and nested
        # they compound (a follow_split of [4, 17, 17] on an extent of 17 ran for minutes).
        raise InvalidStepError(f"split of {it.name} (extent {it.extent}) in stage {st.name}: lengths "
                               f"{list(lengths)} multiply to {_prod(lengths)}, more than the extent")
    exts = split_extents(it.extent, lengths, inner_to_outer)
    base = len(st.iters)
    children = tuple(range(base, base + len(exts)))
    new_iters = st.iters + _split_iters(it.name, it.kind, tuple(exts))
    leaves = st.leaves[:pos] + children + st.leaves[pos + 1:]
    rel = SplitRel(leaf_id, children, tuple(lengths), inner_to_outer, tail)
    stages = list(state.stages)
    stages[sid] = replace_stage(st, iters=new_iters, leaves=leaves, relations=st.relations + (rel,))
    _move_attachments(stages, sid, (leaf_id,), children[-1])
    return state.with_stages(tuple(stages), step)


@dataclass(frozen=True)
class SplitStep(Step):
    """Split a loop into len(lengths)+1 loops. ``lengths`` are the inner parts (outer first) when
    ``inner_to_outer``, else the outer parts; the remaining part's extent is derived (rounded up:
    a non-divisible split handles the partial tile by ``tail``, one of ``SPLIT_TAILS``: guard,
    peel or shift; see ``stage.SPLIT_TAILS``). A "guard" split is written without the tail field,
    as it was before tails existed, so older records read and write back unchanged."""

    tag: ClassVar[str] = "SP"
    optional_fields: ClassVar[int] = 1
    stage_id: int
    iter_id: int
    extent: int
    lengths: tuple[int, ...]
    inner_to_outer: bool = True
    tail: str = "guard"

    def apply(self, state: State) -> State:
        return _do_split(state, self, self.stage_id, self.iter_id, tuple(self.lengths),
                         self.inner_to_outer, self.tail)

    def to_json(self) -> list:
        out = super().to_json()
        return out[:-1] if self.tail == "guard" else out


def _follow_tail(src: Step | None, state: State, sid: int) -> str:
    """A following split of a source with a special tail shifts when its stage has no reduction
    (typically the consumer a cache_write stage is computed in: its shifted tiles leave no test
    at all, in it or in the stage computed inside), else peels; a "guard" source gives "guard"."""
    tail = getattr(src, "tail", "guard") if isinstance(src, SplitStep) else "guard"
    if tail == "guard":
        return tail
    st = state.stages[sid] if 0 <= sid < len(state.stages) else None
    pure = st is not None and isinstance(st.op, ComputeOp) and not st.op.reduce_axes
    return "shift" if pure else "peel"


@dataclass(frozen=True)
class FollowSplitStep(Step):
    """Split like an earlier SplitStep (its first n_split-1 lengths, the rest multiplied), so a
    fused consumer tiles the same way as its producer."""

    tag: ClassVar[str] = "FSP"
    optional_fields: ClassVar[int] = 1
    stage_id: int
    iter_id: int
    src_step_id: int
    n_split: int
    # "auto" (written without the field, as before it existed): derived from the source split by
    # _follow_tail; else one of SPLIT_TAILS. A reader of a packed tensor needs its tiles to start
    # at multiples of the pack's block, which a shifted last tile does not: its sketch says "peel".
    tail: str = "auto"

    def lengths(self, state: State) -> tuple[int, ...]:
        if not 0 <= self.src_step_id < len(state.steps):
            raise InvalidStepError(f"follow_split: step {self.src_step_id} does not exist")
        src = state.steps[self.src_step_id]
        if not isinstance(src, SplitStep):
            raise InvalidStepError(f"follow_split: step {self.src_step_id} is not a split")
        if not 1 <= self.n_split <= len(src.lengths):
            raise InvalidStepError(f"follow_split: n_split {self.n_split} outside 1..{len(src.lengths)}")
        head = tuple(src.lengths[: self.n_split - 1])
        return head + (_prod(src.lengths[self.n_split - 1:]),)

    def apply(self, state: State) -> State:
        src = state.steps[self.src_step_id] if 0 <= self.src_step_id < len(state.steps) else None
        tail = self.tail
        if tail == "auto":
            tail = _follow_tail(src, state, self.stage_id)
        elif _follow_tail(src, state, self.stage_id) == "guard":
            tail = "guard"  # the source divides or guards: there is no partial tile to treat
        return _do_split(state, self, self.stage_id, self.iter_id, self.lengths(state), True, tail)

    def to_json(self) -> list:
        out = super().to_json()
        return out[:-1] if self.tail == "auto" else out


@dataclass(frozen=True)
class FollowFusedSplitStep(Step):
    """Split by the product of the level-th lengths of several earlier splits (for a loop that
    fuses the loops those splits produced)."""

    tag: ClassVar[str] = "FFSP"
    stage_id: int
    iter_id: int
    src_step_ids: tuple[int, ...]
    level: int
    factor_or_nparts: bool

    def length(self, state: State) -> int:
        out = 1
        for sid in self.src_step_ids:
            if not 0 <= sid < len(state.steps) or not isinstance(state.steps[sid], SplitStep):
                raise InvalidStepError(f"follow_fused_split: step {sid} is not a split")
            src = state.steps[sid]
            if not 0 <= self.level < len(src.lengths):
                raise InvalidStepError(f"follow_fused_split: level {self.level} out of range")
            out *= src.lengths[self.level]
        return out

    def apply(self, state: State) -> State:
        # A loop fused from several splits' parts peels if any of them treats its tail specially.
        tail = "peel" if any(getattr(state.steps[s], "tail", "guard") != "guard"
                             for s in self.src_step_ids) else "guard"
        return _do_split(state, self, self.stage_id, self.iter_id, (self.length(state),),
                         self.factor_or_nparts, tail)


@dataclass(frozen=True)
class FuseStep(Step):
    """Fuse consecutive loops (all spatial or all reduce) into one."""

    tag: ClassVar[str] = "FU"
    stage_id: int
    fused_ids: tuple[int, ...]

    def apply(self, state: State) -> State:
        st = _compute_stage(state, self.stage_id, "fuse")
        pos = [st.position(p) for p in self.fused_ids]
        if not pos:
            raise InvalidStepError(f"fuse on stage {st.name}: no loops given")
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise InvalidStepError(f"fuse on stage {st.name}: loops {pos} are not consecutive in "
                                   "loop order (reorder them first)")
        ids = tuple(st.leaves[p] for p in pos)
        its = [st.iters[i] for i in ids]
        kinds = {i.kind for i in its}
        if len(kinds) > 1:
            raise InvalidStepError(f"fuse on stage {st.name}: cannot fuse spatial and reduce loops "
                                   f"({', '.join(i.name for i in its)})")
        for i in its:
            if i.annotation != "none":
                raise InvalidStepError(f"fuse on stage {st.name}: loop {i.name} is annotated "
                                       f"{i.annotation}; fuse before annotating")
        if len(ids) == 1:
            return state.with_stage(self.stage_id, st, self)
        child = len(st.iters)
        fused = Iterator("@".join(i.name for i in its) + "@", _prod(i.extent for i in its), its[0].kind)
        leaves = st.leaves[: pos[0]] + (child,) + st.leaves[pos[-1] + 1:]
        stages = list(state.stages)
        stages[self.stage_id] = replace_stage(st, iters=st.iters + (fused,), leaves=leaves,
                                        relations=st.relations + (FuseRel(ids, child),))
        _move_attachments(stages, self.stage_id, ids, child)
        return state.with_stages(tuple(stages), self)


@dataclass(frozen=True)
class ReorderStep(Step):
    """Put the stage's loops in the given order (a permutation of current positions)."""

    tag: ClassVar[str] = "RE"
    stage_id: int
    after_ids: tuple[int, ...]

    def apply(self, state: State) -> State:
        st = _compute_stage(state, self.stage_id, "reorder")
        order = [st.position(p) for p in self.after_ids]
        if sorted(order) != list(range(len(st.leaves))):
            raise InvalidStepError(f"reorder on stage {st.name}: {list(self.after_ids)} is not a "
                                   f"permutation of its {len(st.leaves)} loops")
        return state.with_stage(self.stage_id, replace_stage(st, leaves=tuple(st.leaves[p] for p in order)), self)


def _attached_inside(state: State, sid: int, target: int) -> bool:
    """Is stage ``sid`` computed (transitively) inside a loop of stage ``target``?"""
    seen = set()
    s = state.stages[sid]
    while s.compute_at == "iter" and s.attach is not None and s.attach[0] not in seen:
        if s.attach[0] == target:
            return True
        seen.add(s.attach[0])
        s = state.stages[s.attach[0]]
    return False


@dataclass(frozen=True)
class ComputeAtStep(Step):
    """Compute the stage inside loop ``target_iter_id`` of ``target_stage_id`` (a consumer)."""

    tag: ClassVar[str] = "CA"
    stage_id: int
    target_stage_id: int
    target_iter_id: int

    def apply(self, state: State) -> State:
        st = _stage(state, self.stage_id)
        if st.is_placeholder:
            raise InvalidStepError(f"cannot compute_at placeholder {st.name!r}")
        tgt = _stage(state, self.target_stage_id)
        if self.target_stage_id == self.stage_id:
            raise InvalidStepError(f"cannot compute stage {st.name!r} at itself")
        if tgt.compute_at == "inline":
            raise InvalidStepError(f"cannot compute {st.name!r} at {tgt.name!r}: the target is inlined")
        if _attached_inside(state, self.target_stage_id, self.stage_id):
            raise InvalidStepError(f"cannot compute {st.name!r} at {tgt.name!r}: {tgt.name!r} is itself "
                                   f"computed inside {st.name!r}")
        consumers = state.effective_consumers(self.stage_id)
        if not consumers:
            raise InvalidStepError(f"cannot compute_at {st.name!r}: nothing reads it")
        ok = self.target_stage_id in consumers or any(
            _attached_inside(state, c, self.target_stage_id) for c in consumers)
        if not ok:
            raise InvalidStepError(f"cannot compute {st.name!r} at {tgt.name!r}: {tgt.name!r} does not "
                                   f"read {st.name!r}")
        p = tgt.position(self.target_iter_id)
        stages = list(state.stages)
        stages[self.stage_id] = replace_stage(st, compute_at="iter", attach=(self.target_stage_id, tgt.leaves[p]))
        return state.with_stages(tuple(stages), self)


@dataclass(frozen=True)
class ComputeInlineStep(Step):
    tag: ClassVar[str] = "CI"
    stage_id: int

    def apply(self, state: State) -> State:
        st = _stage(state, self.stage_id)
        if not isinstance(st.op, ComputeOp):
            raise InvalidStepError(f"cannot inline placeholder {st.name!r}")
        if isinstance(st.op.body, E.Reduce):
            raise InvalidStepError(f"cannot inline {st.name!r}: it has a reduction")
        arg_ops = {id(t.op) for t in state.dag.tensors}
        if id(st.op) in arg_ops or (st.origin is not None and id(st.origin) in arg_ops):
            raise InvalidStepError(f"cannot inline {st.name!r}: it is a kernel argument (output)")
        if not state.consumers(self.stage_id):
            raise InvalidStepError(f"cannot inline {st.name!r}: nothing reads it")
        _check_not_target(state, self.stage_id, "inline")
        return state.with_stage(self.stage_id, replace_stage(st, compute_at="inline", attach=None), self)


@dataclass(frozen=True)
class ComputeRootStep(Step):
    tag: ClassVar[str] = "CR"
    stage_id: int

    def apply(self, state: State) -> State:
        st = _stage(state, self.stage_id)
        if st.is_placeholder:
            raise InvalidStepError(f"cannot compute_root placeholder {st.name!r}")
        return state.with_stage(self.stage_id, replace_stage(st, compute_at="root", attach=None), self)


@dataclass(frozen=True)
class AnnotationStep(Step):
    """Mark a loop parallel, vectorize or unroll (or none to clear)."""

    tag: ClassVar[str] = "AN"
    stage_id: int
    iter_id: int
    annotation: str

    def apply(self, state: State) -> State:
        st = _compute_stage(state, self.stage_id, "annotate")
        if self.annotation not in ANNOTATIONS:
            raise InvalidStepError(f"unknown annotation {self.annotation!r}; use one of {ANNOTATIONS}")
        leaf_id, it = _leaf(st, self.iter_id)
        if self.annotation in ("vectorize", "parallel") and it.kind == "reduce":
            raise InvalidStepError(f"cannot {self.annotation} reduction loop {it.name} of stage "
                                   f"{st.name}: iterations would race on the accumulator")
        if self.annotation == "parallel":
            for other in st.leaf_iters:
                if other is not it and other.annotation == "parallel":
                    raise InvalidStepError(f"cannot parallelize {it.name} of stage {st.name}: loop "
                                           f"{other.name} is already parallel (nested parallel loops)")
        new_it = Iterator(it.name, it.extent, it.kind, self.annotation)
        iters = st.iters[:leaf_id] + (new_it,) + st.iters[leaf_id + 1:]
        return state.with_stage(self.stage_id, replace_stage(st, iters=iters), self)


@dataclass(frozen=True)
class PragmaStep(Step):
    """``auto_unroll_max_step$N``: unroll the stage's inner loops whose total trip count <= N."""

    tag: ClassVar[str] = "PR"
    stage_id: int
    iter_id: int
    pragma_type: str

    def apply(self, state: State) -> State:
        st = _compute_stage(state, self.stage_id, "pragma")
        st.position(self.iter_id)
        if self.pragma_type.startswith("auto_unroll_max_step$"):
            try:
                n = int(self.pragma_type.split("$", 1)[1])
            except ValueError:
                raise InvalidStepError(f"bad pragma {self.pragma_type!r}") from None
            if n < 0:
                raise InvalidStepError(f"bad pragma {self.pragma_type!r}: negative step count")
            return state.with_stage(self.stage_id, replace_stage(st, auto_unroll_max_step=n), self)
        raise InvalidStepError(f"unknown pragma {self.pragma_type!r}")


STEP_TYPES: dict[str, type[Step]] = {cls.tag: cls for cls in (
    SplitStep, FollowSplitStep, FollowFusedSplitStep, FuseStep, ReorderStep, ComputeAtStep,
    ComputeInlineStep, ComputeRootStep, CacheWriteStep, CacheReadStep, RfactorStep, AnnotationStep,
    PragmaStep, PackStep)}


def steps_to_json(steps) -> list:
    return [s.to_json() for s in steps]


def step_from_json(rec: list) -> Step:
    """Rebuild a step from its record form; raises ValueError naming the problem."""
    if not isinstance(rec, list) or not rec or rec[0] not in STEP_TYPES:
        raise ValueError(f"unknown step record {rec!r}")
    cls = STEP_TYPES[rec[0]]
    fields = [f.name for f in dataclasses.fields(cls)]  # instance fields (not tag, optional_fields)
    optional = cls.optional_fields  # trailing fields a record may leave out (a split's tail)
    if not len(fields) - optional <= len(rec) - 1 <= len(fields):
        counts = f"{len(fields) - optional} or {len(fields)}" if optional else f"{len(fields)}"
        raise ValueError(f"step record {rec!r}: expected {counts} fields for {rec[0]}")
    vals = [tuple(v) if isinstance(v, list) else v for v in rec[1:]]
    for f, v in zip(fields, vals):
        ok = isinstance(v, (int, str, bool, tuple))
        if not ok:
            raise ValueError(f"step record {rec!r}: field {f} has a bad value {v!r}")
    return cls(*vals)
