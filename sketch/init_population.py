"""Random annotation: turn sketches into complete, valid schedules (the search's initial population).

A sketch fixes a schedule's structure but leaves its numbers open. Each function here decides one
kind of number or annotation at random, State -> State, in Ansor's CPU order:

1. ``fill_tile_sizes`` (the draws live in ``split_sampling``): every placeholder split gets a
   factorisation of its extent drawn uniformly from all factorisations whose innermost factor is
   at most ``max_innermost_split_factor``, or,
   with ``SearchParams.imperfect_split_prob`` (much more often for extents that are not a multiple
   of the vector lanes, such as primes), tile sizes that need not divide it, drawn from sizes that
   suit registers and vectors, with a tail strategy for the partial tile (``sample_split``);
2. ``change_compute_location``: each movable stage goes to root, inline or a consumer's loop;
   then a pack that transposes gets its copy blocked by cache lines (``pack_block``);
3. ``annotate_parallel``: outer spatial loops of root stages are fused until they give every core
   enough work, then marked parallel;
4. ``annotate_auto_unroll``: stages with reductions get an ``auto_unroll_max_step`` pragma;
5. ``annotate_vectorize``: innermost spatial loops are fused up to the vector width and vectorized.

``sample_initial_population`` runs that pipeline on random sketches and keeps distinct states that
replay and lower. Lowering is the expensive part of that check, and whether it succeeds depends on
the schedule's structure (nested parallel loops, a stage attached where a reader runs outside the
loop), not on split lengths or unroll values, so ``lowers_cached`` remembers the answer per
structure (``structure_key``); the candidates the search returns are still lowered for real
(``lowers``), so a length that ever did matter could not slip through.
"""
from __future__ import annotations

import logging
import random
import weakref
from typing import Any, Callable, Sequence

from compute import expr as E
from compute.compute_dag import ComputeDAG
from compute.tensor import ComputeOp

from .loop_state import InvalidStepError, Memo, SplitRel, Stage, State, step_key
from .lower import check_lowers, lower
from .pack_block import block_transposing_packs
from .replay import carry_trace, replay
from .search_params import SearchParams
from .split_sampling import (divisors, imperfect_prob, is_placeholder_split, register_axes, register_tile,
                             sample_around, sample_split, split_tail)
from .transform_steps import AnnotationStep, FuseStep, PragmaStep, SplitStep

logger = logging.getLogger("ansor.search")

UNROLL_PRAGMA = "auto_unroll_max_step$"


def _default_params(params: "SearchParams | None") -> "SearchParams":
    if params is not None:
        return params
    return SearchParams()


# ---- validity -----------------------------------------------------------------------------------

def structure_key(state: State) -> tuple:
    """The state's steps with split lengths and pragma values left out: states with equal keys
    have the same stages, loops, attachments and annotations, only different numbers."""
    return state.memo(_STRUCTURE, _structure_key)


def _structure_key(state: State) -> tuple:
    parts: list[Any] = []
    for s in state.steps:
        if isinstance(s, SplitStep):
            parts.append(("SP", s.stage_id, s.iter_id, len(s.lengths), s.inner_to_outer))
        elif isinstance(s, PragmaStep):
            parts.append(("PR", s.stage_id, s.iter_id, s.pragma_type.split("$", 1)[0]))
        else:
            parts.append(step_key(s))  # its JSON: one string, its hash kept (a step's was not)
    return tuple(parts)


_STRUCTURE: Memo[tuple] = Memo("search.structure")  # structure_key
_LOWERS: Memo[bool] = Memo("search.lowers")  # lowers
# Of a sketch: the state of its steps before the first split (the same for every sample).
_BEFORE_FIRST_SPLIT: Memo[State] = Memo("search.before_first_split")
_REGISTER_AXES: Memo[dict] = Memo("search.register_axes")

# Per DAG (weakly held, so a finished task's table goes with its DAG): structure key -> lowers?
_STRUCTURE_LOWERS: "weakref.WeakKeyDictionary[ComputeDAG, dict[tuple, bool]]" = \
    weakref.WeakKeyDictionary()
_warned_errors: set[str] = set()


def _try_lower(state: State, check: Callable[[State], Any] = lower) -> bool:
    try:
        check(state)
        return True
    except InvalidStepError as e:
        logger.debug("state does not lower: %s", e)
        return False
    except Exception as e:  # noqa: BLE001 - a lowering bug must cost one candidate, not the run
        kind = type(e).__name__
        if kind not in _warned_errors:
            _warned_errors.add(kind)
            logger.warning("lowering raised %s (%s); such candidates are discarded", kind, e)
        return False


def lowers(state: State) -> bool:
    """Does ``state`` lower? Checked for real (once per state object)."""
    return state.memo(_LOWERS, _try_lower)


def lowers_cached(state: State) -> bool:
    """Does ``state`` lower, answered once per (DAG, structure): a fast filter for the population.

    Lowering fails only for structural reasons (nested parallel loops, a stage attached where one
    of its readers runs outside the loop, ...), never because of a split length; the returned
    candidates are still checked with ``lowers`` in case some length ever matters. A new
    structure is checked with ``check_lowers`` (no loop partitioning: it cannot fail).
    """
    ok = state.memoized(_LOWERS)
    if ok is not None:
        return ok
    table = _STRUCTURE_LOWERS.get(state.dag)
    if table is None:
        table = _STRUCTURE_LOWERS[state.dag] = {}
    key = structure_key(state)
    ok = table.get(key)
    if ok is None:
        ok = table[key] = _try_lower(state, check_lowers)
    return ok


# ---- stage facts --------------------------------------------------------------------------------

def is_compute(stage: Stage) -> bool:
    return isinstance(stage.op, ComputeOp) and stage.compute_at != "inline"


def is_tiled(stage: Stage) -> bool:
    """Split by the sketch (multi-level tiling, a followed split, rfactor): its loop structure
    and location belong to the sketch. Never a pack: the split of a transposing pack's copy is
    the annotation's (``pack_block``), and its location stays the search's to choose."""
    return (getattr(stage.op, "tag", None) != "pack"
            and any(isinstance(r, SplitRel) for r in stage.relations))


def has_reduce(stage: Stage) -> bool:
    return isinstance(stage.op, ComputeOp) and isinstance(stage.op.body, E.Reduce)


def needs_tiling(state: State, stage: Stage) -> bool:
    info = state.dag.info.get(stage.origin) if stage.origin is not None else None
    return bool(info is not None and info.needs_multi_level_tiling)


def attached_iters(state: State, sid: int) -> set[int]:
    """Persistent ids of the loops of stage ``sid`` that have other stages computed at them."""
    return {s.attach[1] for s in state.stages
            if s.compute_at == "iter" and s.attach is not None and s.attach[0] == sid}


# ---- 1. tile sizes (the draws themselves: split_sampling) -----------------------------------------

def fill_tile_sizes(state: State, rng: random.Random, params: "SearchParams | None" = None) -> State:
    """Choose the lengths of every placeholder split and replay (follow-splits follow). With
    ``register_tile_prob``, a tiled stage draws its register tile first (``register_tile``):
    the innermost rows and vector columns, the outer axes' innermost 1, the levels around them
    at random."""
    params = _default_params(params)
    steps = state.steps
    if not any(is_placeholder_split(s) for s in steps):
        return state
    first = next(i for i, s in enumerate(steps) if isinstance(s, SplitStep))
    # Everything before the first split is the same for every sample of this sketch.
    cur = state.memo(_BEFORE_FIRST_SPLIT, lambda s: replay(s.dag, s.steps[:first], verbatim=False))
    roles = state.memo(_REGISTER_AXES, register_axes)
    tiles: dict[int, tuple[int, int] | None] = {}
    lanes = params.max_vector_lanes or 8

    def choose(extent: int, step: SplitStep, at: State) -> tuple[tuple[int, ...], str]:
        if not is_placeholder_split(step):
            return step.lengths, step.tail
        role = roles.get((step.stage_id, step.iter_id))
        if role is not None and params.register_tile_prob > 0.0:  # no draw at 0: as before
            if step.stage_id not in tiles:
                tiles[step.stage_id] = (register_tile(rng, params)
                                        if rng.random() < params.register_tile_prob else None)
            tile = tiles[step.stage_id]
            if tile is not None:
                inner = min({"rows": tile[0], "cols": tile[1] * lanes, "outer": 1}[role],
                            params.max_innermost_split_factor)
                p = imperfect_prob(extent, params)
                if extent % inner and rng.random() >= p:
                    # An extent with good exact tiles (1024) mostly keeps them: the largest
                    # divisor below, if it is not much smaller (8 rows for 14; a prime keeps 14
                    # unless imperfect tiles are off).
                    d = max(x for x in divisors(extent) if x <= inner)
                    inner = d if 2 * d >= inner or p == 0.0 else inner
                lengths = sample_around(extent, len(step.lengths), inner, rng, params)
                return lengths, split_tail(at, step.stage_id, extent, lengths, rng, params, step.iter_id)
        return sample_split(at, step, extent, rng, params)

    return replay(state.dag, steps[first:], verbatim=False, base=cur, split_lengths=choose)


# ---- 2. compute location ------------------------------------------------------------------------

def compute_at_candidates(state: State, target: int) -> list[tuple[int, int]]:
    """(stage, loop position) pairs where a producer read only by ``target`` may be computed:
    the target's spatial loops outside its reductions, and when the target is itself computed
    at another stage, that stage's loops down to the attach point. Extent-1 loops are skipped
    (same as the loop outside them)."""
    out: list[tuple[int, int]] = []
    st = state.stages[target]
    for pos, lid in enumerate(st.leaves):
        it = st.iters[lid]
        if it.kind == "reduce":
            break
        if it.extent > 1:
            out.append((target, pos))
    if st.compute_at == "iter" and st.attach is not None:
        host, host_iter = st.attach
        hs = state.stages[host]
        for pos, lid in enumerate(hs.leaves):
            it = hs.iters[lid]
            if it.kind == "reduce":
                break
            if it.extent > 1:
                out.append((host, pos))
            if lid == host_iter:
                break
    return out


def change_compute_location(state: State, rng: random.Random,
                            params: "SearchParams | None" = None) -> State:
    """For each stage the sketch left at root untiled (padding, softmax parts, ...), last to
    first: keep it at root, inline it (if it has no reduction) or compute it at a loop of its
    single consumer, uniformly. A choice that does not apply leaves the stage where it is."""
    for sid in reversed(range(len(state.stages))):
        st = state.stages[sid]
        if not is_compute(st) or st.compute_at != "root" or is_tiled(st) or needs_tiling(state, st):
            continue
        consumers = state.effective_consumers(sid)
        if not consumers:
            continue  # an output
        options: list[Any] = ["root"]
        if not has_reduce(st) and st.op.tag != "pack":  # an inlined pack is the unpacked sketch, slower
            options.append("inline")
        if len(consumers) == 1:
            options.extend(compute_at_candidates(state, consumers[0]))
        choice = options[rng.randrange(len(options))]
        if choice == "root":
            continue
        try:
            if choice == "inline":
                state = state.compute_inline(sid)
            else:
                state = state.compute_at(sid, choice[0], choice[1])
        except InvalidStepError:
            continue
    return state


# ---- 3. parallel --------------------------------------------------------------------------------

def parallel_prefix(stage: Stage, start: int, attached: set[int], target: int) -> int:
    """How many loops from position ``start`` to fuse for parallelism: consecutive unannotated
    spatial loops until their product reaches ``target``, never past a reduction and never past a
    loop with stages computed at it (fusing beyond it would move them to a finer loop)."""
    n, prod = 0, 1
    for lid in stage.leaves[start:]:
        it = stage.iters[lid]
        if it.kind == "reduce" or it.annotation != "none":
            break
        n += 1
        prod *= it.extent
        if prod >= target or lid in attached:
            break
    return n


def annotate_parallel(state: State, rng: random.Random, params: "SearchParams | None" = None) -> State:
    """Fuse the outer spatial loops of every root stage until there are at least
    ``cores * parallel_extent_per_core`` iterations (or no more loops) and mark them parallel.
    Only root stages: a stage computed inside another's loop would nest parallel regions."""
    params = _default_params(params)
    target = params.cores() * params.parallel_extent_per_core
    for sid, st in enumerate(state.stages):
        if not is_compute(st) or st.compute_at != "root":
            continue
        if any(it.annotation == "parallel" for it in st.leaf_iters):
            continue
        n = parallel_prefix(st, 0, attached_iters(state, sid), target)
        prod = 1
        for lid in st.leaves[:n]:
            prod *= st.iters[lid].extent
        if n == 0 or prod == 1:
            continue
        if n > 1:
            state = FuseStep(sid, tuple(range(n))).apply(state)
        state = AnnotationStep(sid, 0, "parallel").apply(state)
    return state


# ---- 4. auto-unroll -----------------------------------------------------------------------------

def annotate_auto_unroll(state: State, rng: random.Random,
                         params: "SearchParams | None" = None) -> State:
    """A random ``auto_unroll_max_step`` from ``auto_unroll_steps`` on each stage with a
    reduction loop (the tiled compute stages): unrolling the small inner tile loops is what lets
    the register tile stay in registers. The pragma is recorded even for 0 so that mutation can
    change it."""
    params = _default_params(params)
    for sid, st in enumerate(state.stages):
        if not is_compute(st) or st.auto_unroll_max_step:
            continue
        if not any(st.iters[lid].kind == "reduce" for lid in st.leaves):
            continue
        value = params.auto_unroll_steps[rng.randrange(len(params.auto_unroll_steps))]
        state = PragmaStep(sid, 0, f"{UNROLL_PRAGMA}{value}").apply(state)
    return state


# ---- 5. vectorize -------------------------------------------------------------------------------

def annotate_vectorize(state: State, rng: random.Random, params: "SearchParams | None" = None) -> State:
    """Fuse a random number of the innermost spatial loops, keeping the product within the
    vector width, and vectorize the result; every non-inlined stage (accumulators, copy and
    consumer stages alike).

    Stops at a reduction, an annotated loop or a loop with stages computed at it. In a tiled
    stage only the innermost loop qualifies: the next one out walks a different row, so fusing
    it would give strided, not contiguous, vector accesses."""
    params = _default_params(params)
    cap = params.vector_width()
    for sid, st in enumerate(state.stages):
        if not is_compute(st) or any(it.annotation == "vectorize" for it in st.leaf_iters):
            continue
        attached = attached_iters(state, sid)
        tiled = is_tiled(st)
        # A pack's innermost loop is one block, the register tile's width: the copy writes it
        # whole (like the tile's own vectorized loop, it may span several registers).
        width_cap = max(cap, params.max_innermost_split_factor) if st.op.tag == "pack" else cap
        m, prod = 0, 1
        for lid in reversed(st.leaves):
            it = st.iters[lid]
            if lid in attached or it.kind == "reduce" or it.annotation != "none":
                break
            if prod * it.extent > width_cap:
                break
            prod *= it.extent
            m += 1
            if tiled:
                break
        if m == 0:
            continue
        k = rng.randint(1, m)
        n_leaves = len(st.leaves)
        first = n_leaves - k
        width = 1
        for lid in st.leaves[first:]:
            width *= st.iters[lid].extent
        if width == 1:
            continue  # one lane: nothing to vectorize
        if k > 1:
            state = FuseStep(sid, tuple(range(first, n_leaves))).apply(state)
        state = AnnotationStep(sid, first, "vectorize").apply(state)
    return state


# ---- the pipeline -------------------------------------------------------------------------------

AFTER_FILL = (change_compute_location, block_transposing_packs, annotate_parallel,
              annotate_auto_unroll, annotate_vectorize)
ANNOTATION_PIPELINE = (fill_tile_sizes,) + AFTER_FILL


def sample_state(sketch: State, rng: random.Random, params: "SearchParams | None" = None) -> State:
    """One random complete schedule from ``sketch``; raises InvalidStepError if a step does not
    apply (the caller discards the sample). Lowering is not checked here."""
    params = _default_params(params)
    filled = fill_tile_sizes(sketch, rng, params)
    state = filled
    for fn in AFTER_FILL:
        state = fn(state, rng, params)
    return carry_trace(filled, state)


def sample_initial_population(sketches: Sequence[State], n: int, rng: random.Random,
                              params: "SearchParams | None" = None,
                              stats: dict | None = None) -> list[State]:
    """Up to ``n`` distinct valid states, from sketches chosen uniformly at random.

    Samples that fail to replay or lower, and duplicates, are discarded. Sampling stops after
    ``init_max_attempts_factor * n`` attempts (small workloads have few distinct schedules); if
    fewer than ``init_min_population`` valid states were found by then it keeps going, up to four
    times as long. ``stats`` (if given) receives ``attempts``, ``invalid`` and ``duplicates``.
    """
    params = _default_params(params)
    out: list[State] = []
    seen: set[str] = set()
    attempts = invalid = dups = 0
    if not sketches or n <= 0:
        if stats is not None:
            stats.update(attempts=0, invalid=0, duplicates=0)
        return out
    budget = max(1, params.init_max_attempts_factor * n)
    floor = min(n, params.init_min_population)
    while len(out) < n:
        if attempts >= budget and (len(out) >= floor or attempts >= 4 * budget):
            break
        attempts += 1
        sketch = sketches[rng.randrange(len(sketches))]
        try:
            state = sample_state(sketch, rng, params)
        except InvalidStepError as e:
            invalid += 1
            logger.debug("discarded a sample: %s", e)
            continue
        if not lowers_cached(state):
            invalid += 1
            continue
        key = state.canonical_key()
        if key in seen:
            dups += 1
            continue
        seen.add(key)
        out.append(state)
    if len(out) < floor:
        # Mostly duplicates: the schedule space is just small (a tiny elementwise op). Mostly
        # invalid samples would point at the sketches or at lowering, and deserve a warning.
        (logger.warning if invalid > dups else logger.debug)(
            "only %d valid distinct initial states after %d attempts (%d invalid, %d duplicates)",
            len(out), attempts, invalid, dups)
    if stats is not None:
        stats.update(attempts=attempts, invalid=invalid, duplicates=dups)
    return out
