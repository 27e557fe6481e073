"""A transposing pack copies its source a cache line at a time (sketch.pack_block): which packs
count as transposing, the loops the annotation gives them, the code (no gather), results against
the reference on awkward row lengths, and mutation leaving the block alone."""
from __future__ import annotations

import random

import pytest

import ansor
from compute.ops import workloads as W
from measure.target import host_hardware_params
from sketch.init_population import sample_initial_population
from sketch.loop_state import InvalidStepError
from sketch.mutation import _tile_candidates, mutate, mutate_tile_size
from sketch.pack_block import is_pack_block_split, transposes
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from sketch.transform_steps import PackStep
from tests.util import assert_matches_reference

from .test_split_tails import _inputs


def _packed_samples(dag, n: int, seed: int = 0, **knobs):
    hw = host_hardware_params()
    sk = [x for x in generate_sketches(dag, hardware_params=hw)
          if any(isinstance(st, PackStep) for st in x.steps)]
    assert sk
    pop = sample_initial_population(sk, n, random.Random(seed),
                                    SearchParams(**knobs).with_hardware(hw))
    assert pop
    return pop


def _pack_stage(state):
    return next(st for st in state.stages if getattr(st.op, "tag", None) == "pack")


@pytest.mark.parametrize("dag,expected", [
    (ansor.ComputeDAG(W.dense(8, 48, 64)), True),  # weight [N, K] packed along N: lanes are rows
    (ansor.ComputeDAG(W.matmul(16, 48, 32)), False),  # B [K, N] packed along N: lanes contiguous
    (ansor.ComputeDAG(W.depthwise_conv2d_nhwc(1, 8, 8, 32, 3, 3, 1, 1)), False),  # [.., C, 1]
])
def test_only_packs_whose_lanes_come_from_different_rows_transpose(dag, expected):
    state = _packed_samples(dag, 1)[0]
    assert transposes(_pack_stage(state).op) is expected


def test_a_transposing_pack_copies_one_cache_line_of_each_row_unrolled():
    """Dense 8x48x64: the copy's loops end in (k.0, lanes, k.1) with k.1 one 64-byte line of
    float32 and the lanes x line block unrolled; its code has no gather, while the lane-by-lane
    copy (the knob off) vectorizes the lanes into one. A one-lane pack (``[N, K, 1]``) reads and
    writes rows contiguously and keeps its loops."""
    dag = ansor.ComputeDAG(W.dense(8, 48, 64))
    seen = 0
    for state in _packed_samples(dag, 12):
        st = _pack_stage(state)
        if st.op.axes[-1].extent == 1:
            assert [st.iters[i].annotation for i in st.leaves[-2:]] != ["unroll", "unroll"]
            continue
        seen += 1
        inner = [st.iters[i] for i in st.leaves[-2:]]
        assert [it.annotation for it in inner] == ["unroll", "unroll"], str(state)
        assert inner[0].extent == st.op.axes[-1].extent  # the lanes
        assert inner[1].extent == 16  # 64 bytes of float32
        assert "masked.gather" not in ansor.build(state).llvm_ir
    assert seen
    off = _packed_samples(dag, 8, block_transposing_packs=False)
    assert any("masked.gather" in ansor.build(s).llvm_ir for s in off)


def test_the_block_is_the_machines_cache_line():
    dag = ansor.ComputeDAG(W.dense(8, 48, 64))
    for state in _packed_samples(dag, 6, cache_line_bytes=128):
        st = _pack_stage(state)
        if st.op.axes[-1].extent > 1:
            assert st.iters[st.leaves[-1]].extent == 32


@pytest.mark.parametrize("K", [5, 16, 37, 64])
def test_blocked_copies_match_the_reference(K):
    """Rows shorter than a line (reordered, not split), exactly one line, a partial last line
    (guarded) and whole lines; the packed dimension 37 leaves a zero-padded last block too."""
    dag = ansor.ComputeDAG(W.dense(7, 37, K))
    for state in _packed_samples(dag, 5, seed=K):
        assert transposes(_pack_stage(state).op)
        assert_matches_reference(ansor.build(state), dag, _inputs(dag),
                                 what=str([x.to_json() for x in state.steps]))


def test_nchw_conv_weight_packed_along_output_channels_matches_the_reference():
    """An OIHW weight packed along O: its source rows (the I x H x W of one channel) are short,
    so the copy is reordered, not split."""
    dag = ansor.ComputeDAG(W.conv2d_nchw(1, 6, 6, 5, 24, 3, 3, 1, 1))
    states = [s for s in _packed_samples(dag, 12, seed=3) if transposes(_pack_stage(s).op)]
    for state in states:
        assert_matches_reference(ansor.build(state), dag, _inputs(dag),
                                 what=str([x.to_json() for x in state.steps]))


def test_mutation_leaves_the_line_block_alone():
    dag = ansor.ComputeDAG(W.dense(16, 64, 256))
    params = SearchParams().with_hardware(host_hardware_params())
    rng = random.Random(0)
    for state in _packed_samples(dag, 6):
        if _pack_stage(state).op.axes[-1].extent == 1:
            continue
        blocks = [i for i in range(len(state.steps)) if is_pack_block_split(state, i)]
        assert len(blocks) == 1
        assert blocks[0] not in _tile_candidates(state)
        # the reader's own splits are not mistaken for it (their stage ids predate the pack)
        assert _tile_candidates(state)
        for _ in range(10):
            state = mutate_tile_size(state, rng, params)
            st = _pack_stage(state)
            if st.op.axes[-1].extent > 1:  # the reader's tile (the lanes) may have moved to 1
                assert st.iters[st.leaves[-1]].extent == 16


def test_a_pack_that_mutation_gives_lanes_is_blocked_too():
    """A sample whose pack has one lane is left unblocked; once a mutated tile gives it lanes,
    the child's copy is blocked like a sampled one (unless the sample fused the copy's loops)."""
    dag = ansor.ComputeDAG(W.dense(8, 48, 64))
    params = SearchParams().with_hardware(host_hardware_params())
    # one lane, loops as the copy's axes (not fused into a vector with the row: that one stays)
    ones = [s for s in _packed_samples(dag, 32) if _pack_stage(s).op.axes[-1].extent == 1
            and tuple(_pack_stage(s).leaves) == tuple(range(len(_pack_stage(s).op.axes)))]
    assert ones
    rng = random.Random(1)
    grown = 0
    for state in ones:
        for _ in range(30):
            try:
                child, _ = mutate(state, rng, params)
            except InvalidStepError:
                continue
            st = _pack_stage(child)
            if st.op.axes[-1].extent > 1:
                grown += 1
                assert [st.iters[i].annotation for i in st.leaves[-2:]] == ["unroll", "unroll"]
    assert grown
