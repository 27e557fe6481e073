"""The blocked copy of a transposing pack: read the source a cache line at a time.

A pack lays a dense weight ``[N, K]`` out as ``[N / v, K, v]`` for a register tile that
vectorizes along N (``PackStep``): the copy's innermost loop walks the v lanes of a block, and each
lane comes from another weight row, K elements away. With a power-of-two K those rows are 4 KiB
apart, so all v lines fall in the same L1 set; past the cache's associativity (8 on Zen) they
evict each other before the next element of the same line is read, and every element is a miss.
Measured on dense 128x1024x1024 + bias + relu (Zen 4): a 32-lane pack made a schedule 2.6x slower
than the same schedule with this blocked copy, and the 8 best programs of three 200-trial searches
(8- and 16-lane packs) ran 1.04-1.21x faster with it
(``benchmarks/published/2026-11-26-znver4-pack-block/``).

So the random annotation gives every pack that transposes (the packed dimension is not the
source's last, contiguous one) a fixed loop structure: the source's last dimension split into
blocks of one cache line, the lanes loop moved inside the block loop, and the lanes x line block
unrolled. Each source line is then read whole, one row after the other, and written as a
contiguous ``line x v`` tile of the copy; LLVM turns the unrolled block into vector loads and
shuffles. A pack along the source's last dimension (a GEMM's B, an HWIO conv weight) already
reads and writes rows contiguously and is left alone.

The block is a machine fact (``SearchParams.cache_line_bytes``), not a search knob: mutation
leaves the split alone (``is_pack_block_split``).
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

from compute import expr as E
from compute.dtype import nbytes
from compute.tensor import ComputeOp

from .hardware import CACHE_LINE_BYTES
from .loop_state import InvalidStepError, SplitRel, Stage, State
from .transform_steps import (AnnotationStep, CacheReadStep, CacheWriteStep, PackStep, ReorderStep,
                              RfactorStep, SplitStep)

if TYPE_CHECKING:
    from .search_params import SearchParams

# Steps that insert stages (stage ids of earlier steps shift); a split after the last of them
# names the stage of the final state.
_NEW_STAGE_STEPS = (CacheWriteStep, CacheReadStep, PackStep, RfactorStep)


def transposes(op: object) -> bool:
    """Whether ``op`` is a pack that moves the packed dimension away from the source's last
    (contiguous) one: its source load's last index is a plain axis of the copy, not the block
    index ``ax_o * v + ax_i``, and that dimension is longer than 1 (a depthwise weight
    ``[KH, KW, C, 1]`` packed along C reads its lanes contiguously)."""
    if not isinstance(op, ComputeOp) or op.tag != "pack" or len(op.axes) < 3:
        return False
    body = op.body
    if isinstance(body, E.Select):  # the zero padding of a partial last block
        body = body.true_value
    if not isinstance(body, E.TensorLoad) or not body.indices:
        return False
    return body.indices[-1] is op.axes[-2] and op.axes[-2].extent > 1


def is_blocked(stage: Stage) -> bool:
    return any(isinstance(r, SplitRel) for r in stage.relations)


def block_transposing_packs(state: State, rng: random.Random | None = None,
                            params: "SearchParams | None" = None) -> State:
    """Every transposing pack not yet blocked, with its copy blocked by cache lines (module
    docstring); a pack whose loops the schedule already changed, or of one lane, is left as is."""
    if params is not None and not params.block_transposing_packs:
        return state
    line = (params.cache_line_bytes if params is not None and params.cache_line_bytes
            else CACHE_LINE_BYTES)
    for sid, st in enumerate(state.stages):
        if st.compute_at == "inline" or not transposes(st.op) or is_blocked(st):
            continue
        op = st.op
        n = len(op.axes)
        if tuple(st.leaves) != tuple(range(n)) or op.axes[-1].extent <= 1:
            continue
        b = max(1, line // nbytes(op.dtype))
        ext = op.axes[-2].extent
        try:
            if ext > b:
                # (..., k, lanes) -> (..., k.0, k.1, lanes) -> (..., k.0, lanes, k.1)
                state = SplitStep(sid, n - 2, ext, (b,), True, "guard").apply(state)
                state = ReorderStep(sid, tuple(range(n - 1)) + (n, n - 1)).apply(state)
                first = n - 1
            else:
                state = ReorderStep(sid, tuple(range(n - 2)) + (n - 1, n - 2)).apply(state)
                first = n - 2
            state = AnnotationStep(sid, first, "unroll").apply(state)
            state = AnnotationStep(sid, first + 1, "unroll").apply(state)
        except InvalidStepError:
            continue
    return state


def is_pack_block_split(state: State, index: int) -> bool:
    """Whether ``state.steps[index]`` is the split ``block_transposing_packs`` made."""
    step = state.steps[index]
    if not isinstance(step, SplitStep) or not 0 <= step.stage_id < len(state.stages):
        return False
    if not transposes(state.stages[step.stage_id].op):
        return False
    # A split before a step that inserts a stage names a stage id that has shifted since: not
    # one of ours (those come after every new stage).
    return not any(isinstance(s, _NEW_STAGE_STEPS) for s in state.steps[index + 1:])
