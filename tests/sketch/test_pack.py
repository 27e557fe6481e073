"""Packing an input into blocks of the register tile's width (PackStep, "PK"): the layout and its
zero padding, the records, the code the packed micro-kernel lowers to, the sketches that pack,
and results on prime extents against the reference."""
from __future__ import annotations

import random

import numpy as np
import pytest

import ansor
from compute import loop_ir as L
from compute.ops import workloads as W
from compute.reference import evaluate
from measure.target import host_hardware_params
from sketch.init_population import sample_initial_population
from sketch.loop_state import InvalidStepError
from sketch.lower import lower
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from sketch.stage_patterns import packable_input
from sketch.transform_steps import FollowSplitStep, PackStep, SplitStep, step_from_json
from tests import loop_ir_interp as interp
from tests.util import assert_matches_reference

from .test_split_tails import PRIMES, _inputs, gemm_state


def _j_split(state) -> int:
    """The step id of the accumulator's split of j (gemm_state splits i, j, k in that order)."""
    splits = [k for k, s in enumerate(state.steps) if isinstance(s, SplitStep) and s.stage_id == 2]
    return splits[-2]


def packed_gemm(M, N, K, tile, reg, out_tail="peel", acc_tail="peel"):
    dag, s = gemm_state(M, N, K, tile, reg, out_tail, acc_tail)
    s = s.pack("B", "matmul.local", 1, _j_split(s))
    return dag, s


# ---- the step and its record ---------------------------------------------------------------------

def test_pack_layout_is_blocked_and_zero_padded():
    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    pack = s["B.pack"]
    assert pack.op.output.shape == (3, 3, 16)  # ceil(37 / 16) blocks, K, 16
    assert [st.op.name for st in s.stages] == ["A", "B", "B.pack", "matmul.local", "matmul"]
    b = np.arange(3 * 37, dtype=np.float32).reshape(3, 37)
    got, = evaluate([dag.tensors[1], pack.op.output], [b])  # the numpy reference of the copy
    want = np.zeros((3, 3, 16), np.float32)
    for j in range(37):
        want[j // 16, :, j % 16] = b[:, j]
    np.testing.assert_array_equal(got, want)


def test_pack_record_round_trip_and_follow_split_tail_field():
    step = PackStep(1, 2, 1, 5)
    assert step.to_json() == ["PK", 1, 2, 1, 5]
    assert step_from_json(["PK", 1, 2, 1, 5]) == step
    # A follow split without a tail writes the record it always wrote; with one, a fifth field.
    assert FollowSplitStep(3, 0, 1, 2).to_json() == ["FSP", 3, 0, 1, 2]
    assert step_from_json(["FSP", 3, 0, 1, 2]) == FollowSplitStep(3, 0, 1, 2, "auto")
    assert FollowSplitStep(3, 0, 1, 2, "peel").to_json() == ["FSP", 3, 0, 1, 2, "peel"]
    with pytest.raises(ValueError, match="expected 4 or 5 fields"):
        step_from_json(["FSP", 3, 0, 1, 2, "peel", 7])


def test_packed_schedule_replays_from_its_record():
    dag, s = packed_gemm(17, 31, 7, (8, 16), (4, 8, 4))
    again = dag.replay([step_from_json(x.to_json()) for x in s.steps])
    assert dag.lower(again) is not None
    assert str(dag.lower(again)) == str(dag.lower(s))


@pytest.mark.parametrize("bad,match", [
    (lambda s, j: s.pack("A", "matmul", 1, j), "does not read it"),
    (lambda s, j: s.pack("B", "matmul.local", 2, j), "dimension 2 outside"),
    (lambda s, j: s.pack("B", "matmul.local", 1, 0), "not a split"),
    (lambda s, j: s.pack("B", "matmul.local", 1, 99), "does not exist"),
])
def test_bad_pack_says_what_is_wrong(bad, match):
    _, s = gemm_state(16, 32, 8, (8, 16), (4, 16, 4), "peel", "peel")
    with pytest.raises(InvalidStepError, match=match):
        bad(s, _j_split(s))


# ---- results on prime extents ------------------------------------------------------------------------

# (M, N, K) from the prime extents 1, 3, 7, 17, 31, 97: every one in every role
CASES = [tuple(PRIMES[i] for i in ix) for ix in [(0, 0, 0), (1, 2, 3), (3, 4, 5), (5, 3, 1), (4, 5, 2), (2, 1, 4)]]


@pytest.mark.parametrize("M,N,K", CASES)
@pytest.mark.parametrize("reg,out_tail,acc_tail", [((4, 16, 8), "peel", "peel"), ((3, 6, 5), "guard", "peel"),
                                                    ((2, 5, 3), "peel", "guard"), ((4, 16, 8), "peel", "pad"),
                                                    ((3, 8, 2), "shift", "pad")])
def test_packed_gemm_on_prime_extents_matches_reference(M, N, K, reg, out_tail, acc_tail):
    reg = tuple(min(r, e) for r, e in zip(reg, (M, N, K)))
    tile = (min(8, M), min(2 * reg[1], N))
    dag, s = packed_gemm(M, N, K, tile, reg, out_tail, acc_tail)
    assert_matches_reference(ansor.build(s), dag, _inputs(dag), what=f"{M}x{N}x{K} {reg}")


def test_packed_dense_and_conv_match_reference():
    """The packed layouts of the other readers: a dense weight [N, K] read along N (a transpose
    into blocks) and a conv's HWIO weight blocked over O."""
    for dag in (ansor.ComputeDAG(W.dense(7, 37, 19)), ansor.ComputeDAG(W.conv2d_nhwc(1, 9, 9, 5, 19, 3, 3, 1, 1))):
        hw = host_hardware_params()
        sk = [x for x in generate_sketches(dag, hardware_params=hw)
              if any(isinstance(st, PackStep) for st in x.steps)]
        assert sk
        pop = sample_initial_population(sk, 6, random.Random(1), SearchParams().with_hardware(hw))
        assert pop
        for state in pop:
            assert_matches_reference(ansor.build(state), dag, _inputs(dag), what=str([x.to_json() for x in state.steps]))


# ---- the code it lowers to ----------------------------------------------------------------------------

def test_packed_micro_kernel_reads_whole_vectors():
    """Unpacked, the register tile reads B's rows N floats apart; packed, one block is a K x 16
    strip, and the clean copy of the tile loads it as whole vectors: no gather anywhere, even
    with prime N and K (the padding makes the last block whole)."""
    dag, s = packed_gemm(61, 97, 31, (16, 32), (4, 16, 8))
    k = ansor.build(s)
    assert "masked.gather" not in k.llvm_ir
    assert "load <16 x float>" in k.llvm_ir


def test_padded_accumulator_runs_without_tests_and_reads_clamped():
    """A "pad" tail on the accumulator's i and j: the whole register tile is computed past M and N
    into the local buffer (rows clamped to M - 1, packed blocks to the last), so the accumulator
    has no test left anywhere, partial tiles included; only the copy-out tests, and no gather."""
    dag, s = packed_gemm(61, 97, 31, (16, 32), (4, 16, 8), out_tail="peel", acc_tail="pad")
    f = lower(s)
    # The accumulator's nests (under its outer reduction loop k.0): the only tests left in them
    # are the k tail's (k < 31), none on the rows (< 61) or columns (< 97). With "peel" there are.
    def row_col_tests(state) -> int:
        nests = [x for x in L.walk(lower(state).body) if isinstance(x, L.For) and x.var.name == "k.0"]
        assert nests
        return sum(1 for x in nests for y in L.walk(x) if isinstance(y, L.IfThenElse)
                   and ("< 61" in str(y.cond) or "< 97" in str(y.cond)))
    assert row_col_tests(s) == 0
    assert row_col_tests(packed_gemm(61, 97, 31, (16, 32), (4, 16, 8), "peel", "peel")[1]) > 0
    assert "min(" in str(f) and ", 60)" in str(f) and ", 6)" in str(f)  # rows and blocks clamped
    k = ansor.build(s)
    assert "masked.gather" not in k.llvm_ir
    assert_matches_reference(k, dag, _inputs(dag), what="61x97x31 pad")


@pytest.mark.parametrize("at", ["k.0", "i.0", "j.0"])
def test_padded_accumulator_with_the_pack_filled_inside_its_loops(at):
    """The pack computed at a loop of the padding accumulator: a sub-tile of the last tile can lie
    wholly past N (cols 40..63 of 37), its block region starting past the last block; the
    clamped reads must stay inside that region buffer (this read out of bounds, SIGSEGV, once)."""
    dag, s = packed_gemm(13, 37, 5, (8, 32), (4, 8, 2), out_tail="peel", acc_tail="pad")
    s = s.compute_at("B.pack", "matmul.local", at)
    a, b = _inputs(dag)
    out = np.zeros((13, 37), np.float32)
    interp.run(lower(s), [a, b, out])  # raises IndexError on any access outside a buffer
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
    assert_matches_reference(ansor.build(s), dag, [a, b], what=f"pack at {at}")


def test_pad_on_an_unpacked_vector_axis_keeps_its_test():
    """Unpacked, a vector past N would read B[k, min(j, N - 1)] lane by lane (a gather): lowering
    keeps that axis's test (a peel) and pads only the rows."""
    dag, s = gemm_state(61, 97, 31, (16, 32), (4, 16, 8), "peel", "pad")
    f = lower(s)
    text = str(f)
    assert "min(" in text and ", 60)" in text and ", 96)" not in text
    k = ansor.build(s)
    assert "masked.gather" not in k.llvm_ir
    assert_matches_reference(k, dag, _inputs(dag), what="61x97x31 unpacked pad")


# ---- the sketches ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dag,input_name,dim", [
    (ansor.ComputeDAG(W.matmul(64, 48, 32)), "B", 1),
    (ansor.ComputeDAG(W.dense(8, 48, 32)), "weight", 0),
    (ansor.ComputeDAG(W.batch_matmul(2, 16, 48, 32)), "B", 2),
    (ansor.ComputeDAG(W.conv2d_nhwc(1, 8, 8, 16, 32, 3, 3, 1, 1)), "kernel", 3),
])
def test_sketches_pack_the_reused_input(dag, input_name, dim):
    hw = host_hardware_params()
    plain = generate_sketches(dag, hardware_params=hw, pack_inputs=False)
    every = generate_sketches(dag, hardware_params=hw)
    packed = [x for x in every if any(isinstance(st, PackStep) for st in x.steps)]
    assert [x.canonical_key() for x in every if x not in packed] == [x.canonical_key() for x in plain]
    assert packed
    for x in packed:
        pk = next(st for st in x.steps if isinstance(st, PackStep))
        assert x.stages[pk.stage_id].op.name == input_name and pk.dim == dim
        # the consumer's partial tiles are peeled: tiles start at multiples of the block
        assert all(st.tail == "peel" for st in x.steps if isinstance(st, FollowSplitStep))


def test_nothing_to_pack_without_reuse_of_the_innermost_axis():
    dag = ansor.ComputeDAG(W.softmax(16, 64))
    hw = host_hardware_params()
    for x in generate_sketches(dag, hardware_params=hw):
        assert not any(isinstance(st, PackStep) for st in x.steps)
    s = ansor.ComputeDAG(W.matmul(8, 8, 8)).init_state()
    assert packable_input(s, 2) == (1, 1)  # B[k, j] in matmul


def test_pack_block_follows_the_tile_size():
    """The block is the accumulator's innermost j length after tile sizes are drawn, in every
    sample (so mutating the tile moves the layout with it)."""
    dag = ansor.ComputeDAG(W.matmul(64, 96, 32))
    hw = host_hardware_params()
    sk = [x for x in generate_sketches(dag, hardware_params=hw)
          if any(isinstance(st, PackStep) for st in x.steps)]
    pop = sample_initial_population(sk, 10, random.Random(0), SearchParams().with_hardware(hw))
    assert pop
    for state in pop:
        pk = next(st for st in state.steps if isinstance(st, PackStep))
        v = state.steps[pk.src_step_id].lengths[-1]
        assert state.stages[pk.stage_id + 1].op.output.shape[-1] == v
