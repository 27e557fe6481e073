"""Sketch generation: the expected structures per workload, validity, and user rules."""
from __future__ import annotations

import pytest

import ansor
from compute.ops import workloads as W
from sketch.lower import lower
from sketch.sketch_rules import (DEFAULT_RULES, ConditionKind, RuleSkipStage, SketchRule,
                                 generate_sketches)
from tests.util import assert_matches_reference
from tests.workloads import CASES

from .test_split_tails import _inputs


def _tags(state):
    return [s.to_json()[0] for s in state.steps]


def _tiled_order(state, stage):
    return [it.name for it in state[stage].leaf_iters]


def test_gemm_gives_tiled_and_cache_write_sketches():
    # Ansor's rules alone; the packing variants of each tiled sketch are tests/sketch/test_pack.py's
    sketches = generate_sketches(ansor.ComputeDAG(W.matmul(64, 48, 40)), num_cores=2, pack_inputs=False)
    assert len(sketches) == 3
    plain = [s for s in sketches if "CHW" not in _tags(s)]
    cached = [s for s in sketches if "CHW" in _tags(s)]
    assert len(plain) == 1 and len(cached) == 2
    assert _tiled_order(plain[0], "matmul") == [
        "i.0", "j.0", "i.1", "j.1", "k.0", "i.2", "j.2", "k.1", "i.3", "j.3"]
    levels = set()
    for s in cached:
        local = s["matmul.local"]
        assert local.compute_at == "iter" and local.attach[0] == s.stage_index("matmul")
        levels.add(s["matmul"].iters[local.attach[1]].name)
    assert levels == {"j.0", "j.1"}  # fused at tile level 1 and level 2


def test_gemm_relu_fuses_the_gemm_into_the_relu():
    sketches = generate_sketches(ansor.ComputeDAG(W.matmul_relu(64, 48, 40)), num_cores=2, pack_inputs=False)
    assert len(sketches) == 2
    for s in sketches:
        assert "CHW" not in _tags(s)
        assert s["matmul"].compute_at == "iter" and s["matmul"].attach[0] == s.stage_index("relu")


def test_conv2d_bias_relu_inlines_bias_and_fuses_conv():
    sketches = generate_sketches(ansor.ComputeDAG(W.conv2d_bias_relu(1, 8, 8, 16, 16, 3, 3, 1, 1)),
                                 num_cores=2, pack_inputs=False)
    assert len(sketches) == 2
    for s in sketches:
        assert s["bias_add"].compute_at == "inline"
        assert s["conv2d_nhwc"].attach[0] == s.stage_index("relu")
        assert len(s["conv2d_nhwc"].leaf_iters) == 4 * 4 + 3 * 2  # n h w co x4, rh rw rc x2
        assert s["conv2d_nhwc_pad"].compute_at == "root"  # not strictly inlineable: placed later


@pytest.mark.parametrize("wl", [W.softmax(8, 24), W.layer_norm(8, 24)], ids=["softmax", "layer_norm"])
def test_small_spatial_reductions_get_rfactor_variants(wl):
    sketches = generate_sketches(ansor.ComputeDAG(wl), num_cores=2)
    assert any("RF" in _tags(s) for s in sketches)
    assert any(any(st.name.endswith(".rf") for st in s.stages) for s in sketches)


def test_a_matrix_vector_product_also_gets_rfactor_sketches():
    """1 x 1280 -> 1001: vectorized along the outputs it would read the weight a row apart per
    lane; factoring the reduction gives a contiguous axis. Tiled sketches stay; a GEMM and a
    short reduction get no rfactor."""
    dag = ansor.ComputeDAG(W.dense(1, 1001, 1280))
    sketches = generate_sketches(dag, num_cores=2)
    assert any("RF" in _tags(s) for s in sketches) and any("RF" not in _tags(s) for s in sketches)
    for s in sketches:
        if "RF" in _tags(s):
            assert_matches_reference(ansor.build(s), dag, _inputs(dag), 1e-4, 1e-3, "rfactor sketch")
    for wl in (W.dense(8, 1001, 1280), W.dense(1, 1001, 64)):
        assert not any("RF" in _tags(s) for s in generate_sketches(ansor.ComputeDAG(wl), num_cores=2))


def _row_block_sketches(dag):
    return [s for s in generate_sketches(dag, num_cores=2)
            if "RF" not in _tags(s) and not any(st.name.endswith(".local") for st in s.stages)
            and len(s.steps) == 2]


def test_a_matrix_vector_product_is_also_computed_a_block_of_rows_at_a_time():
    """The row-block sketch: the consumer's output axis split, the product computed at its outer
    part, the reduction innermost (walking a weight row). Samples lower with one parallel region
    and no factored buffer, and compute the reference; a GEMM and a short reduction do not get it."""
    import random

    from sketch.init_population import sample_initial_population
    from sketch.search_params import SearchParams

    dag = ansor.ComputeDAG(W.dense(1, 1001, 1280))
    (sk,) = _row_block_sketches(dag)
    assert [type(st).__name__ for st in sk.steps] == ["SplitStep", "ComputeAtStep"]
    task = ansor.SearchTask(tensors=dag)
    params = SearchParams().with_hardware(task.hardware_params)
    samples = sample_initial_population([sk], 6, random.Random(0), params)
    assert samples
    for st in samples:
        text = str(lower(st))
        assert ".rf" not in text and text.count("parallel") <= 1, text
        inner = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("for ")]
        assert inner[-2].startswith("for k"), text  # the reduction is the dense stage's innermost loop
        assert_matches_reference(ansor.build(st), dag, _inputs(dag), 1e-4, 1e-3, "row-block sample")
    for wl in (W.dense(8, 1001, 1280), W.dense(1, 1001, 64), W.matmul(64, 48, 40)):
        assert not _row_block_sketches(ansor.ComputeDAG(wl))


def _lane_sketches(dag):
    """Sketches with a stage whose last loops are reduction loops and then a split's inner part."""
    return [s for s in generate_sketches(dag, num_cores=2)
            if any(len(st.leaf_iters) > 2 and st.leaf_iters[-1].name.endswith(".1")
                   and st.leaf_iters[-2].kind == "reduce" and st.leaf_iters[-3].kind == "reduce"
                   for st in s.stages)]


@pytest.mark.parametrize("wl", [W.avg_pool2d(1, 7, 7, 40, 7, 7, 1, 0), W.max_pool2d(1, 9, 9, 19, 3, 3, 2, 1)],
                         ids=["global_avg_c40", "max_k3_s2_c19"])
def test_a_pool_reduces_whole_vectors_of_channels(wl):
    """The lane-reduction sketches: the channel axis split, the window loops between its parts,
    so samples vectorize across channels (the plain sketch's innermost loop is the window's).
    Samples compute the reference, imperfect channel tiles on the prime extent included."""
    import random

    from sketch.init_population import sample_initial_population
    from sketch.search_params import SearchParams

    dag = ansor.ComputeDAG(wl)
    lane = _lane_sketches(dag)
    assert len(lane) == (2 if "avg" in wl[-1].name else 1)  # avg: at the root and at the division
    for sk in lane:
        names = _tiled_order(sk, dag.ops[-1].name + ("_sum" if "avg" in wl[-1].name else ""))
        assert names[-3:] == ["rh", "rw", "c.1"], names
    task = ansor.SearchTask(tensors=dag)
    params = SearchParams().with_hardware(task.hardware_params)
    samples = sample_initial_population(lane, 12, random.Random(0), params)
    assert samples
    assert any("vectorize" in str(lower(st)) for st in samples)
    for st in samples:
        assert_matches_reference(ansor.build(st), dag, _inputs(dag), 1e-5, 1e-5, "lane-reduction sample")


def test_reductions_with_reuse_or_along_the_last_axis_get_no_lane_sketch():
    from sketch.loop_state import State
    from sketch.sketch_rules import RuleLaneReduction, SketchContext

    for wl in (W.matmul(64, 48, 40), W.dense(1, 1001, 1280), W.softmax(8, 24),
               W.layer_norm(8, 24), W.avg_pool2d(1, 7, 7, 5, 7, 7, 1, 0)):
        dag = ansor.ComputeDAG(wl)
        state, ctx = State.initial(dag), SketchContext(dag, 2)
        assert all(RuleLaneReduction().meet_condition(ctx, state, sid) == ConditionKind.SKIP
                   for sid in range(len(state.stages))), wl[-1].name


def test_sketches_print_their_loop_structure():
    text = str(generate_sketches(ansor.ComputeDAG(W.matmul(64, 48, 40)), num_cores=2)[0])
    assert "k.0" in text and "matmul.local = ..." in text


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_sketch_of_every_op_builds_and_matches_reference(case):
    dag = ansor.ComputeDAG(case.make())
    sketches = generate_sketches(dag, num_cores=2, max_sketches=8)
    assert sketches
    for s in sketches[:4]:
        lower(s)
        assert_matches_reference(ansor.build(s), dag, case.make_inputs(0), case.rtol, case.atol,
                                 f"{case.id} sketch {_tags(s)}")


def test_user_rule_can_be_added():
    class InlineNothingButMark(SketchRule):
        name = "mark_parallel"

        def meet_condition(self, ctx, state, sid):
            return ConditionKind.APPLY_AND_SKIP_REST if state.stages[sid].name == "relu" \
                else ConditionKind.SKIP

        def apply(self, ctx, state, sid):
            return [(state.parallel(sid, 0), sid - 1)]

    rules = [InlineNothingButMark()] + list(DEFAULT_RULES)
    sketches = generate_sketches(ansor.ComputeDAG(W.matmul_relu(64, 48, 40)), rules=rules, num_cores=2)
    assert sketches and all(s["relu"].leaf_iters[0].annotation == "parallel" for s in sketches)


def test_a_rule_that_never_moves_on_is_reported_not_looped_forever():
    class Stuck(SketchRule):
        name = "stuck"

        def meet_condition(self, ctx, state, sid):
            return ConditionKind.APPLY_AND_SKIP_REST

        def apply(self, ctx, state, sid):
            return [(state, sid)]

    with pytest.raises(RuntimeError, match="stuck"):
        generate_sketches(ansor.ComputeDAG(W.matmul(8, 8, 8)), rules=[Stuck()], num_cores=2)


def test_a_stage_asking_tile_only_is_tiled_one_way():
    from compute import te

    a = te.placeholder((64, 40), "float32", "A")
    b = te.placeholder((40, 48), "float32", "B")
    k = te.reduce_axis((0, 40), "k")
    for attrs, n in (({"sketch": "tile_only"}, 1), ({}, 3)):
        c = te.compute((64, 48), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="mm", attrs=attrs)
        sketches = generate_sketches(ansor.ComputeDAG([a, b, c]), num_cores=2)
        assert len(sketches) >= n
        if n == 1:
            assert len(sketches) == 1 and "CHW" not in _tags(sketches[0])
            assert _tiled_order(sketches[0], "mm") == [
                "i.0", "j.0", "i.1", "j.1", "k.0", "i.2", "j.2", "k.1", "i.3", "j.3"]


def test_winograd_sketches_are_not_cut_by_the_cap():
    from compute.ops.winograd import conv2d_winograd_workload

    dag = ansor.ComputeDAG(conv2d_winograd_workload(1, 14, 14, 64, 64, 4))
    assert len(generate_sketches(dag, num_cores=2)) < 64  # every GEMM alternative is there
