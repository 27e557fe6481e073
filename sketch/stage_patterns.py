"""What the sketch rules ask of a stage and the tiling they build from it: which consumer an
element-wise stage feeds and in what order it reads, which input of a tiled stage is worth
packing and along which axis, which reduction is better split across vector lanes or laid out
channels-innermost, and the multi-level tiling (and a consumer's tiling followed by its producer).

Functions of a state and a stage id; the rules in ``sketch_rules`` decide when to use them.
"""
from __future__ import annotations

from typing import Sequence

from compute import expr as E
from compute.tensor import ComputeOp

from .loop_state import InvalidStepError, SplitRel, State
from .lower import effective_bodies

TILE_STRUCTURE = "SSRSRS"  # CPU: 4 spatial levels, 2 reduction levels


def is_compute_stage(state: State, sid: int) -> bool:
    st = state.stages[sid]
    return isinstance(st.op, ComputeOp) and st.compute_at != "inline"


def is_argument(state: State, sid: int) -> bool:
    args = {id(t.op) for t in state.dag.tensors}
    return any(id(o) in args for o in state.stages[sid].produced_ops)


def is_derived(state: State, sid: int) -> bool:
    """A stage a cache_write or rfactor already produced (not to be cached or factored again)."""
    st = state.stages[sid]
    return st.origin is None or bool(st.aliases)


def single_elementwise_consumer(state: State, sid: int, permuted: bool = False) -> int | None:
    """The one (non-inlined) consumer that reads this stage only at its own index, else None.
    ``permuted``: also one that reads it at a permutation of its axes (the copy out of an
    accumulator laid out in another order, ``CacheWriteStep.axis_order``)."""
    consumers = state.effective_consumers(sid)
    if len(consumers) != 1:
        return None
    c = consumers[0]
    order = consumer_read_order(state, sid, c)
    if order is None or (not permuted and order != tuple(range(len(order)))):
        return None
    return c


def consumer_read_order(state: State, sid: int, c: int) -> tuple[int, ...] | None:
    """How root consumer ``c`` (elementwise, not yet split) reads stage ``sid``: the consumer
    axis (position) indexing each of the producer's dimensions, the same at every load; None if
    it reads it any other way."""
    cst, pst = state.stages[c], state.stages[sid]
    cop = cst.op
    if not isinstance(cop, ComputeOp) or isinstance(cop.body, E.Reduce):
        return None
    if cst.compute_at != "root" or cst.relations or len(cop.shape) != len(pst.op.shape):
        return None
    body = effective_bodies(state)[c]
    mine = {id(o.output) for o in pst.produced_ops}
    pos = {id(a): d for d, a in enumerate(cop.axes)}
    order: tuple[int, ...] | None = None
    for n in E.post_order(body):
        if isinstance(n, E.TensorLoad) and id(n.tensor) in mine:
            this = tuple(pos.get(id(i), -1) for i in n.indices)
            if len(this) != len(cop.axes) or sorted(this) != list(range(len(this))):
                return None
            if order is not None and this != order:
                return None
            order = this
    if order is None or any(pst.op.shape[i] != cop.shape[d] for i, d in enumerate(order)):
        return None
    return order


def multi_level_tiling(state: State, sid: int, structure: str = TILE_STRUCTURE) -> tuple[State, list[int]]:
    """Split every loop of the stage (spatial into #S parts, reduce into #R parts, placeholder
    lengths) and reorder level by level. Returns the state and the split step ids of the spatial
    loops, in axis order (consumers follow them when fused)."""
    n_s, n_r = structure.count("S"), structure.count("R")
    st = state.stages[sid]
    parts: dict[int, list[int]] = {}  # root iterator id -> its parts' iterator ids, outer first
    spatial_steps: list[int] = []
    for it_id in list(st.leaves):
        it = state.stages[sid].iters[it_id]
        levels = n_s if it.kind == "spatial" else n_r
        if levels > 1:
            state = state.split(sid, it, [1] * (levels - 1))
            rel = state.stages[sid].relations[-1]
            assert isinstance(rel, SplitRel)
            parts[it_id] = list(rel.children)
            if it.kind == "spatial":
                spatial_steps.append(len(state.steps) - 1)
        else:
            parts[it_id] = [it_id]
    st = state.stages[sid]
    roots = [i for i in range(st.n_root)]
    spatial = [i for i in roots if st.iters[i].kind == "spatial"]
    reduce_ = [i for i in roots if st.iters[i].kind == "reduce"]
    order: list[int] = []
    s_lv = r_lv = 0
    for ch in structure:
        group = spatial if ch == "S" else reduce_
        lv = s_lv if ch == "S" else r_lv
        order += [parts[i][lv] for i in group if lv < len(parts[i])]
        if ch == "S":
            s_lv += 1
        else:
            r_lv += 1
    positions = [st.leaves.index(i) for i in order]
    return state.reorder(sid, positions), spatial_steps


def follow_tiling(state: State, cid: int, split_steps: list[int], level: int,
                  tail: str = "auto", read_order: Sequence[int] | None = None) -> State:
    """The consumer splits its loops like the producer's first ``level`` tiling levels and
    orders the parts level by level, so the producer can be computed at a tile of it. ``tail``:
    the follow splits' tail strategy ("auto" derives it from the source split). ``read_order``:
    the consumer axis indexing each producer dimension (``consumer_read_order``) when the
    producer is laid out in another order; ``split_steps`` are in the producer's order."""
    roots = list(state.stages[cid].leaves)
    if read_order is not None:
        by_axis = dict(zip(read_order, split_steps))
        split_steps = [by_axis[d] for d in range(len(roots))]
    parts: list[list[int]] = []
    for it_id, step in zip(roots, split_steps):
        it = state.stages[cid].iters[it_id]
        state = state.follow_split(cid, it, step, level, tail)
        rel = state.stages[cid].relations[-1]
        parts.append(list(rel.children))
    st = state.stages[cid]
    order = [p[lv] for lv in range(level + 1) for p in parts]
    return state.reorder(cid, [st.leaves.index(i) for i in order])


def packable_input(state: State, sid: int) -> tuple[int, int] | None:
    """(producer stage, dimension) of the input worth packing for a tiled reduction stage: a
    tensor it reads with the stage's innermost spatial axis alone as one index (the axis the
    register tile vectorizes) and without some other spatial axis (so every row of the output
    tile reads the same block: a GEMM's B, a dense weight, a conv's weight). None if there is
    none, or the producer is inlined or the stage itself."""
    st = state.stages[sid]
    op = st.op
    if not isinstance(op, ComputeOp) or not isinstance(op.body, E.Reduce) or not op.axes:
        return None
    j = op.axes[-1]
    if j.extent <= 2:
        return None
    producer_of = state.producer_map()
    for n, dim in _block_reads(op, j):
        p = producer_of.get(id(n.tensor))
        if p is None or p == sid or state.stages[p].compute_at == "inline":
            continue
        return p, dim
    return None


def _block_reads(op: ComputeOp, j: E.Var):
    """(load, dimension) of each load in ``op`` that reads ``j`` alone as that one index, ``j`` in
    no other index, and lacks some other spatial axis (every output row of a tile reads the same
    block of it: a GEMM's B, a dense or conv weight)."""
    others = [a for a in op.axes if a is not j and a.extent > 1]
    if not others:
        return
    for n in E.post_order(op.body):
        if not isinstance(n, E.TensorLoad):
            continue
        dims = [d for d, ix in enumerate(n.indices) if ix is j]
        if len(dims) != 1:
            continue
        used = {id(v) for d, ix in enumerate(n.indices) if d != dims[0]
                for v in E.post_order(ix) if isinstance(v, E.Var)}
        if id(j) in used:
            continue  # j also inside another index: no clean block layout
        if all(id(a) in used for a in others):
            continue  # every output row reads its own data: no reuse for a copy to pay off
        yield n, dims[0]


def with_pack(state: State, sid: int, j_split_step: int) -> State | None:
    """The state with ``packable_input`` of stage ``sid`` packed by the innermost length of the
    split step of its innermost spatial axis; None if nothing to pack or the step does not apply
    (an extent too small for a block)."""
    found = packable_input(state, sid)
    if found is None:
        return None
    try:
        return state.pack(found[0], sid, found[1], j_split_step)
    except InvalidStepError:
        return None


# The shortest float vector of the x86 targets we generate for (AVX2: 8 lanes). An innermost
# output axis not a multiple of it leaves lanes idle in every vector of a register tile.
MIN_LANES = 8


def lane_axis_order(state: State, sid: int) -> tuple[int, ...] | None:
    """The accumulator layout (``CacheWriteStep.axis_order``) that moves a channel axis innermost
    when the stage's own innermost axis fills vectors badly: a tiled reduction whose last axis is
    not a multiple of ``MIN_LANES`` long (an NCHW convolution's 27 output columns) and another
    spatial axis that is, at least two vectors long, read as a block of a reused input (the
    output channels of the weight, which the pack then lays out by channel). The longest such
    axis moves last; None if there is none."""
    op = state.stages[sid].op
    if not isinstance(op, ComputeOp) or not isinstance(op.body, E.Reduce) or len(op.axes) < 2:
        return None
    if op.axes[-1].extent % MIN_LANES == 0:
        return None
    best = None
    for p, a in enumerate(op.axes[:-1]):
        if a.extent % MIN_LANES or a.extent < 2 * MIN_LANES or next(_block_reads(op, a), None) is None:
            continue
        if best is None or a.extent > op.axes[best].extent:
            best = p
    if best is None:
        return None
    return tuple(q for q in range(len(op.axes)) if q != best) + (best,)


# A reduction at least this long (in elements) is worth vectorizing along (see matrix_vector).
MIN_VECTOR_REDUCTION = 256


def matrix_vector(op, red: int) -> bool:
    """A matrix-vector product (a classifier's dense on one row: 1 x 1280 -> 1001): one spatial
    axis longer than 1, so no input is reused across a register tile, and a long reduction.
    Vectorized along the output axis it reads the weight a row apart per lane (a gather, or
    shuffles); factoring the reduction's inner part out (rfactor) gives a spatial axis that
    walks each weight row contiguously. The tiled sketches stay beside it."""
    return sum(1 for a in op.axes if a.extent > 1) == 1 and red >= MIN_VECTOR_REDUCTION


def lane_reduction_axis(state: State, sid: int) -> int | None:
    """The position of the innermost spatial loop of a reduction without reuse (a pool, a mean
    over rows) when it is worth vectorizing across: every input is read with that axis alone as
    its last index (contiguous lanes) and the reduction walks other dimensions. None otherwise."""
    op = state.stages[sid].op
    if not isinstance(op, ComputeOp) or not isinstance(op.body, E.Reduce) or not op.axes:
        return None
    j = op.axes[-1]
    if j.extent < MIN_LANE_AXIS or not op.reduce_axes:
        return None
    red = set(map(id, op.reduce_axes))
    loads = [n for n in E.post_order(op.body) if isinstance(n, E.TensorLoad)]
    if not loads:
        return None
    for n in loads:
        if not n.indices or n.indices[-1] is not j:
            return None
        outer = [v for ix in n.indices[:-1] for v in E.post_order(ix) if isinstance(v, E.Var)]
        if any(v is j for v in outer) or not any(id(v) in red for v in outer):
            return None  # the lanes' axis elsewhere too, or a read the reduction does not walk
    leaves = state.stages[sid].leaf_iters
    pos = [p for p, it in enumerate(leaves) if it.kind != "reduce"]
    return pos[-1] if pos and len(leaves) == len(op.axes) + len(op.reduce_axes) else None


# The innermost axis of a lane reduction must fill at least one short vector.
MIN_LANE_AXIS = 8


# ---- the rules ---------------------------------------------------------------------------------------


def anchor_consumer(state: State, sid: int) -> tuple[int, list[int]] | None:
    """``(c, between)`` when the tiled reduction ``sid`` feeds another one, ``c``, through nothing
    but non-reduction stages ``between`` (a pad, a bias and activation already inlined), each
    read by one stage only, and ``c`` is already tiled (the sketch rules visit consumers first):
    the second anchor of a two-anchor group (1x1 conv -> depthwise conv, depthwise -> 1x1).
    None otherwise, or when a stage between is a kernel argument (its value must be written)."""
    between: list[int] = []
    cur = sid
    while True:
        consumers = state.effective_consumers(cur)
        if len(consumers) != 1:
            return None
        c = consumers[0]
        cst = state.stages[c]
        if not is_compute_stage(state, c):
            return None
        if isinstance(cst.op.body, E.Reduce):
            return (c, between) if cst.relations else None
        if cst.compute_at != "root" or is_argument(state, c) or cst.relations:
            return None
        between.append(c)
        cur = c


def anchor_attach_points(state: State, c: int) -> list[tuple[int, int]]:
    """Where a producer can be computed so that it makes one tile of consumer anchor ``c`` at a
    time: ``(stage, loop position)``. The outermost tile loop only - of the consumer ``c`` is
    computed in (multi-level tiling with fusion), else of ``c``'s own first spatial level - so
    the producer runs once per outer (parallel) tile and recomputes its halo once per such tile.
    Inside an inner tile it runs for a few outputs at a time, recomputing a halo as large as
    the tile (a 2x7 stride-2 tile reads a 5x15 window) - a space where a short search found
    only slow kernels."""
    cst = state.stages[c]
    if cst.compute_at == "iter" and cst.attach is not None:
        tid, it_id = cst.attach
        t = state.stages[tid]
        n = len(t.op.axes)
        at = t.leaves.index(it_id)
        return [(tid, min(n - 1, at))]
    n = len(cst.op.axes)
    leaves = cst.leaf_iters
    if n <= len(leaves) and all(it.kind == "spatial" for it in leaves[:n]):
        return [(c, n - 1)]
    return []


def inlined_epilogue(state: State, sid: int) -> int | None:
    """The last of the inlined elementwise stages that alone read stage ``sid`` one after the
    other (a conv's bias add, then its activation: the activation), or None when its reader is
    not inlined."""
    last = None
    cur = sid
    while True:
        readers = state.consumers(cur)
        if len(readers) != 1 or state.stages[readers[0]].compute_at != "inline":
            return last
        last = cur = readers[0]
