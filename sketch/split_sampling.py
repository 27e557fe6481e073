"""Drawing the lengths of one split: exact factorisations, imperfect tiles with a tail strategy,
and register-tile sizes (step 1 of the random annotation, ``init_population.fill_tile_sizes``,
and the tile-size mutation draw from here).

Exact lengths are drawn uniformly over every factorisation of the extent whose innermost part is
at most ``max_innermost_split_factor``; with ``SearchParams.imperfect_split_prob`` (much more often
for extents that are not a multiple of the vector lanes, such as primes) the lengths need not
divide the extent, are drawn from sizes that suit registers and vectors, and the partial tile gets
a tail strategy (``split_tail``).
"""
from __future__ import annotations

import math
import random
from functools import lru_cache
from typing import Sequence

from compute.tensor import ComputeOp

from .loop_state import InvalidStepError, State
from .search_params import SearchParams
from .transform_steps import SplitStep, Step


def is_placeholder_split(step: Step) -> bool:
    """A sketch's split whose lengths are still to be chosen (all lengths 1)."""
    return isinstance(step, SplitStep) and all(x == 1 for x in step.lengths)


@lru_cache(maxsize=1024)
def divisors(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


@lru_cache(maxsize=1024)
def factorizations(extent: int, n_parts: int, max_innermost: int) -> tuple[tuple[int, ...], ...]:
    """Every ordered tuple of ``n_parts`` positive integers (outermost first) whose product is
    ``extent`` and whose last (innermost) entry is at most ``max_innermost``.

    Memoised: the tables are small (a 1024 extent in 4 parts has 286 tuples) and shared by every
    split of the same extent in the whole search."""
    if n_parts == 1:
        return ((extent,),) if extent <= max_innermost else ()
    out: list[tuple[int, ...]] = []
    for d in divisors(extent):
        for rest in factorizations(extent // d, n_parts - 1, max_innermost):
            out.append((d,) + rest)
    return tuple(out)


def sample_split_lengths(extent: int, n_lengths: int, inner_to_outer: bool, max_innermost: int,
                         rng: random.Random) -> tuple[int, ...]:
    """Lengths for a split of ``extent`` into ``n_lengths + 1`` parts, uniform over all exact
    factorisations (drawing level by level instead would favour some shapes over others)."""
    options = factorizations(extent, n_lengths + 1, max(1, max_innermost))
    if not options:  # cannot happen with max_innermost >= 1 (all-outer is always allowed)
        raise InvalidStepError(f"no factorisation of {extent} with innermost <= {max_innermost}")
    parts = options[rng.randrange(len(options))]
    return parts[1:] if inner_to_outer else parts[:-1]


# Tile sizes an imperfect split draws from (besides multiples of the vector lanes): the register
# tile rows and column blocks hand-written kernels use (6x16, 4x24, 14 ...), cache blocks.
IMPERFECT_TILE_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64, 96,
                        128, 192, 256)


def tail_waste(extent: int, tile: int) -> float:
    """The share of extra points a grid of ``tile``-sized parts adds over ``extent``
    (``ceil(extent / tile) * tile / extent - 1``): computed and thrown away when the tail shifts
    or pads, run through the partial tile's tests when it peels."""
    return -(-extent // tile) * tile / extent - 1.0


def _repair_waste(extent: int, inner_first: list[int], max_waste: float) -> list[int]:
    """``inner_first`` (innermost first) with one outer level's length moved to the nearest value
    (by ratio) whose grid wastes at most ``max_waste``, the innermost (register) level kept: a
    GEMM's 1021 rows in tiles of 14 x 8 = 112 compute 9.7% more rows than they keep, 13 x 8 only
    1.9%. Unchanged if it already fits or no single level can fix it."""
    prod = math.prod(inner_first)
    if len(inner_first) < 2 or tail_waste(extent, prod) <= max_waste:
        return inner_first
    best: tuple[float, int, int] | None = None
    for level in range(1, len(inner_first)):
        old = inner_first[level]
        rest = prod // old
        for v in range(1, extent // rest + 1):
            if tail_waste(extent, rest * v) <= max_waste:
                d = abs(math.log(v / old))
                if best is None or d < best[0]:
                    best = (d, level, v)
    if best is None:
        return inner_first
    out = list(inner_first)
    out[best[1]] = best[2]
    return out


def imperfect_prob(extent: int, params: "SearchParams") -> float:
    """The chance a split of ``extent`` draws tiles that need not divide it: high for extents
    whose exact factorisations are poor tiles (not a multiple of the vector lanes: 1000, 197, a
    prime), low otherwise (1024 has good exact tiles; imperfect ones still find 6x16 kernels)."""
    lanes = params.max_vector_lanes or 8
    if extent <= lanes:
        return 0.0  # one vector or less: nothing to gain from a partial tile
    if extent % lanes == 0:
        return params.imperfect_split_prob
    if not any(4 <= d <= 64 for d in divisors(extent)):
        # A prime (or 2 x a prime): its exact tiles are 1, 2 or the whole extent, all poor.
        return max(params.awkward_imperfect_split_prob, 0.95 if params.awkward_imperfect_split_prob else 0.0)
    return params.awkward_imperfect_split_prob


def imperfect_pool(lanes: int) -> list[int]:
    """The sizes an imperfect split's parts are drawn from: IMPERFECT_TILE_SIZES and whole
    vectors of ``lanes``."""
    return sorted(set(IMPERFECT_TILE_SIZES) | {lanes * k for k in (1, 2, 3, 4, 6, 8)})


# Draws an imperfect split makes to find lengths within the waste bound (each repaired by
# ``_repair_waste``); if none fits, the least wasteful is kept.
MAX_TAIL_DRAWS = 8


def sample_imperfect_lengths(extent: int, n_lengths: int, max_innermost: int, lanes: int,
                             rng: random.Random, max_waste: float = 0.25) -> tuple[int, ...]:
    """Inner lengths (outer first) of a split into ``n_lengths + 1`` parts that need not divide
    ``extent``: innermost first, each from IMPERFECT_TILE_SIZES and multiples of ``lanes``, their
    product at most ``extent`` (the outer part is rounded up); an outer level is then moved to the
    nearest length whose rounded-up grid is at most ``max_waste`` larger than the extent
    (``_repair_waste``), drawing again (MAX_TAIL_DRAWS) when no level can."""
    pool = imperfect_pool(lanes)
    best: tuple[float, list[int]] | None = None
    for _ in range(MAX_TAIL_DRAWS):
        out: list[int] = []
        prod = 1
        for level in range(n_lengths):
            cap = max_innermost if level == 0 else extent
            options = [v for v in pool if v <= cap and prod * v <= extent]
            if level == 0 and rng.random() < 0.5:
                # The innermost part is the one vectorization takes: whole vectors, half the time.
                options = [v for v in options if v % lanes == 0] or options
            v = options[rng.randrange(len(options))]
            out.append(v)
            prod *= v
        out = _repair_waste(extent, out, max_waste)
        waste = tail_waste(extent, math.prod(out))
        if best is None or waste < best[0]:
            best = (waste, out)
        if waste <= max_waste:
            break
    assert best is not None
    return tuple(reversed(best[1]))


def split_tail(state: State, stage_id: int, extent: int, lengths: Sequence[int],
               rng: random.Random, params: "SearchParams", iter_id: int | None = None) -> str:
    """The tail strategy of a split with these lengths: "guard" when they divide the extent (the
    code is as without tails), else "shift" (stages without a reduction, with
    ``shift_tail_prob``), "pad" (a spatial loop ``iter_id`` of a stage with a reduction - the
    accumulator a cache_write makes - with ``pad_tail_prob``) or "peel"."""
    prod = 1
    for x in lengths:
        prod *= x
    if extent % prod == 0:
        return "guard"
    st = state.stages[stage_id] if 0 <= stage_id < len(state.stages) else None
    op = st.op if st is not None else None
    pure = isinstance(op, ComputeOp) and not op.reduce_axes
    if pure:
        return "shift" if rng.random() < params.shift_tail_prob else "peel"
    spatial = (st is not None and iter_id is not None and 0 <= iter_id < len(st.leaves)
               and st.iters[st.leaves[iter_id]].kind == "spatial")
    return "pad" if spatial and rng.random() < params.pad_tail_prob else "peel"


def sample_split(state: State, step: SplitStep, extent: int, rng: random.Random,
                 params: "SearchParams") -> tuple[tuple[int, ...], str]:
    """Lengths and tail strategy for a placeholder split of ``extent`` (module docstring, 1)."""
    cap = params.max_innermost_split_factor
    n = len(step.lengths)
    p = imperfect_prob(extent, params) if step.inner_to_outer else 0.0
    if p > 0.0 and rng.random() < p:  # no draw at 0: the search is then exactly as before
        lengths = sample_imperfect_lengths(extent, n, cap, params.max_vector_lanes or 8, rng,
                                           params.max_tail_waste)
        return lengths, split_tail(state, step.stage_id, extent, lengths, rng, params, step.iter_id)
    return sample_split_lengths(extent, n, step.inner_to_outer, cap, rng), "guard"


def register_axes(state: State) -> dict[tuple[int, int], str]:
    """The placeholder splits of multi-level tiled stages by role in the register tile, keyed by
    (stage, loop position): a stage's last multi-level spatial split ("cols", the axis the tile
    vectorizes: N of a GEMM, the output channels of a conv), the one before it ("rows": M, the
    conv's width) and the others ("outer": batch, height). Reductions split into fewer levels."""
    by_stage: dict[int, list[SplitStep]] = {}
    for s in state.steps:
        if is_placeholder_split(s) and s.inner_to_outer and len(s.lengths) >= 2:
            by_stage.setdefault(s.stage_id, []).append(s)
    roles: dict[tuple[int, int], str] = {}
    for sid, splits in by_stage.items():
        if len(splits) < 2:
            continue
        for k, s in enumerate(splits):
            roles[(sid, s.iter_id)] = ("cols" if k == len(splits) - 1
                                       else "rows" if k == len(splits) - 2 else "outer")
    return roles


def register_tile(rng: random.Random, params: "SearchParams") -> tuple[int, int]:
    """(rows, vectors) of a register tile that fills the vector registers: 1 or 2 vectors wide
    (up to ``max_vector_registers``), as many rows as leave 4 registers for the B vectors and
    broadcasts, or down to half that (14 x 2 or 28 x 1 zmm on AVX-512; 6 x 2 or 12 x 1 ymm on
    AVX2's 16)."""
    regs = params.num_vector_registers or 16
    vecs = rng.randint(1, max(1, min(2, params.max_vector_registers)))
    top = max(1, (regs - 4) // vecs)
    return rng.randint(max(1, top // 2), top), vecs


def sample_around(extent: int, n_lengths: int, innermost: int, rng: random.Random,
                  params: "SearchParams") -> tuple[int, ...]:
    """Inner lengths (outer first) of a split into ``n_lengths + 1`` parts whose innermost is
    ``innermost``: an exact factorisation of the rest when there is one (and the split's
    ``imperfect_prob`` does not draw an imperfect one), else lengths from the imperfect pool
    around it, within the waste bound when one level can fix it (``_repair_waste``)."""
    innermost = max(1, min(innermost, extent))
    if n_lengths == 1:
        return (innermost,)
    if extent % innermost == 0 and rng.random() >= imperfect_prob(extent, params):
        options = factorizations(extent // innermost, n_lengths, extent)
        parts = options[rng.randrange(len(options))]
        return tuple(parts[1:]) + (innermost,)
    pool = imperfect_pool(params.max_vector_lanes or 8)
    out = [innermost]
    prod = innermost
    for _ in range(n_lengths - 1):
        options = [v for v in pool if prod * v <= extent] or [1]
        v = options[rng.randrange(len(options))]
        out.append(v)
        prod *= v
    return tuple(reversed(_repair_waste(extent, out, params.max_tail_waste)))
