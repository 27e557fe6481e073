"""A reasonable schedule for a subgraph nobody tuned: rule-based, deterministic, no measuring.

The naive default loop nest (one scalar thread, no tiling) takes seconds per ResNet conv. Here
the task's first sketch (multi-level tiling ``SSRSRS`` with a cache-write or a fused consumer,
what the search starts from) gets fixed numbers instead of random ones:

* the innermost spatial tile is a register tile (``_register_tile``): columns of the last
  spatial axis (output channels / columns) vectorized, up to two registers wide, rows of the
  axis before it unrolled, sized so the accumulators fit the machine's vector registers
  (``HardwareParams``: 14 ymm of AVX2's 16, more with AVX-512) and cover the FMA latency;
* the last reduction axis (input channels, ``k``) is blocked by up to 16 inside, the rest outside;
* stages the sketch left untiled are inlined when they are elementwise, except zero padding,
  which stays a buffer (inlined, it puts a bounds test and a select on every multiply-add),
  and reductions stay at root;
* matrix products run their column tiles outermost (``_columns_first``), so each thread keeps
  one column panel of the weight in cache;
* outer loops are fused and run in parallel, inner loops vectorized, and the tiled stages fully
  unrolled up to 512 steps (the register tile stays in registers), with the search's
  annotation passes and a fixed seed.

If that state does not lower, a few random samples of the sketches (fixed seed) are tried, then
the plain default schedule; ``untuned_schedule`` says which it used.

It lives at the top of ``ansor`` (it needs only ``sketch`` and the host's ``measure.target``), not
in ``ansor.graph``: the compiled network schedules untuned groups with it, the layout transforms
are built with it, and every search-policy tuner measures it first in a task's first round
(``tuning_loop.UntunedFirst``) - a mechanism below all three, not one of them reaching into
another.
"""
from __future__ import annotations

import dataclasses
import random

from compute.compute_dag import ComputeDAG
from compute.expr import Select
from compute.expr_walk import post_order
from measure.target import host_hardware_params
from sketch.hardware import HardwareParams
from sketch.init_population import (annotate_auto_unroll, annotate_parallel,
                                    annotate_vectorize, divisors, has_reduce, is_compute, is_placeholder_split,
                                    is_tiled, lowers, needs_tiling, sample_initial_population)
from sketch.loop_state import InvalidStepError, State
from sketch.pack_block import block_transposing_packs
from sketch.replay import replay
from sketch.search_policy import SearchParams
from sketch.sketch_rules import generate_sketches
from sketch.transform_steps import ReorderStep, SplitStep


def _largest_divisor(n: int, cap: int) -> int:
    return max(d for d in divisors(n) if d <= max(1, cap))


@dataclasses.dataclass(frozen=True)
class _Tiles:
    """Split lengths chosen for one tiled stage: axis name -> register-tile length, for spatial
    and reduction axes, and the last spatial axis (the vectorized one)."""

    spatial: dict[str, int]
    reduce: dict[str, int]
    last: str | None


def _register_tile(cols_extent: int, rows_extent: int, hw: HardwareParams, max_vec: int) -> tuple[int, int]:
    """(rows, columns) of the register tile: columns vectorized on the last spatial axis, rows
    unrolled on the one before it (at most 8). Per reduction step the micro-kernel loads one
    vector per column register and broadcasts one value per row, then does rows x registers
    multiply-adds; it runs at full speed when the multiply-adds outnumber the loads and there
    are enough independent accumulators to cover the FMA latency (2 pipes x 4 cycles). The
    accumulators must fit the machine's registers with two to spare (a column vector can be
    re-read from L1 as a memory operand; more spilling stalls). Among tiles that fit: the best
    estimated throughput, then the most accumulators, then the widest."""
    lanes = hw.vector_lanes
    budget = max(1, hw.num_vector_registers - 2)
    best: tuple[tuple, tuple[int, int]] | None = None
    for cols in divisors(cols_extent):
        if cols > max_vec:
            continue
        regs = -(-cols // lanes)
        rows = _largest_divisor(rows_extent, min(8, budget // regs)) if regs <= budget else 1
        acc = rows * regs
        fill = cols / (regs * lanes)  # lanes doing work in the column registers
        speed = min(acc, 8) / 8 * min(1.0, acc / (rows + regs)) * fill
        score = (round(speed, 3), acc, cols)
        if best is None or score > best[0]:
            best = (score, (rows, cols))
    return best[1] if best is not None else (1, 1)


def _plan(stage, hw: HardwareParams, max_vec: int) -> _Tiles:
    """The untuned tile sizes of one tiled stage (see the module docstring)."""
    spatial = [stage.iters[r] for r in range(stage.n_root) if stage.iters[r].kind == "spatial"]
    reduce_ = [stage.iters[r] for r in range(stage.n_root) if stage.iters[r].kind == "reduce"]
    inner: dict[str, int] = {it.name: 1 for it in spatial}
    if spatial:
        rows_ext = spatial[-2].extent if len(spatial) > 1 else 1
        rows, cols = _register_tile(spatial[-1].extent, rows_ext, hw, max_vec)
        inner[spatial[-1].name] = cols
        if len(spatial) > 1:
            inner[spatial[-2].name] = rows
    red = {it.name: 1 for it in reduce_}
    if reduce_:
        red[reduce_[-1].name] = _largest_divisor(reduce_[-1].extent, 16)
    return _Tiles(inner, red, spatial[-1].name if spatial else None)


def _fill(sketch: State, params: SearchParams, hw: HardwareParams) -> State:
    """The sketch with every placeholder split given the lengths ``_plan`` picks (and matrix
    products' column tiles outermost, ``_columns_first``)."""
    state = replay(sketch.dag, (), verbatim=False)
    plans: dict[int, _Tiles] = {}
    for step in sketch.steps:
        if isinstance(step, SplitStep) and is_placeholder_split(step):
            st = state.stages[step.stage_id]
            if step.stage_id not in plans:
                plans[step.stage_id] = _plan(st, hw, params.vector_width())
            plan = plans[step.stage_id]
            it = st.iters[st.leaves[step.iter_id]]  # iter_id is a leaf position
            n = len(step.lengths)
            inner = plan.spatial.get(it.name, plan.reduce.get(it.name, 1))
            lengths = ((1,) * (n - 1) + (inner,) if step.inner_to_outer
                       else (it.extent // inner,) + (1,) * (n - 1))
            step = dataclasses.replace(step, extent=it.extent, lengths=lengths)
        elif isinstance(step, ReorderStep):
            step = _columns_first(state, step)
        state = step.apply(state)
    return state


def _columns_first(state: State, step: ReorderStep) -> ReorderStep:
    """For a matrix product (two spatial axes: a dense layer, a GEMM), the reorder of its tiles
    with the column tile loop before the row tile loop. The parallel loop fuses the two and each
    thread takes a contiguous chunk, so a thread runs every row tile against one column panel of
    the weight while the panel is in its cache; rows first streamed the whole weight from memory
    once per row tile (2x slower on BERT's 3072-wide layers). Convolutions are left alone: the
    same order measured slower there (the activation, not the weight, is then re-streamed)."""
    st = state.stages[step.stage_id]
    spatial = [st.iters[r].name for r in range(st.n_root) if st.iters[r].kind == "spatial"]
    if len(spatial) != 2 or len(step.after_ids) < 2:
        return step
    names = [st.iters[st.leaves[p]].name for p in step.after_ids[:2]]
    if names != [f"{spatial[0]}.0", f"{spatial[1]}.0"]:
        return step
    ids = list(step.after_ids)
    ids[0], ids[1] = ids[1], ids[0]
    return ReorderStep(step.stage_id, tuple(ids))


def _is_padding(stage) -> bool:
    """A stage whose value is chosen by a condition (zero padding): inlined into a conv it puts a
    bounds test and a select on every multiply-add of the micro-kernel, so it stays a buffer."""
    body = getattr(stage.op, "body", None)
    return body is not None and any(isinstance(e, Select) for e in post_order(body))


def _locate(state: State) -> State:
    """Inline each untiled elementwise producer the sketch left at root, except padding; keep
    reductions."""
    for sid in reversed(range(len(state.stages))):
        st = state.stages[sid]
        if (not is_compute(st) or st.compute_at != "root" or is_tiled(st) or needs_tiling(state, st)
                or has_reduce(st) or not state.effective_consumers(sid) or _is_padding(st)):
            continue
        try:
            state = state.compute_inline(sid)
        except InvalidStepError:
            continue
    return state


def untuned_schedule(dag: ComputeDAG, seed: int = 0,
                     hardware_params: HardwareParams | None = None) -> tuple[State, str]:
    """A schedule for ``dag`` without measuring, and how it was made: ``"rules"`` (the
    register-tiled rule schedule), ``"sampled"`` (a random sketch sample) or ``"default"``.
    ``hardware_params``: the machine it is for (default: this host)."""
    hw = hardware_params if hardware_params is not None else host_hardware_params()
    params = dataclasses.replace(SearchParams(), auto_unroll_steps=(512,)).with_hardware(hw)
    rng = random.Random(seed)
    try:
        sketches = list(generate_sketches(dag, hardware_params=hw))
    except (InvalidStepError, ValueError):
        sketches = []
    for sketch in sketches[:2]:
        try:
            state = block_transposing_packs(_locate(_fill(sketch, params, hw)), rng, params)
            for fn in (annotate_parallel, annotate_auto_unroll, annotate_vectorize):
                state = fn(state, rng, params)
        except InvalidStepError:
            continue
        if lowers(state):
            return state, "rules"
    if sketches:
        found = sample_initial_population(sketches, 1, rng, dataclasses.replace(params, init_min_population=1))
        if found:
            return found[0], "sampled"
    return State.initial(dag), "default"
