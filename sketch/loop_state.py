"""Loop state: the schedule of a ComputeDAG as an immutable value.

A ``State`` holds one ``Stage`` per operation (plus stages added by cache_write, cache_read and
rfactor) and the list of transform steps that produced it. A stage knows its iterators (every one
ever created, addressed by a persistent id), the current loop order (``leaves``), the split/fuse
relations linking the loops to the operation's axes, and where it is computed (at root, inlined, or
at an iterator of another stage).

States are never mutated or deep-copied: applying a step builds a new State that shares every
unchanged Stage, Iterator and the DAG with its parent (as TVM's loop_state and Halide's
``make_child`` do). This keeps the evolutionary search's thousands of replays cheap.

Steps address stages by index and iterators by their *position* in the stage's current loop order,
exactly as records store them; the building API also accepts Iterator objects and names.
"""
from __future__ import annotations

import json
import operator
from dataclasses import dataclass, field
from typing import Callable, Generic, Iterable, Sequence, TypeVar

from compute import expr as E
from compute.compute_dag import ComputeDAG
from compute.tensor import ComputeOp, Operation, Tensor

from .state_print import state_str
from .op_tables import consumer_table, producer_table
# The stage types are defined in .stage (below the steps and the lowering, which need them but
# not this module); they are re-exported here, where users and other packages import them.
from .stage import (ANNOTATIONS, FuseRel, InvalidStepError, Iterator, SplitRel, Stage,
                    iterator_extents, iterator_values, replace_stage, stage_for_op)
from .transform_steps import (AnnotationStep, CacheReadStep, CacheWriteStep, ComputeAtStep, PackStep,
                              ComputeInlineStep, ComputeRootStep, FollowFusedSplitStep,
                              FollowSplitStep, FuseStep, PragmaStep, ReorderStep, RfactorStep,
                              SplitStep, Step, steps_to_json)

__all__ = ["ANNOTATIONS", "FuseRel", "InvalidStepError", "Iterator", "Memo", "SplitRel", "Stage",
           "State", "iterator_extents", "iterator_values", "replace_stage", "stage_for_op"]

T = TypeVar("T")


class Memo(Generic[T]):
    """A declared slot for a value derived from a State (its features, whether it lowers, ...).

    States are immutable, so anything computed from one stays true of it; ``State.memo`` stores
    such values on the state so they are computed once. The module that computes a value declares
    its slot (a module-level ``Memo``) and is the only one holding it: slots are keyed by object,
    not by name, so no two modules can meet in the same entry and no module writes into a state.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name  # for debugging only

    def __repr__(self) -> str:
        return f"Memo({self.name!r})"


_MISSING = object()


@dataclass(frozen=True)
class State:
    """An immutable schedule. Every building method returns a new State."""

    dag: ComputeDAG
    stages: tuple[Stage, ...]
    steps: tuple["Step", ...] = ()
    # Values derived from this (immutable) state, by slot; read and filled only through memo().
    _memo: dict = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def initial(dag: ComputeDAG) -> "State":
        return State(dag, tuple(stage_for_op(op, op) for op in dag.ops))

    # ---- derived values ------------------------------------------------------------------------
    def memo(self, slot: Memo[T], compute: Callable[["State"], T]) -> T:
        """The value of ``slot`` for this state: ``compute(self)`` the first time, then remembered
        (``compute`` must depend on the state alone; if it raises, nothing is remembered)."""
        got = self._memo.get(slot, _MISSING)
        if got is _MISSING:
            got = self._memo[slot] = compute(self)
        return got  # type: ignore[return-value]

    def memoized(self, slot: Memo[T]) -> T | None:
        """The value of ``slot`` if it was computed already, else None (never computes it)."""
        return self._memo.get(slot)

    # ---- lookup --------------------------------------------------------------------------------
    def stage_index(self, stage: "int | str | Tensor | Operation | Stage") -> int:
        if isinstance(stage, bool):
            raise InvalidStepError(f"bad stage {stage!r}")
        if isinstance(stage, int):
            if not 0 <= stage < len(self.stages):
                raise InvalidStepError(f"stage index {stage} out of range (0..{len(self.stages) - 1})")
            return stage
        if isinstance(stage, Stage):
            for k, s in enumerate(self.stages):
                if s is stage:
                    return k
            stage = stage.op
        if isinstance(stage, Tensor):
            stage = stage.op
        if isinstance(stage, Operation):
            for k, s in enumerate(self.stages):
                if any(o is stage for o in s.produced_ops):
                    return k
            raise InvalidStepError(f"operation {stage.name!r} is not in this state")
        if isinstance(stage, str):
            hits = [k for k, s in enumerate(self.stages) if s.op.name == stage]
            if len(hits) == 1:
                return hits[0]
            if not hits:
                raise InvalidStepError(f"no stage named {stage!r}; stages: "
                                       f"{', '.join(s.op.name for s in self.stages)}")
            raise InvalidStepError(f"several stages are named {stage!r}; use the stage index")
        raise InvalidStepError(f"cannot use {stage!r} as a stage")

    def __getitem__(self, stage: "int | str | Tensor | Operation") -> Stage:
        return self.stages[self.stage_index(stage)]

    def consumers(self, stage_id: int) -> list[int]:
        """Indices of the stages that read the given stage's output (after inlining is resolved
        by lowering, these are the direct readers in the state's operation bodies)."""
        return list(self.memo(_CONSUMERS, State._consumer_table)[stage_id])

    def _consumer_table(self) -> dict[int, list[int]]:
        return consumer_table(self.dag, self.stages)

    def producer_map(self) -> dict[int, int]:
        """id(tensor) -> index of the stage producing it (ops a stage replaced count as its own)."""
        return self.memo(_PRODUCERS, State._producer_table)

    def _producer_table(self) -> dict[int, int]:
        return producer_table(self.dag, self.stages)

    def effective_consumers(self, stage_id: int) -> list[int]:
        """Readers once inlining is resolved: an inlined reader is replaced by its own readers."""
        out: list[int] = []
        todo = list(self.consumers(stage_id))
        seen: set[int] = set()
        while todo:
            c = todo.pop(0)
            if c in seen:
                continue
            seen.add(c)
            if self.stages[c].compute_at == "inline":
                todo.extend(self.consumers(c))
            else:
                out.append(c)
        return out

    def producers(self, stage_id: int) -> list[int]:
        return [k for k in range(len(self.stages)) if stage_id in self.consumers(k)]

    # ---- building API: each returns a new State -------------------------------------------------
    def _do(self, step: "Step") -> "State":
        return step.apply(self)

    def split(self, stage, iterator, lengths: Sequence[int], inner_to_outer: bool = True,
              tail: str = "guard") -> "State":
        """Split a loop; ``tail`` says how a partial last tile is handled when the lengths do not
        divide the extent: "guard", "peel" or "shift" (``sketch.stage.SPLIT_TAILS``)."""
        sid = self.stage_index(stage)
        pos = self.stages[sid].position(iterator)
        ext = self.stages[sid].leaf_iters[pos].extent
        return self._do(SplitStep(sid, pos, ext, tuple(int(x) for x in lengths), inner_to_outer,
                                  tail))

    def follow_split(self, stage, iterator, src_step_id: int, n_split: int, tail: str = "auto") -> "State":
        sid = self.stage_index(stage)
        return self._do(FollowSplitStep(sid, self.stages[sid].position(iterator), src_step_id, n_split,
                                        tail))

    def follow_fused_split(self, stage, iterator, src_step_ids: Sequence[int], level: int,
                           factor_or_nparts: bool) -> "State":
        sid = self.stage_index(stage)
        return self._do(FollowFusedSplitStep(sid, self.stages[sid].position(iterator),
                                             tuple(src_step_ids), level, factor_or_nparts))

    def fuse(self, stage, iterators: Iterable) -> "State":
        sid = self.stage_index(stage)
        st = self.stages[sid]
        return self._do(FuseStep(sid, tuple(st.position(i) for i in iterators)))

    def reorder(self, stage, order: Iterable) -> "State":
        sid = self.stage_index(stage)
        st = self.stages[sid]
        return self._do(ReorderStep(sid, tuple(st.position(i) for i in order)))

    def compute_at(self, stage, target, iterator) -> "State":
        sid, tid = self.stage_index(stage), self.stage_index(target)
        return self._do(ComputeAtStep(sid, tid, self.stages[tid].position(iterator)))

    def compute_inline(self, stage) -> "State":
        return self._do(ComputeInlineStep(self.stage_index(stage)))

    def compute_root(self, stage) -> "State":
        return self._do(ComputeRootStep(self.stage_index(stage)))

    def cache_write(self, stage, scope: str = "local", axis_order: Iterable[int] = ()) -> "State":
        """Compute ``stage`` into a local buffer, laid out in ``axis_order`` (positions of its
        axes; default its own order); the stage becomes the copy out of it."""
        return self._do(CacheWriteStep(self.stage_index(stage), scope, tuple(axis_order)))

    def cache_read(self, stage, scope: str, readers: Iterable) -> "State":
        return self._do(CacheReadStep(self.stage_index(stage), scope,
                                      tuple(self.stage_index(r) for r in readers)))

    def pack(self, stage, reader, dim: int, src_step_id: int) -> "State":
        """Read ``stage``'s output in ``reader`` through a blocked, zero-padded copy: dimension
        ``dim`` in blocks of the innermost length of split step ``src_step_id`` (PackStep)."""
        return self._do(PackStep(self.stage_index(stage), self.stage_index(reader), dim, src_step_id))

    def rfactor(self, stage, iterator, factor_iter_id: int = 0) -> "State":
        sid = self.stage_index(stage)
        return self._do(RfactorStep(sid, self.stages[sid].position(iterator), factor_iter_id))

    def annotate(self, stage, iterator, annotation: str) -> "State":
        sid = self.stage_index(stage)
        return self._do(AnnotationStep(sid, self.stages[sid].position(iterator), annotation))

    def parallel(self, stage, iterator) -> "State":
        return self.annotate(stage, iterator, "parallel")

    def vectorize(self, stage, iterator) -> "State":
        return self.annotate(stage, iterator, "vectorize")

    def unroll(self, stage, iterator) -> "State":
        return self.annotate(stage, iterator, "unroll")

    def pragma(self, stage, iterator, pragma: str) -> "State":
        sid = self.stage_index(stage)
        return self._do(PragmaStep(sid, self.stages[sid].position(iterator), pragma))

    # ---- helpers for steps -----------------------------------------------------------------------
    def with_stage(self, sid: int, stage: Stage, step: "Step") -> "State":
        stages = self.stages[:sid] + (stage,) + self.stages[sid + 1:]
        out = State(self.dag, stages, self.steps + (step,))
        if _same_ops(self.stages[sid], stage):
            self._pass_op_tables(out)
        return out

    def with_stages(self, stages: tuple[Stage, ...], step: "Step") -> "State":
        out = State(self.dag, stages, self.steps + (step,))
        if len(stages) == len(self.stages) and all(map(_same_ops, self.stages, stages)):
            self._pass_op_tables(out)
        return out

    def _pass_op_tables(self, child: "State") -> None:
        """``child`` has the same operations in the same stages: the tables derived from the
        operations alone (producers, consumers) hold for it too. Sharing them spares each
        compute_at / inline step a walk of every stage's body to rebuild the consumer table,
        which made replaying a state quadratic in its stage count."""
        for slot in _OP_TABLES:
            table = self._memo.get(slot)
            if table is not None:
                child._memo[slot] = table

    # ---- display ---------------------------------------------------------------------------------
    def __str__(self) -> str:
        return state_str(self)

    def __repr__(self) -> str:
        return f"State({len(self.stages)} stages, {len(self.steps)} steps)"

    def canonical_key(self) -> str:
        """A string that identifies the schedule (used to deduplicate candidates)."""
        return self.memo(_KEY, State._key)

    def _key(self) -> str:
        # The JSON of the list is its items' JSON joined; each step's is kept (steps recur
        # across the states of a search).
        return "[" + ",".join(map(step_key, self.steps)) + "]"


# id(step) -> (step, its compact JSON). By identity, not equality: a step read from a record may
# hold 1 where another holds True (equal, and equally hashed, but written differently). The step
# is kept with its entry, so its id is not reused while the entry lives; a replay passes the step
# objects it does not change on to the states it builds, so most lookups hit.
_STEP_KEYS: dict[int, tuple["Step", str]] = {}


def step_key(step: "Step") -> str:
    """The step's compact JSON (its part of ``State.canonical_key``), kept per step object."""
    got = _STEP_KEYS.get(id(step))
    if got is None or got[0] is not step:
        if len(_STEP_KEYS) >= 1 << 17:
            _STEP_KEYS.clear()
        got = _STEP_KEYS[id(step)] = (step, json.dumps(step.to_json(), separators=(",", ":")))
    return got[1]


_CONSUMERS: Memo[dict[int, list[int]]] = Memo("consumers")
_PRODUCERS: Memo[dict[int, int]] = Memo("producers")
_KEY: Memo[str] = Memo("canonical_key")
# The tables that depend only on each stage's operations (see _same_ops).
_OP_TABLES = (_CONSUMERS, _PRODUCERS)


def _same_ops(a: Stage, b: Stage) -> bool:
    """Do the two stages produce the same operations (so read and are read the same way)?"""
    return a.op is b.op and a.origin is b.origin and (
        a.aliases is b.aliases or (len(a.aliases) == len(b.aliases)
                                   and all(map(operator.is_, a.aliases, b.aliases))))
