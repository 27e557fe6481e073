"""Replay: rebuild the state a list of transform steps produces on a DAG (the one way to do it).

Two callers need two readings of a step list, chosen by ``verbatim``:

- ``verbatim=True`` (records, the builder, ``ComputeDAG.replay``): the steps are applied exactly as
  given, so the state's steps are the record's steps and writing it back gives the same line.
- ``verbatim=False`` (the search, and the cost model reading records like the search's own
  states): every SplitStep's recorded ``extent`` is set to the extent the split really sees, since
  an edit upstream (an rfactor split's lengths decide the factored stage's extents) can change it
  and the canonical key and the next mutation must see the true value. The replay also records
  the state's *trace*, the states just before each of its splits, so that ``replay_edited`` can
  replay a mutated copy from the parent's state before the edit instead of from scratch
  (cache_write, inlining and the earlier splits are not redone). States are immutable and share
  their stages, so a trace costs little and goes away with the population.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, Sequence

from compute.compute_dag import ComputeDAG

from .loop_state import InvalidStepError, Memo, State
from .transform_steps import SplitStep, Step

# split step index -> the state just before that split (see the module docstring)
TRACE: Memo[dict[int, State]] = Memo("replay.trace")

# (extent the split sees, the step, the state it applies to) -> (lengths, tail strategy)
SplitLengths = Callable[[int, SplitStep, State], "tuple[tuple[int, ...], str]"]


def replay(dag: ComputeDAG, steps: Iterable[Step], *, verbatim: bool = True,
           base: State | None = None, split_lengths: SplitLengths | None = None) -> State:
    """Apply ``steps`` to ``base`` (default: the DAG's initial state); raises InvalidStepError.

    ``verbatim`` chooses the reading (module docstring). The other options need
    ``verbatim=False``: ``base`` is a state built by such a replay whose steps come first,
    ``split_lengths(extent, step, state)`` chooses the lengths and tail strategy of every split
    from the extent it sees (tile-size filling; return ``step.lengths, step.tail`` to keep them)."""
    steps = tuple(steps)
    if verbatim:
        if base is not None or split_lengths is not None:
            raise ValueError("replay: base and split_lengths need verbatim=False")
        state = State.initial(dag)
        for s in steps:
            state = s.apply(state)
        return state
    if base is None:
        return _run(State.initial(dag), steps, 0, {}, split_lengths)
    return _run(base, base.steps + steps, len(base.steps), dict(base.memoized(TRACE) or {}),
                split_lengths)


def fit_lengths(extent: int, step: SplitStep, state: State) -> tuple[tuple[int, ...], str]:
    """A ``SplitLengths`` for steps made on other shapes (a similar task's schedule): lengths whose
    product fits ``extent`` are kept; otherwise the largest is halved until they fit (a split may
    not ask for more than its loop has)."""
    lengths = list(step.lengths)
    while lengths and _prod(lengths) > extent:
        k = max(range(len(lengths)), key=lambda i: lengths[i])
        lengths[k] = max(1, lengths[k] // 2)
    return tuple(lengths), step.tail


def _prod(xs: Sequence[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def replay_edited(parent: State, index: int, steps: Sequence[Step]) -> State:
    """Replay ``steps``, whose first ``index`` steps are ``parent``'s, starting from the parent's
    recorded state before its last split at or before ``index`` (from scratch without one).
    Reads as ``verbatim=False``."""
    steps = tuple(steps)
    trace = parent.memoized(TRACE) or {}
    at = max((j for j in trace if j <= index), default=None)
    if at is None:
        return _run(State.initial(parent.dag), steps, 0, {})
    return _run(trace[at], steps, at, {j: s for j, s in trace.items() if j <= at})


def carry_trace(src: State, dst: State) -> State:
    """``dst`` extends ``src`` by steps that split nothing: ``src``'s trace is ``dst``'s too."""
    trace = src.memoized(TRACE)
    if trace is not None and dst is not src:
        dst.memo(TRACE, lambda _: trace)
    return dst


def _run(state: State, steps: Sequence[Step], start: int, trace: dict[int, State],
         split_lengths: SplitLengths | None = None) -> State:
    """Apply ``steps[start:]`` to ``state`` (which holds ``steps[:start]``), recording the trace,
    with every split's extent set to the one it sees (and its lengths from ``split_lengths``)."""
    for i in range(start, len(steps)):
        step = steps[i]
        if isinstance(step, SplitStep):
            trace[i] = state
            ext = _leaf_extent(state, step.stage_id, step.iter_id)
            lengths, tail = (split_lengths(ext, step, state) if split_lengths is not None
                             else (step.lengths, step.tail))
            if ext != step.extent or lengths != step.lengths or tail != step.tail:
                step = replace(step, extent=ext, lengths=lengths, tail=tail)
        state = step.apply(state)
    # The replay that builds a state knows its prefix states; any trace of a state is as good
    # as another (each maps split indices to states holding exactly the steps before them).
    state.memo(TRACE, lambda _: trace)
    return state


def _leaf_extent(state: State, sid: int, pos: int) -> int:
    if not 0 <= sid < len(state.stages):
        raise InvalidStepError(f"stage index {sid} out of range")
    st = state.stages[sid]
    if not 0 <= pos < len(st.leaves):
        raise InvalidStepError(f"stage {st.name} has no loop at position {pos}")
    return st.iters[st.leaves[pos]].extent
