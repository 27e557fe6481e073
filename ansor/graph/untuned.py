"""A reasonable schedule for a subgraph nobody tuned: rule-based, deterministic, no measuring.

The naive default loop nest (one scalar thread, no tiling) takes seconds per ResNet conv. Here
the task's first sketch (multi-level tiling ``SSRSRS`` with a cache-write or a fused consumer,
what the search starts from) gets fixed numbers instead of random ones:

* the innermost spatial tile is a register tile: up to the vector width (two registers of
  float32) on the last spatial axis (output channels / columns), vectorized, and up to 8 on the
  axis before it (unrolled), the shape of the hand-written GEMM/conv micro-kernels;
* the last reduction axis (input channels, ``k``) is blocked by up to 16 inside, the rest outside;
* stages the sketch left untiled (padding, softmax parts) are inlined when they have no
  reduction, else stay at root;
* outer loops are fused and run in parallel, inner loops vectorized, reductions auto-unrolled
  (the same annotation passes as the search, with a fixed seed).

If that state does not lower, a few random samples of the sketches (fixed seed) are tried, then
the plain default schedule; ``untuned_schedule`` says which it used.
"""
from __future__ import annotations

import dataclasses
import random

from compute.compute_dag import ComputeDAG
from measure.target import host_hardware_params
from sketch.hardware import HardwareParams
from sketch.init_population import (annotate_auto_unroll, annotate_parallel,
                                    annotate_vectorize, divisors, has_reduce, is_compute, is_placeholder_split,
                                    is_tiled, lowers, needs_tiling, sample_initial_population)
from sketch.loop_state import InvalidStepError, State
from sketch.replay import replay
from sketch.search_policy import SearchParams
from sketch.sketch_rules import generate_sketches
from sketch.transform_steps import SplitStep


def _largest_divisor(n: int, cap: int) -> int:
    return max(d for d in divisors(n) if d <= max(1, cap))


def _fill(sketch: State, params: SearchParams) -> State:
    """The sketch with every placeholder split given the register-tile lengths above."""
    vec = params.vector_width()
    state = replay(sketch.dag, (), verbatim=False)
    for step in sketch.steps:
        if isinstance(step, SplitStep) and is_placeholder_split(step):
            st = state.stages[step.stage_id]
            it = st.iters[st.leaves[step.iter_id]]  # iter_id is a leaf position
            # Which axis this is: the stage's last spatial axis (vector), the one before it
            # (register rows), its last reduce axis (k block), or another one (outer).
            spatial = [st.iters[r].name for r in range(st.n_root) if st.iters[r].kind == "spatial"]
            reduce_ = [st.iters[r].name for r in range(st.n_root) if st.iters[r].kind == "reduce"]
            if spatial and it.name == spatial[-1]:
                inner = vec
            elif len(spatial) > 1 and it.name == spatial[-2]:
                inner = 8
            elif reduce_ and it.name == reduce_[-1]:
                inner = 16
            else:
                inner = 1
            d = _largest_divisor(it.extent, inner)
            n = len(step.lengths)
            lengths = (1,) * (n - 1) + (d,) if step.inner_to_outer else (it.extent // d,) + (1,) * (n - 1)
            step = SplitStep(step.stage_id, step.iter_id, it.extent, lengths, step.inner_to_outer)
        state = step.apply(state)
    return state


def _locate(state: State) -> State:
    """Inline each untiled elementwise producer the sketch left at root; keep reductions."""
    for sid in reversed(range(len(state.stages))):
        st = state.stages[sid]
        if (not is_compute(st) or st.compute_at != "root" or is_tiled(st) or needs_tiling(state, st)
                or has_reduce(st) or not state.effective_consumers(sid)):
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
    params = dataclasses.replace(SearchParams(), auto_unroll_steps=(64,)).with_hardware(hw)
    rng = random.Random(seed)
    try:
        sketches = list(generate_sketches(dag, hardware_params=hw))
    except (InvalidStepError, ValueError):
        sketches = []
    for sketch in sketches[:2]:
        try:
            state = _locate(_fill(sketch, params))
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
