"""Sketch generation: derive the high-level structures of good programs from the computation alone.

A *sketch* is a loop state whose structure is decided (which stages are inlined, tiled, cached,
fused, factored) but whose numbers are not: every split carries placeholder lengths (all 1s) that
the random annotation fills in later. Sketches are valid states (placeholder splits are legal), so
they print, lower and run like any schedule.

Rules are small classes with ``meet_condition`` (skip / apply / apply-and-skip-the-rest) and
``apply`` (new states, each with the stage to visit next), tried in one ordered list from the last
stage to the first, as in Ansor's CPU sketch policy: always-inline, add-rfactor, row-block dot
product, lane reduction, lane-axis cache write, two-anchor fusion, add-cache-write, multi-level
tiling with fusion, multi-level tiling ("SSRSRS"), skip. The row-block, lane-reduction, lane-axis
and two-anchor rules are ours: a matrix-vector product and a reduction without reuse, which
Ansor's rules leave scalar, an accumulator laid out channels-innermost when the output's own
innermost axis is a poor vector length, and a tiled reduction computed a tile at a time inside
the tiled reduction it feeds (a 1x1 conv inside a depthwise conv: no intermediate in memory).
A user can add a rule by passing their own list to ``generate_sketches``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Sequence

from compute.compute_dag import ComputeDAG, OpInfo, analyse_op

from .hardware import HardwareParams
from .loop_state import InvalidStepError, State
from .stage_patterns import (anchor_attach_points, anchor_consumer, consumer_read_order, follow_tiling,
                             inlined_epilogue, is_argument, is_compute_stage, is_derived, lane_axis_order, lane_reduction_axis,
                             matrix_vector, multi_level_tiling, single_elementwise_consumer, with_pack)
FUSION_LEVELS = (1, 2)      # compute a tiled producer at its consumer's level-1 or level-2 tile


class ConditionKind(IntEnum):
    SKIP = 0
    APPLY = 1
    APPLY_AND_SKIP_REST = 2


@dataclass
class SketchContext:
    """What rules may consult: the DAG, the core count of the target machine, per-state caches."""

    dag: ComputeDAG
    num_cores: int
    pack: bool = True  # also derive the sketches that pack a tiled stage's reused input
    _info: dict = field(default_factory=dict)

    def info(self, state: State, sid: int) -> OpInfo:
        op = state.stages[sid].op
        inf = self._info.get(id(op))
        if inf is None:
            inf = analyse_op(op)
            self._info[id(op)] = (op, inf)  # keep op alive so its id stays unique
            return inf
        return inf[1]


class SketchRule:
    """One rule. ``apply`` returns (new state, index of the next stage to visit) pairs."""

    name = "rule"

    def meet_condition(self, ctx: SketchContext, state: State, sid: int) -> ConditionKind:
        raise NotImplementedError

    def apply(self, ctx: SketchContext, state: State, sid: int) -> list[tuple[State, int]]:
        raise NotImplementedError


# ---- the rules ------------------------------------------------------------------------------------

def needs_rfactor(ctx: SketchContext, state: State, sid: int) -> bool:
    inf = ctx.info(state, sid)
    if not inf.has_reduce:
        return False
    op = state.stages[sid].op
    space = 1
    for a in op.axes:
        space *= a.extent
    red = 1
    for a in op.reduce_axes:
        red *= a.extent
    if inf.needs_multi_level_tiling:
        return (space <= red and space <= ctx.num_cores * 16) or matrix_vector(op, red)
    return red > ctx.num_cores and space < ctx.num_cores * 16


class RuleAlwaysInline(SketchRule):
    """Strictly inlineable elementwise stages (no expensive op, no branch) are always inlined."""

    name = "always_inline"

    def meet_condition(self, ctx, state, sid):
        if not is_compute_stage(state, sid) or is_argument(state, sid) or not state.consumers(sid):
            return ConditionKind.SKIP
        return ConditionKind.APPLY_AND_SKIP_REST if ctx.info(state, sid).is_strictly_inlineable \
            else ConditionKind.SKIP

    def apply(self, ctx, state, sid):
        return [(state.compute_inline(sid), sid - 1)]


class RuleTileOnly(SketchRule):
    """A stage whose compute asks for it (``attrs["sketch"] == "tile_only"``) and needs tiling is
    multi-level tiled one way only: no rfactor, cache write, fusion or pack alternatives. The
    small fixed-size transforms of a Winograd convolution ask (``compute.ops.winograd``): with
    every alternative on each of them the sketches multiply (3888 for one F(4, 3) conv, cut to
    the first 64, which then all share one choice for the GEMM that matters)."""

    name = "tile_only"

    def meet_condition(self, ctx, state, sid):
        if not is_compute_stage(state, sid) or getattr(state.stages[sid].op, "attrs", {}).get("sketch") != "tile_only":
            return ConditionKind.SKIP
        return ConditionKind.APPLY_AND_SKIP_REST if ctx.info(state, sid).needs_multi_level_tiling \
            else ConditionKind.SKIP

    def apply(self, ctx, state, sid):
        return [(multi_level_tiling(state, sid)[0], sid - 1)]


class RuleAddRfactor(SketchRule):
    """Reductions with too little spatial parallelism: fuse the reduce loops, split them, and
    factor out either part (two sketches); the new .rf stage is visited next."""

    name = "add_rfactor"

    def meet_condition(self, ctx, state, sid):
        if not is_compute_stage(state, sid) or is_derived(state, sid):
            return ConditionKind.SKIP
        return ConditionKind.APPLY if needs_rfactor(ctx, state, sid) else ConditionKind.SKIP

    def apply(self, ctx, state, sid):
        st = state.stages[sid]
        red = [p for p, it in enumerate(st.leaf_iters) if it.kind == "reduce"]
        s = state.fuse(sid, red) if len(red) > 1 else state
        pos = [p for p, it in enumerate(s.stages[sid].leaf_iters) if it.kind == "reduce"][0]
        s = s.split(sid, pos, [1])
        n_sp = len(st.op.axes)
        out = []
        for part in (pos, pos + 1):
            try:
                out.append((s.rfactor(sid, part, n_sp), sid))
            except InvalidStepError:
                continue
        return out


class RuleRowBlockDot(SketchRule):
    """A matrix-vector product (``matrix_vector``) computed a block of output rows at a time
    inside its elementwise consumer: the consumer's long spatial axis is split, the product is
    computed at the outer part (run in parallel), and its reduction is the innermost loop, which
    walks a weight row contiguously (LLVM keeps SIMD partial sums of it: ``reassoc``). One
    parallel region and no factored buffer, where the rfactor sketches need three regions; a
    classifier's 1 x 1280 -> 1001 ran 35 us so against 50 us for the tuned rfactor kernel. An
    extra sketch: the other rules still apply."""

    name = "row_block_dot"

    def meet_condition(self, ctx, state, sid):
        if not is_compute_stage(state, sid) or is_derived(state, sid) or not ctx.info(state, sid).has_reduce:
            return ConditionKind.SKIP
        op = state.stages[sid].op
        red = 1
        for a in op.reduce_axes:
            red *= a.extent
        if not matrix_vector(op, red) or single_elementwise_consumer(state, sid) is None:
            return ConditionKind.SKIP
        return ConditionKind.APPLY

    def apply(self, ctx, state, sid):
        consumer = single_elementwise_consumer(state, sid)
        assert consumer is not None
        cst = state.stages[consumer]
        long_axes = [p for p, it in enumerate(cst.leaf_iters) if it.kind != "reduce" and it.extent > 1]
        if len(long_axes) != 1:
            return []
        try:
            s = state.split(consumer, long_axes[0], [1])
            s = s.compute_at(sid, consumer, long_axes[0])
        except InvalidStepError:
            return []
        return [(s, sid - 1)]


class RuleLaneReduction(SketchRule):
    """A reduction with no reuse whose innermost spatial axis is contiguous in every input (a
    global average pool over 7x7x2048, a max pool, a mean over rows): split that axis and put the
    reduction loops between its parts, so the innermost loop runs across lanes of independent
    sums (vectorizable) and the reduction accumulates whole vectors. Left alone, the reduction is
    innermost and every output is a scalar sum. Two sketches: the stage at the root, and (with an
    elementwise consumer such as the pool's division) computed at the consumer's outer part, one
    parallel loop for both. An extra sketch: the plain one stays."""

    name = "lane_reduction"

    def meet_condition(self, ctx, state, sid):
        if not is_compute_stage(state, sid) or is_derived(state, sid):
            return ConditionKind.SKIP
        inf = ctx.info(state, sid)
        if not inf.has_reduce or inf.needs_multi_level_tiling or needs_rfactor(ctx, state, sid):
            return ConditionKind.SKIP
        return ConditionKind.SKIP if lane_reduction_axis(state, sid) is None else ConditionKind.APPLY

    def apply(self, ctx, state, sid):
        pos = lane_reduction_axis(state, sid)
        assert pos is not None
        s = state.split(sid, pos, [1])
        step = len(s.steps) - 1
        leaves = s.stages[sid].leaf_iters
        spatial = [p for p, it in enumerate(leaves) if it.kind != "reduce"]
        reduce_ = [p for p, it in enumerate(leaves) if it.kind == "reduce"]
        s = s.reorder(sid, spatial[:-1] + reduce_ + spatial[-1:])
        out = [(s, sid - 1)]
        consumer = single_elementwise_consumer(s, sid)
        if consumer is not None:
            try:
                cl = s.stages[consumer].leaf_iters
                f = s.follow_split(consumer, len(cl) - 1, step, 1)
                f = f.compute_at(sid, consumer, len(cl) - 1)
                out.append((f, sid - 1))
            except InvalidStepError:
                pass
        return out


class RuleAddCacheWrite(SketchRule):
    """A stage to tile that has no elementwise consumer to fuse into gets a local accumulator
    (cache_write); the copy stage is then the consumer the tiled accumulator fuses into."""

    name = "add_cache_write"

    def meet_condition(self, ctx, state, sid):
        if not is_compute_stage(state, sid) or is_derived(state, sid):
            return ConditionKind.SKIP
        if ctx.info(state, sid).needs_multi_level_tiling and single_elementwise_consumer(state, sid) is None:
            return ConditionKind.APPLY
        return ConditionKind.SKIP

    def apply(self, ctx, state, sid):
        return [(state.cache_write(sid), sid)]


class RuleLaneAxisCacheWrite(SketchRule):
    """A tiled reduction whose innermost axis is a poor vector length but which has a channel
    axis that is a good one (``lane_axis_order``) also gets a local accumulator laid out with
    that axis innermost; the copy out of it (in the output's layout) is the consumer it fuses
    into. An extra sketch: the other rules still apply to the stage as it is."""

    name = "lane_axis_cache_write"

    def meet_condition(self, ctx, state, sid):
        if not is_compute_stage(state, sid) or is_derived(state, sid):
            return ConditionKind.SKIP
        if not ctx.info(state, sid).needs_multi_level_tiling or lane_axis_order(state, sid) is None:
            return ConditionKind.SKIP
        return ConditionKind.APPLY

    def apply(self, ctx, state, sid):
        order = lane_axis_order(state, sid)
        assert order is not None
        return [(state.cache_write(sid, axis_order=order), sid)]


class RuleTwoAnchorFusion(SketchRule):
    """A tiled reduction whose value only another tiled reduction reads (a 1x1 conv feeding a
    depthwise conv, a depthwise conv feeding a 1x1; ``anchor_consumer``) is computed a tile at a
    time inside the consumer's outermost tile loop (``anchor_attach_points``), so the intermediate never
    goes to memory: bound inference gives the producer's region, the consumer's tile plus the
    halo a 3x3 window reads, and its buffer is that region. The stages between (a pad, the
    producer's bias and activation) are inlined into the consumer, recomputed per read (per tap
    of a 3x3, per output channel of a 1x1), so the producer's buffer is its plain accumulator;
    a second sketch computes the producer's epilogue (``inlined_epilogue``: its last elementwise
    stage, bias and activation) at the same tile loop, once per element, into a buffer of the
    same region. An extra sketch: the rules after this one still
    derive the sketches that write the intermediate whole, unless the producer asks for the fused
    structure only (``attrs["sketch"] == "two_anchor"``: a network's fused pair task, whose
    separate structures are the separate tasks')."""

    name = "two_anchor_fusion"

    def meet_condition(self, ctx, state, sid):
        if not is_compute_stage(state, sid) or not ctx.info(state, sid).needs_multi_level_tiling:
            return ConditionKind.SKIP
        if anchor_consumer(state, sid) is None:
            return ConditionKind.SKIP
        only = getattr(state.stages[sid].op, "attrs", {}).get("sketch") == "two_anchor"
        return ConditionKind.APPLY_AND_SKIP_REST if only else ConditionKind.APPLY

    def apply(self, ctx, state, sid):
        found = anchor_consumer(state, sid)
        assert found is not None
        c, between = found
        epilogue = inlined_epilogue(state, sid)  # before the pad is inlined after it
        s = state
        for b in between:
            s = s.compute_inline(b)
        tiled, _ = multi_level_tiling(s, sid)
        out = []
        for target, pos in anchor_attach_points(tiled, c):
            try:
                out.append((tiled.compute_at(sid, target, pos), sid - 1))
            except InvalidStepError:
                continue
            if epilogue is None:
                continue
            try:  # the epilogue once per element of the tile, not once per read of it
                e = tiled.compute_root(epilogue).compute_at(epilogue, target, pos)
                out.append((e.compute_at(sid, target, pos), sid - 1))
            except InvalidStepError:
                continue
        if not out:  # as if the rule had skipped: the other rules still derive a sketch
            raise InvalidStepError(f"no tile loop of {state.stages[c].name} to compute {state.stages[sid].name} at")
        return out


class RuleMultiLevelTilingWithFusion(SketchRule):
    """Tile "SSRSRS" and compute the stage at its elementwise consumer's tile, level 1 or 2."""

    name = "multi_level_tiling_with_fusion"

    def meet_condition(self, ctx, state, sid):
        if not is_compute_stage(state, sid) or not ctx.info(state, sid).needs_multi_level_tiling:
            return ConditionKind.SKIP
        if single_elementwise_consumer(state, sid, permuted=True) is None:
            return ConditionKind.SKIP
        return ConditionKind.APPLY_AND_SKIP_REST

    def apply(self, ctx, state, sid):
        consumer = single_elementwise_consumer(state, sid, permuted=True)
        assert consumer is not None
        order = consumer_read_order(state, sid, consumer)
        tiled, steps = multi_level_tiling(state, sid)
        out = []
        n = len(steps)
        if order is not None and order != tuple(range(len(order))) and len(steps) != len(order):
            return [(tiled, sid - 1)]  # a permuted copy needs every axis split to follow the tiles
        for level in FUSION_LEVELS:
            s = follow_tiling(tiled, consumer, steps, level, read_order=order)
            s = s.compute_at(sid, consumer, level * n - 1)
            out.append((s, sid - 1))
        if ctx.pack and steps and n == len(state.stages[sid].op.axes):
            # The same with the reused input packed; the consumer's partial tiles are peeled, not
            # shifted, so the stage's tiles start at multiples of the pack's block.
            for level in FUSION_LEVELS:
                s = follow_tiling(tiled, consumer, steps, level, tail="peel", read_order=order)
                s = s.compute_at(sid, consumer, level * n - 1)
                packed = with_pack(s, sid, steps[-1])
                if packed is not None:
                    out.append((packed, sid))  # the copy sits below: visit from the stage again
        return out


class RuleMultiLevelTiling(SketchRule):
    """Tile "SSRSRS" a stage with data reuse."""

    name = "multi_level_tiling"

    def meet_condition(self, ctx, state, sid):
        if is_compute_stage(state, sid) and ctx.info(state, sid).needs_multi_level_tiling:
            return ConditionKind.APPLY_AND_SKIP_REST
        return ConditionKind.SKIP

    def apply(self, ctx, state, sid):
        tiled, steps = multi_level_tiling(state, sid)
        out = [(tiled, sid - 1)]
        if ctx.pack and steps and len(steps) == len(state.stages[sid].op.axes):
            packed = with_pack(tiled, sid, steps[-1])
            if packed is not None:
                out.append((packed, sid))
        return out


class RuleSkipStage(SketchRule):
    """Leave the stage as it is (its location and annotations are chosen later)."""

    name = "skip"

    def meet_condition(self, ctx, state, sid):
        return ConditionKind.APPLY

    def apply(self, ctx, state, sid):
        return [(state, sid - 1)]


DEFAULT_RULES: tuple[SketchRule, ...] = (
    RuleAlwaysInline(), RuleTileOnly(), RuleAddRfactor(), RuleRowBlockDot(), RuleLaneReduction(), RuleLaneAxisCacheWrite(),
    RuleTwoAnchorFusion(), RuleAddCacheWrite(), RuleMultiLevelTilingWithFusion(), RuleMultiLevelTiling(),
    RuleSkipStage(),
)


def generate_sketches(task_or_dag: Any, rules: Sequence[SketchRule] | None = None,
                      num_cores: int | None = None, max_sketches: int = 64,
                      hardware_params: HardwareParams | None = None,
                      pack_inputs: bool = True) -> list[State]:
    """Every sketch the rules derive, visiting stages from the last to the first.

    ``task_or_dag``: a SearchTask (anything with ``compute_dag``) or a ComputeDAG. ``rules``
    replaces the default ordered list (e.g. to add a rule of your own before ``RuleSkipStage``).
    The target's core count (which decides rfactor) is ``num_cores`` if given, else that of
    ``hardware_params``, else that of the task's ``hardware_params``; a bare DAG needs one of the
    first two (the rules never ask this machine). ``pack_inputs``: besides each tiled sketch,
    the one that packs its reused input into blocks of the register tile's width (PackStep).
    """
    dag = getattr(task_or_dag, "compute_dag", task_or_dag)
    if num_cores is None:
        hw = hardware_params if hardware_params is not None else getattr(task_or_dag, "hardware_params", None)
        if not isinstance(hw, HardwareParams):
            raise TypeError("generate_sketches needs the target's core count: pass num_cores= or "
                            "hardware_params=, or a task that carries hardware_params")
        num_cores = hw.num_cores
    ctx = SketchContext(dag, num_cores, pack=pack_inputs)
    rules = DEFAULT_RULES if rules is None else tuple(rules)
    init = State.initial(dag)
    work: list[tuple[State, int]] = [(init, len(init.stages) - 1)]
    out: list[State] = []
    seen: set[str] = set()
    applied: list[SketchRule] = []
    sid = -1
    budget = 100_000  # rule applications; a rule that never moves to an earlier stage would loop
    while work and len(out) < max_sketches:
        budget -= 1
        if budget < 0:
            raise RuntimeError(f"sketch generation did not terminate; last rules applied at stage "
                               f"{sid}: {', '.join(r.name for r in applied)} (a rule must return "
                               "an earlier stage or a changed state)")
        state, sid = work.pop(0)
        if sid < 0:
            key = state.canonical_key()
            if key not in seen:
                seen.add(key)
                out.append(state)
            continue
        nxt: list[tuple[State, int]] = []
        applied: list[SketchRule] = []
        for rule in rules:
            cond = rule.meet_condition(ctx, state, sid)
            if cond == ConditionKind.SKIP:
                continue
            try:
                produced = rule.apply(ctx, state, sid)
            except InvalidStepError:
                continue  # the rule does not fit this particular state: as if it had skipped
            applied.append(rule)
            nxt.extend(produced)
            if cond == ConditionKind.APPLY_AND_SKIP_REST:
                break
        work = nxt + work  # depth first keeps the order stable and memory small
    return out
