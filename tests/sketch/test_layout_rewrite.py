"""Weight layout rewrite (sketch.layout_rewrite): which pack stages may be given pre-packed, the
exact numpy transform against the pack stage's own definition (zero padding included), and the
kernel lowered without the pack: its arguments are the packed shapes and its results, given the
packed array, equal the reference."""
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
from sketch.layout_rewrite import (PackedArg, check_positions, lower_pre_packed, pack_array,
                                   pack_arguments, rewritable_packs)
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from sketch.transform_steps import PackStep
from tests.util import run_kernel

from .test_pack import packed_gemm
from .test_split_tails import _inputs


def _packed_states(dag, n=4, seed=0):
    hw = host_hardware_params()
    sk = [x for x in generate_sketches(dag, hardware_params=hw)
          if any(isinstance(st, PackStep) for st in x.steps)]
    return sample_initial_population(sk, n, random.Random(seed), SearchParams().with_hardware(hw))


def _check_pre_packed(dag, state, positions, what=""):
    """The kernel without the pack, given ``pack_array`` of the inputs, equals the reference;
    returns the kernel."""
    k = ansor.build(state, layout_rewrite_inputs=positions)
    assert k.packed_args, what
    ins = _inputs(dag)
    want = evaluate(dag, ins)
    for p in k.packed_args:
        assert k.args[p.position].shape == p.packed_shape
        assert k.args[p.position].name.endswith(".pack")
    got = run_kernel(k, dag, pack_arguments(ins, k.packed_args))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=what)
    return k


# ---- the transform -------------------------------------------------------------------------------

@pytest.mark.parametrize("M,N,K,reg", [(5, 37, 3, (2, 16, 2)), (4, 32, 8, (2, 16, 4)), (3, 7, 5, (1, 3, 5))])
def test_pack_array_equals_the_pack_stage(M, N, K, reg):
    dag, s = packed_gemm(M, N, K, (min(4, M), min(32, N)), reg)
    (sid, spec), = rewritable_packs(s, [1]).items()
    assert s.stages[sid].op.name == "B.pack" and spec.dim == 1 and spec.block == reg[1]
    b = np.random.default_rng(0).standard_normal((K, N)).astype(np.float32)
    want, = evaluate([dag.tensors[1], s.stages[sid].op.output], [b])
    got = pack_array(b, spec)
    assert got.shape == spec.packed_shape == want.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    if N % reg[1]:
        assert not got[-1, :, N % reg[1]:].any()  # the padding is zeros


@pytest.mark.parametrize("shape,dim,v", [((3, 3, 5, 19), 3, 8), ((19, 6), 0, 4), ((2, 7, 9), 1, 7), ((5,), 0, 2)])
def test_pack_array_index_math(shape, dim, v):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1
    spec = PackedArg(0, "w", shape, dim, v, "float32")
    got = pack_array(a, spec)
    assert got.shape == spec.packed_shape
    n = shape[dim]
    for d in range(-(-n // v) * v):
        sl = np.take(got[d // v], d % v, axis=-1)
        if d < n:
            np.testing.assert_array_equal(sl, np.take(a, d, axis=dim))
        else:
            assert not sl.any()
    with pytest.raises(ValueError, match="expected shape"):
        pack_array(a.reshape(-1)[:-1] if a.size > 1 else a[:0], spec)


# ---- which packs qualify -------------------------------------------------------------------------

def test_only_packs_of_allowed_inputs_qualify():
    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    assert rewritable_packs(s, []) == {}
    assert rewritable_packs(s, [0]) == {}  # A is not packed
    assert list(rewritable_packs(s, [0, 1])) == [2]
    # nothing rewritten: the kernel is the plain one
    func, packed = lower_pre_packed(s, [0])
    assert packed == () and [b.shape for b in func.params] == [(5, 3), (3, 37), (5, 37)]


def test_a_pack_of_a_copy_does_not_qualify():
    dag, s = packed_gemm(17, 31, 7, (8, 16), (4, 8, 4))
    assert rewritable_packs(s, [1])
    # the pack now copies B's copy, not the argument: the argument B stays as it is
    s2 = s.cache_read("B", "local", ["B.pack"])
    assert [st.op.name for st in s2.stages][:4] == ["A", "B", "B.local", "B.pack"]
    assert rewritable_packs(s2, [0, 1]) == {}
    _check_pre_packed(dag, s, [1])


def test_check_positions_says_what_is_wrong():
    assert check_positions([2, 0], 3) == (0, 2)
    with pytest.raises(ValueError, match="outside 0..2"):
        check_positions([3], 3)
    with pytest.raises(ValueError, match="repeat"):
        check_positions([1, 1], 3)
    with pytest.raises(TypeError, match="ints"):
        check_positions(["1"], 3)
    with pytest.raises(TypeError, match="list of argument positions"):
        check_positions("1", 3)


# ---- the kernel without the pack --------------------------------------------------------------------

def test_pre_packed_gemm_matches_reference_and_has_no_copy():
    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    k = _check_pre_packed(dag, s, [1])
    assert [a.shape for a in k.args] == [(5, 3), (3, 3, 16), (5, 37)]
    func, _ = lower_pre_packed(s, [1])
    written = {st.buffer.name for st in L.walk(func.body) if isinstance(st, L.Store)}
    assert "B.pack" not in written  # the copy is gone; the plain kernel writes it
    plain = ansor.build(s)
    assert plain.packed_args == () and [a.shape for a in plain.args] == [(5, 3), (3, 37), (5, 37)]


@pytest.mark.parametrize("dag", [
    ansor.ComputeDAG(W.dense(7, 37, 19)),
    ansor.ComputeDAG(W.conv2d_nhwc(1, 9, 9, 5, 19, 3, 3, 1, 1)),
    ansor.ComputeDAG(W.conv2d_nhwc(2, 7, 7, 8, 12, 3, 3, 1, 1, groups=2)),
    ansor.ComputeDAG(W.batch_matmul(2, 5, 24, 7)),
], ids=["dense", "conv", "grouped-conv", "batch-matmul"])
def test_pre_packed_sampled_schedules_match_reference(dag):
    """Sampled packed schedules (packs at root or inside the consumer's tiles): every one that
    packs the weight runs without its copy and gives the reference's result."""
    weight = 1
    seen = 0
    for state in _packed_states(dag, 4):
        if rewritable_packs(state, [weight]):
            _check_pre_packed(dag, state, [weight], str([x.to_json() for x in state.steps]))
            seen += 1
    assert seen
