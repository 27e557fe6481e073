"""Mutations: small random edits of a complete schedule, the evolutionary search's only operator.

Every mutation edits one transform step of the state's history and replays the history, so a
mutated state is exactly what its steps say (and what a record of it replays to). Four kinds, with
the CPU weights of Ansor (``SearchParams.mutate_*_weight``):

- tile size (0.90): move a divisor factor from one level of a split to another, keeping the
  innermost level within ``max_innermost_split_factor``, or redraw one level from tile sizes
  that need not divide the extent (with the split's ``imperfect_prob``; the tail strategy
  follows); splits that follow it follow;
- compute location (0.05): move a compute_at of an untiled stage to another loop of the same
  target stage;
- auto-unroll (0.04): change an ``auto_unroll_max_step`` pragma's value;
- parallel (0.01): fuse more or fewer outer loops into the parallel loop.

A mutation that does not apply, or whose replay fails, raises ``InvalidStepError``; the search
then tries another parent.
"""
from __future__ import annotations

import random
from dataclasses import replace
from typing import Callable

from .init_population import UNROLL_PRAGMA, _default_params, compute_at_candidates, is_tiled, needs_tiling
from .loop_state import InvalidStepError, Memo, State
from .pack_block import block_transposing_packs, is_pack_block_split
from .replay import TRACE, replay, replay_edited
from .split_sampling import (divisors, imperfect_pool, imperfect_prob, sample_imperfect_lengths, split_tail,
                             tail_waste)
from .transform_steps import (AnnotationStep, CacheReadStep, CacheWriteStep, ComputeAtStep, PackStep,
                              FollowFusedSplitStep, FollowSplitStep, FuseStep, PragmaStep,
                              ReorderStep, RfactorStep, SplitStep, Step)
from .search_params import SearchParams


# ---- tile size ----------------------------------------------------------------------------------

def _split_parts(step: SplitStep) -> tuple[list[int], list[int]]:
    """All parts of a split, outermost first (the derived part included), and the indices of the
    parts a factor may move between: all of them when the lengths divide the extent exactly,
    otherwise only the given lengths (their product, hence the rounded-up derived part, stays)."""
    prod = 1
    for x in step.lengths:
        prod *= x
    n = len(step.lengths)
    exact = step.extent % prod == 0
    derived = step.extent // prod if exact else -(-step.extent // prod)
    if step.inner_to_outer:
        parts = [derived, *step.lengths]
        given = list(range(1, n + 1))
    else:
        parts = [*step.lengths, derived]
        given = list(range(n))
    return parts, (list(range(n + 1)) if exact else given)


def _tile_moves(step: SplitStep, cap: int) -> list[tuple[int, int, int]]:
    """Every (src, dst, factor) move of a factor > 1 of part src into part dst."""
    parts, movable = _split_parts(step)
    inner = len(parts) - 1
    moves = []
    for src in movable:
        if parts[src] <= 1:
            continue
        for f in divisors(parts[src])[1:]:
            for dst in movable:
                if dst != src and (dst != inner or parts[dst] * f <= cap):
                    moves.append((src, dst, f))
    return moves


def _tile_candidates(state: State) -> list[int]:
    # A transposing pack's split is one cache line, a machine fact (module pack_block).
    return [i for i, s in enumerate(state.steps)
            if isinstance(s, SplitStep) and s.extent > 1 and any(x > 1 for x in _split_parts(s)[0])
            and not is_pack_block_split(state, i)]


def _imperfect_move(state: State, i: int, step: SplitStep, rng: random.Random,
                    params: SearchParams) -> SplitStep | None:
    """``step`` with one level's length redrawn from the imperfect tile sizes (their product at
    most the extent, need not divide it) and the tail strategy that goes with the new lengths."""
    cap = params.max_innermost_split_factor
    lanes = params.max_vector_lanes or 8
    pool = imperfect_pool(lanes)
    n = len(step.lengths)
    level = rng.randrange(n)
    rest = 1
    for k, x in enumerate(step.lengths):
        if k != level:
            rest *= x
    options = [v for v in pool if v != step.lengths[level] and rest * v <= step.extent
               and (level != n - 1 or v <= cap)]
    # Within the waste bound when some are: a level redrawn at random mostly leaves a grid that
    # overshoots the extent by a large share (module init_population, tail_waste).
    options = [v for v in options if tail_waste(step.extent, rest * v) <= params.max_tail_waste] or options
    if options and rng.random() < 0.5:
        lengths = step.lengths[:level] + (options[rng.randrange(len(options))],) + step.lengths[level + 1:]
    else:  # a fresh draw of every level: the way out of a split whose other levels fill the extent
        lengths = sample_imperfect_lengths(step.extent, n, cap, lanes, rng, params.max_tail_waste)
        if lengths == step.lengths:
            return None
    trace = state.memoized(TRACE) or {}
    at = trace.get(i, state)  # the state the split applies to (its stage ids)
    return replace(step, lengths=lengths,
                   tail=split_tail(at, step.stage_id, step.extent, lengths, rng, params, step.iter_id))


def mutate_tile_size(state: State, rng: random.Random, params: "SearchParams | None" = None) -> State:
    """Move one random factor between two levels of one random split, or (with the split's
    ``imperfect_prob``) give one level a length that need not divide the extent."""
    params = _default_params(params)
    cap = params.max_innermost_split_factor
    cands = _tile_candidates(state)
    rng.shuffle(cands)
    for i in cands:
        step = state.steps[i]
        assert isinstance(step, SplitStep)
        p = imperfect_prob(step.extent, params) if step.inner_to_outer else 0.0
        if p > 0.0 and rng.random() < p:
            new = _imperfect_move(state, i, step, rng, params)
            if new is not None:
                return replay_edited(state, i, state.steps[:i] + (new,) + state.steps[i + 1:])
        moves = _tile_moves(step, cap)
        if not moves:
            continue
        src, dst, f = moves[rng.randrange(len(moves))]
        parts, _ = _split_parts(step)
        parts[src] //= f
        parts[dst] *= f
        lengths = tuple(parts[1:]) if step.inner_to_outer else tuple(parts[:-1])
        new = replace(step, lengths=lengths)
        return replay_edited(state, i, state.steps[:i] + (new,) + state.steps[i + 1:])
    raise InvalidStepError("no split whose tile sizes can change")


# ---- auto-unroll --------------------------------------------------------------------------------

def _unroll_candidates(state: State) -> list[int]:
    return [i for i, s in enumerate(state.steps)
            if isinstance(s, PragmaStep) and s.pragma_type.startswith(UNROLL_PRAGMA)]


def mutate_auto_unroll(state: State, rng: random.Random, params: "SearchParams | None" = None) -> State:
    """Give one auto-unroll pragma another value from ``auto_unroll_steps``."""
    params = _default_params(params)
    cands = _unroll_candidates(state)
    if not cands:
        raise InvalidStepError("no auto-unroll pragma")
    i = cands[rng.randrange(len(cands))]
    step = state.steps[i]
    assert isinstance(step, PragmaStep)
    others = [v for v in params.auto_unroll_steps if f"{UNROLL_PRAGMA}{v}" != step.pragma_type]
    if not others:
        raise InvalidStepError("a single auto-unroll value: nothing to change")
    value = others[rng.randrange(len(others))]
    new = PragmaStep(step.stage_id, step.iter_id, f"{UNROLL_PRAGMA}{value}")
    return replay_edited(state, i, state.steps[:i] + (new,) + state.steps[i + 1:])


# ---- compute location ---------------------------------------------------------------------------

def _compute_at_candidates(state: State) -> list[int]:
    """ComputeAt steps of stages the sketch did not tile: a tiled stage's location is its fusion
    level, which the sketches enumerate, and moving it would break the tile correspondence."""
    out = []
    for i, s in enumerate(state.steps):
        if not isinstance(s, ComputeAtStep) or not 0 <= s.stage_id < len(state.stages):
            continue
        st = state.stages[s.stage_id]
        if is_tiled(st) or needs_tiling(state, st):
            continue
        out.append(i)
    return out


def mutate_compute_location(state: State, rng: random.Random,
                            params: "SearchParams | None" = None) -> State:
    """Compute one untiled stage at a different loop of the stage it is computed at."""
    cands = _compute_at_candidates(state)
    rng.shuffle(cands)
    for i in cands:
        step = state.steps[i]
        assert isinstance(step, ComputeAtStep)
        before = replay_edited(state, i, state.steps[:i])
        # The loops allowed are those of its reader (or of the stage the reader is computed at,
        # down to the reader's attach point, not past it: the reader would run outside).
        readers = before.effective_consumers(step.stage_id)
        base = readers[0] if len(readers) == 1 else step.target_stage_id
        positions = [p for t, p in compute_at_candidates(before, base)
                     if t == step.target_stage_id and p != step.target_iter_id]
        if not positions:
            continue
        pos = positions[rng.randrange(len(positions))]
        new = ComputeAtStep(step.stage_id, step.target_stage_id, pos)
        return replay(state.dag, (new,) + state.steps[i + 1:], verbatim=False, base=before)
    raise InvalidStepError("no compute_at that can move")


# ---- parallel -----------------------------------------------------------------------------------

def _parallel_candidates(state: State) -> list[int]:
    return [i for i, s in enumerate(state.steps)
            if isinstance(s, AnnotationStep) and s.annotation == "parallel"]


_STAGE_INSERTING = (CacheWriteStep, CacheReadStep, RfactorStep, PackStep)


def _shift_positions(step: Step, sid: int, pivot: int, old_n: int, new_n: int) -> Step:
    """``step`` (after a parallel fuse of ``old_n`` loops at position ``pivot`` of stage ``sid``)
    rewritten for a fuse of ``new_n`` loops: positions past the fused loop move by
    ``old_n - new_n``; a position that now falls inside the fused loop makes the step invalid."""
    delta = old_n - new_n

    def pos(p: int) -> int:
        if p <= pivot:
            return p
        if p + delta <= pivot:  # the loop it named is now part of the parallel loop
            raise InvalidStepError("a later step uses a loop the new parallel fuse absorbs")
        return p + delta

    if isinstance(step, _STAGE_INSERTING):
        raise InvalidStepError("stages inserted after the parallel fuse: positions unknown")
    if isinstance(step, ComputeAtStep):
        if step.target_stage_id == sid:
            return ComputeAtStep(step.stage_id, sid, pos(step.target_iter_id))
        return step
    if step.stage_id != sid:
        return step
    if isinstance(step, SplitStep):
        return replace(step, iter_id=pos(step.iter_id))
    if isinstance(step, FollowSplitStep):
        return replace(step, iter_id=pos(step.iter_id))
    if isinstance(step, FollowFusedSplitStep):
        return FollowFusedSplitStep(sid, pos(step.iter_id), step.src_step_ids, step.level,
                                    step.factor_or_nparts)
    if isinstance(step, FuseStep):
        return FuseStep(sid, tuple(pos(p) for p in step.fused_ids))
    if isinstance(step, ReorderStep):
        return ReorderStep(sid, tuple(pos(p) for p in step.after_ids))
    if isinstance(step, AnnotationStep):
        return AnnotationStep(sid, pos(step.iter_id), step.annotation)
    if isinstance(step, PragmaStep):
        return PragmaStep(sid, pos(step.iter_id), step.pragma_type)
    return step


def mutate_parallel(state: State, rng: random.Random, params: "SearchParams | None" = None) -> State:
    """Change how many outer loops are fused into one parallel loop (coarser or finer chunks)."""
    cands = _parallel_candidates(state)
    rng.shuffle(cands)
    steps = state.steps
    for a in cands:
        ann = steps[a]
        assert isinstance(ann, AnnotationStep)
        sid, pivot = ann.stage_id, ann.iter_id
        prev = steps[a - 1] if a > 0 else None
        if (isinstance(prev, FuseStep) and prev.stage_id == sid and prev.fused_ids
                and prev.fused_ids[0] == pivot
                and tuple(prev.fused_ids) == tuple(range(pivot, pivot + len(prev.fused_ids)))):
            start, old_n = a - 1, len(prev.fused_ids)
        else:
            start, old_n = a, 1
        before = replay_edited(state, start, steps[:start])
        st = before.stages[sid]
        max_n = 0
        for lid in st.leaves[pivot:]:
            it = st.iters[lid]
            if it.kind == "reduce" or it.annotation != "none":
                break
            max_n += 1
        choices = [k for k in range(1, max_n + 1) if k != old_n]
        if not choices:
            continue
        new_n = choices[rng.randrange(len(choices))]
        head: tuple[Step, ...] = ()
        if new_n > 1:
            head = (FuseStep(sid, tuple(range(pivot, pivot + new_n))),)
        head += (AnnotationStep(sid, pivot, "parallel"),)
        tail = tuple(_shift_positions(s, sid, pivot, old_n, new_n) for s in steps[a + 1:])
        out = replay(state.dag, head + tail, verbatim=False, base=before)
        if not any(it.annotation == "parallel" for it in out.stages[sid].leaf_iters):
            raise InvalidStepError("the parallel loop was re-annotated by a later step")
        return out
    raise InvalidStepError("no parallel loop whose fusion can change")


# ---- choosing a mutation ------------------------------------------------------------------------

Mutation = Callable[[State, random.Random, "SearchParams"], State]

# (name, function, SearchParams weight field, "has something to mutate" test)
MUTATIONS: tuple[tuple[str, Mutation, str, Callable[[State], bool]], ...] = (
    ("tile_size", mutate_tile_size, "mutate_tile_size_weight", lambda s: bool(_tile_candidates(s))),
    ("compute_location", mutate_compute_location, "mutate_compute_location_weight",
     lambda s: bool(_compute_at_candidates(s))),
    ("auto_unroll", mutate_auto_unroll, "mutate_auto_unroll_weight",
     lambda s: bool(_unroll_candidates(s))),
    ("parallel", mutate_parallel, "mutate_parallel_weight", lambda s: bool(_parallel_candidates(s))),
)


# The names of the MUTATIONS that have something to act on in a state.
_APPLICABLE: Memo[frozenset[str]] = Memo("search.mutations")


def applicable_mutations(state: State, params: "SearchParams") -> list[tuple[str, Mutation, float]]:
    """The mutations that have something to act on in ``state``, with their weights (which ones
    apply is cached on the state: the search draws many children from the same parent)."""
    kinds = state.memo(_APPLICABLE, lambda s: frozenset(
        name for name, _, _, has in MUTATIONS if has(s)))
    return [(name, fn, getattr(params, w)) for name, fn, w, _ in MUTATIONS
            if name in kinds and getattr(params, w) > 0]


def mutate(state: State, rng: random.Random, params: "SearchParams | None" = None) -> tuple[State, str]:
    """Apply one mutation, chosen with the configured weights among those that apply to
    ``state``; returns (child, mutation name). Raises InvalidStepError if none applies or the
    chosen one produced an invalid state."""
    params = _default_params(params)
    options = applicable_mutations(state, params)
    if not options:
        raise InvalidStepError("nothing to mutate")
    total = sum(w for _, _, w in options)
    r = rng.random() * total
    chosen = options[-1]
    for option in options:
        r -= option[2]
        if r < 0:
            chosen = option
            break
    name, fn, _ = chosen
    # A pack sampled with one lane was left unblocked; a new tile can give it lanes (pack_block).
    return block_transposing_packs(fn(state, rng, params), rng, params), name
