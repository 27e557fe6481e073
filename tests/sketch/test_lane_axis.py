"""An accumulator laid out with a channel axis innermost (``CacheWriteStep.axis_order``) and the
sketch rule that asks for it when the output's own innermost axis is a poor vector length (an
NCHW convolution's 27 output columns): the step and its record, results against the reference,
which workloads get the extra sketch, and random samples of it."""
from __future__ import annotations

import random

import numpy as np
import pytest

import ansor
from compute.ops import workloads as W
from measure.target import host_hardware_params
from sketch.init_population import sample_initial_population
from sketch.loop_state import InvalidStepError
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from sketch.stage_patterns import consumer_read_order, lane_axis_order, multi_level_tiling, with_pack
from sketch.transform_steps import CacheWriteStep, PackStep, step_from_json
from tests.util import assert_matches_reference


def _conv_nchw(H=9, CI=8, CO=32):
    return ansor.ComputeDAG(W.conv2d_nchw(1, H, H, CI, CO, 3, 3, 1, 1))


def _inputs(dag, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(t.shape)).astype("float32") for t in dag.tensors[:-1]]


def _permuted(x) -> bool:
    return any(isinstance(st, CacheWriteStep) and st.axis_order for st in x.steps)


# ---- the step ------------------------------------------------------------------------------------

def test_record_of_the_own_order_is_unchanged_and_a_permutation_round_trips():
    assert CacheWriteStep(3).to_json() == ["CHW", 3, "local"]
    step = CacheWriteStep(3, "local", (0, 2, 3, 1))
    assert step.to_json() == ["CHW", 3, "local", [0, 2, 3, 1]]
    assert step_from_json(step.to_json()) == step
    assert step_from_json(["CHW", 3, "local"]) == CacheWriteStep(3)


@pytest.mark.parametrize("order", [(0, 1, 2), (0, 0, 1, 2), (0, 1, 2, 4), (0, 1, 2, True)])
def test_an_order_that_is_not_a_permutation_is_refused_by_name(order):
    s = _conv_nchw().init_state()
    with pytest.raises(InvalidStepError, match="not a permutation"):
        s.cache_write("conv2d_nchw", axis_order=order)


def test_the_accumulator_is_laid_out_channels_last_and_computes_the_reference():
    dag = _conv_nchw()
    s = dag.init_state().cache_write("conv2d_nchw", axis_order=(0, 2, 3, 1))
    assert s["conv2d_nchw.local"].op.output.shape == (1, 9, 9, 32)
    assert s["conv2d_nchw"].op.output.shape == (1, 32, 9, 9)
    sid = s.stage_index("conv2d_nchw.local")
    assert consumer_read_order(s, sid, sid + 1) == (0, 2, 3, 1)
    tiled, steps = multi_level_tiling(s, sid)
    packed = with_pack(tiled, sid, steps[-1])
    assert packed is not None
    pk = next(st for st in packed.steps if isinstance(st, PackStep))
    assert packed.stages[pk.stage_id].op.name == "kernel" and pk.dim == 0  # packed by output channel
    for st in (s, tiled, packed):
        assert_matches_reference(ansor.build(st), dag, _inputs(dag), what=str(st.steps[-1].to_json()))


# ---- the sketches ----------------------------------------------------------------------------------

def test_the_order_moves_the_output_channels_innermost_only_when_the_rows_are_poor_vectors():
    s = ansor.ComputeDAG(W.conv2d_nchw(1, 27, 27, 64, 192, 5, 5, 1, 2)).init_state()
    assert lane_axis_order(s, s.stage_index("conv2d_nchw")) == (0, 2, 3, 1)
    for dag, name in [(ansor.ComputeDAG(W.conv2d_nchw(1, 56, 56, 16, 32, 3, 3, 1, 1)), "conv2d_nchw"),
                      (ansor.ComputeDAG(W.conv2d_nhwc(1, 27, 27, 16, 32, 3, 3, 1, 1)), "conv2d_nhwc"),
                      (ansor.ComputeDAG(W.matmul(333, 555, 777)), "matmul"),
                      (ansor.ComputeDAG(W.conv2d_nchw(1, 27, 27, 16, 12, 3, 3, 1, 1)), "conv2d_nchw")]:
        st = dag.init_state()
        assert lane_axis_order(st, st.stage_index(name)) is None, dag


def test_sketches_add_the_channels_last_accumulator_fused_into_its_copy():
    hw = host_hardware_params()
    every = generate_sketches(_conv_nchw(), hardware_params=hw)
    perm = [x for x in every if _permuted(x)]
    assert perm and len(perm) < len(every)
    for x in perm:
        local = x["conv2d_nchw.local"]
        assert local.op.output.shape == (1, 9, 9, 32)
        assert local.compute_at == "iter" and x.stages[local.attach[0]].op.name == "conv2d_nchw"
    assert any(any(isinstance(st, PackStep) for st in x.steps) for x in perm)
    # Workloads whose innermost axis is already a good vector length get no extra sketch.
    for dag in (ansor.ComputeDAG(W.matmul(64, 48, 32)),
                ansor.ComputeDAG(W.conv2d_nhwc(1, 9, 9, 8, 32, 3, 3, 1, 1))):
        assert not any(_permuted(x) for x in generate_sketches(dag, hardware_params=hw))


def test_random_samples_of_the_channels_last_sketches_compute_the_reference():
    dag = _conv_nchw(H=7, CI=4, CO=32)
    hw = host_hardware_params()
    perm = [x for x in generate_sketches(dag, hardware_params=hw) if _permuted(x)]
    pop = sample_initial_population(perm, 12, random.Random(0), SearchParams().with_hardware(hw))
    assert len(pop) >= 6
    data = _inputs(dag, seed=1)
    for state in pop:
        assert_matches_reference(ansor.build(state), dag, data,
                                 what=str([st.to_json() for st in state.steps]))


@pytest.mark.parametrize("field", ["0231", [[0], 2, 3, 1], [0, 2, 3, 1, 4], [0, 2, 3, 10 ** 30],
                                   [-1, 2, 3, 1], [0.0, 2, 3, 1]])
def test_a_hostile_record_order_does_not_replay_and_says_why(field):
    """A log is untrusted input: a CHW record whose order is not a permutation of the stage's
    axes is refused with InvalidStepError (the record readers skip such a line) or, for a value
    no step field may hold, a ValueError from parsing."""
    dag = _conv_nchw()
    try:
        step = step_from_json(["CHW", 3, "local", field])
    except ValueError as e:
        assert "CHW" in str(e)
        return
    with pytest.raises(InvalidStepError, match="not a permutation"):
        dag.replay([step])
