"""Transform steps: validity errors, replay determinism, record round trip, lowering structure."""
from __future__ import annotations

import json
import random
import re

import pytest

import ansor
from ansor import te
from compute import loop_ir as L
from sketch.loop_state import InvalidStepError
from sketch.lower import check_lowers, lower
from sketch.transform_steps import step_from_json, steps_to_json

from .random_schedules import random_state


def _matmul_relu(M=32, N=24, K=16):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((M, N), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return ansor.ComputeDAG([A, B, D])


def test_split_names_and_extents():
    s = _matmul_relu().init_state().split("C", 0, [4, 2])
    assert [(i.name, i.extent) for i in s["C"].leaf_iters] == [
        ("i.0", 4), ("i.1", 4), ("i.2", 2), ("j", 24), ("k", 16)]
    s2 = _matmul_relu().init_state().split("C", 1, [5], inner_to_outer=False)
    assert [(i.name, i.extent) for i in s2["C"].leaf_iters][1:3] == [("j.0", 5), ("j.1", 5)]


def test_states_are_immutable_and_share_stages():
    s0 = _matmul_relu().init_state()
    s1 = s0.split("C", 0, [8])
    assert len(s0.steps) == 0 and len(s1.steps) == 1
    assert s0["C"].leaves == (0, 1, 2)
    assert s1.stages[s1.stage_index("D")] is s0.stages[s0.stage_index("D")]


def test_split_of_fused_away_iterator_is_rejected():
    s = _matmul_relu().init_state()
    i, j = s["C"].leaf_iters[:2]
    s = s.fuse("C", [i, j])
    with pytest.raises(InvalidStepError, match="no longer a loop|split or fused away"):
        s.split("C", i, [4])
    with pytest.raises(InvalidStepError, match="iterator position 7 does not exist"):
        s.split("C", 7, [4])


def test_invalid_steps_have_clear_errors():
    s = _matmul_relu().init_state()
    with pytest.raises(InvalidStepError, match="at itself"):
        s.compute_at("C", "C", 0)
    with pytest.raises(InvalidStepError, match="cannot vectorize reduction loop k"):
        s.vectorize("C", "k")
    with pytest.raises(InvalidStepError, match="nested parallel"):
        s.parallel("C", 0).parallel("C", 1)
    with pytest.raises(InvalidStepError, match="not consecutive"):
        s.fuse("C", [0, 2])
    with pytest.raises(InvalidStepError, match="spatial and reduce"):
        s.fuse("C", [1, 2])
    with pytest.raises(InvalidStepError, match="not a permutation"):
        s.reorder("C", [0, 0, 1])
    with pytest.raises(InvalidStepError, match="kernel argument"):
        s.compute_inline("D")
    with pytest.raises(InvalidStepError, match="reduction"):
        s.compute_inline("C")
    with pytest.raises(InvalidStepError, match="before any split"):
        s.split("C", 0, [4]).cache_write("C")
    with pytest.raises(InvalidStepError, match="placeholder"):
        s.split("A", 0, [4])
    with pytest.raises(InvalidStepError, match="positive integers"):
        s.split("C", 0, [0])
    with pytest.raises(InvalidStepError, match=r"multiply to 64, more than the extent"):
        s.split("C", 0, [8, 8])
    with pytest.raises(InvalidStepError, match="nothing reads it"):
        s.compute_at("D", "C", 0)
    with pytest.raises(InvalidStepError, match="'D' does not read 'C.local'"):
        s.cache_write("C").compute_at("C.local", "D", 0)
    with pytest.raises(InvalidStepError, match="no stage named"):
        s.split("nope", 0, [2])


def test_nested_parallel_across_stages_is_rejected_at_lowering():
    s = _matmul_relu().init_state().parallel("D", 0).compute_at("C", "D", 0).parallel("C", 1)
    with pytest.raises(InvalidStepError, match="nested parallel"):
        lower(s)
    with pytest.raises(InvalidStepError, match="nested parallel"):
        check_lowers(s)  # the search's filter rejects what lowering rejects


def test_the_search_filter_agrees_with_lowering_on_random_schedules():
    """``check_lowers`` (no loop partitioning) accepts exactly the states ``lower`` accepts,
    peeled, shifted and padded tails included."""
    def accepts(check, s) -> bool:
        try:
            check(s)
            return True
        except InvalidStepError:
            return False

    dag = _matmul_relu()
    rng = random.Random(11)
    verdicts = []
    for _ in range(60):
        s = random_state(dag.init_state(), rng, 12)
        verdicts.append(accepts(lower, s))
        assert accepts(check_lowers, s) == verdicts[-1], s.steps
    assert any(verdicts) and not all(verdicts)  # both kinds of state were drawn


def test_reader_outside_attach_loop_is_rejected():
    # softmax_exp has two readers (the sum and the division); computing it inside the sum's loop
    # leaves the division reading a buffer that is out of scope.
    from compute.ops import workloads as W

    dag = ansor.ComputeDAG(W.softmax(4, 6))
    s = dag.init_state().compute_at("softmax_exp", "softmax_expsum", 0)
    with pytest.raises(InvalidStepError, match="runs outside that loop"):
        lower(s)


def test_replay_and_json_round_trip_reproduce_the_state():
    dag = _matmul_relu()
    rng = random.Random(3)
    for _ in range(20):
        s = random_state(dag.init_state(), rng, 10)
        text = json.dumps(steps_to_json(s.steps))
        steps = [step_from_json(r) for r in json.loads(text)]
        again = dag.replay(steps)
        assert again.canonical_key() == s.canonical_key()
        assert str(again) == str(s)
        try:
            text_s = L.func_str(lower(s))
        except InvalidStepError as err:
            with pytest.raises(InvalidStepError, match=re.escape(str(err))):
                lower(again)
            continue
        assert L.func_str(lower(again)) == text_s


def test_step_records_reject_garbage():
    with pytest.raises(ValueError, match="unknown step record"):
        step_from_json(["XX", 1])
    with pytest.raises(ValueError, match="expected"):
        step_from_json(["SP", 1, 2])


def test_compute_at_allocates_only_the_tile():
    dag = _matmul_relu(64, 40, 48)
    s = dag.init_state().cache_write("C")
    s = s.split("C", 0, [8]).split("C", 2, [16]).reorder("C", [0, 2, 1, 3])
    s = s.compute_at("C.local", "C", 1)
    f = lower(s)
    allocs = [x for x in L.walk(f.body) if isinstance(x, L.Allocate)]
    local = [a.buffer for a in allocs if a.buffer.scope == "local"]
    assert [b.shape for b in local] == [(8, 16)]
    # 40 is not a multiple of 16: the j tail is guarded, i (64 = 8*8) is not.
    conds = [str(x.cond) for x in L.walk(f.body) if isinstance(x, L.IfThenElse)]
    assert conds and all("< 40" in c for c in conds) and not any("< 64" in c for c in conds)


def test_state_prints_loop_structure():
    s = _matmul_relu().init_state().split("C", 0, [8]).parallel("C", 0).compute_inline("D") \
        if False else _matmul_relu().init_state().split("C", 0, [8]).parallel("C", 0)
    text = str(s)
    assert "parallel i.0 (0,4)" in text and "for i.1 (0,8)" in text and "C = ..." in text


def test_replace_stage_is_dataclasses_replace():
    """The fast stage copy every step uses builds what dataclasses.replace builds."""
    import dataclasses

    from sketch.stage import replace_stage

    dag = ansor.SearchTask(func="matmul", args=(16, 16, 16)).compute_dag
    st = dag.init_state().stages[-1]
    for kw in ({}, {"compute_at": "inline", "attach": None}, {"leaves": tuple(reversed(st.leaves))},
               {"auto_unroll_max_step": 16, "attach": (0, 1)}):
        fast, slow = replace_stage(st, **kw), dataclasses.replace(st, **kw)
        assert fast == slow and fast is not st and type(fast) is type(slow)
        assert fast.__dict__ == slow.__dict__
    with pytest.raises(TypeError):
        replace_stage(st, no_such_field=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        replace_stage(st).leaves = ()
