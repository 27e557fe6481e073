"""HardwareParams: the machine a task is searched for is data on the task, not this host.

A SearchTask stating 16 cores on this (smaller) machine gets sketches and annotations written for
16 cores; without a statement it gets this host's facts, read by measure (ANSOR_NUM_THREADS
included); the search itself never asks the machine.
"""
from __future__ import annotations

import dataclasses

import pytest

import ansor
from compute.ops import workloads as W
from cost_model import RandomModel
from measure import runtime
from measure.target import host_hardware_params, vector_bits
from sketch.hardware import HardwareParams
from sketch.search_policy import SearchParams, SketchPolicy
from sketch.sketch_rules import generate_sketches
from sketch.transform_steps import RfactorStep

SIXTEEN = HardwareParams(num_cores=16, vector_bits=256)
TWO = HardwareParams(num_cores=2, vector_bits=256)


def _parallel_extents(state) -> list[int]:
    return [it.extent for st in state.stages for it in st.leaf_iters if it.annotation == "parallel"]


def test_parallel_annotation_targets_the_stated_cores():
    # relu over 4 x 8 x 64: parallel loops are fused until cores * 16 iterations, so 2 cores stop
    # at 4 * 8 = 32 and 16 cores need all three loops (2048 >= 256).
    extents = {}
    for hw in (TWO, SIXTEEN):
        task = ansor.SearchTask(tensors=W.relu(4, 8, 64), hardware_params=hw)
        pol = SketchPolicy(task, RandomModel(0), SearchParams(population_size=8), seed=0)
        assert pol.params.cores() == hw.num_cores and pol.params.vector_width() == 8 * 2
        pop = pol.sample_initial_population(8)
        extents[hw.num_cores] = {e for s in pop for e in _parallel_extents(s)}
    assert extents == {2: {32}, 16: {2048}}


def test_rfactor_rule_follows_the_stated_cores():
    # 8 x 8 outputs, 1024-long reductions: too little parallelism for 16 cores, enough for 2.
    def has_rfactor(hw: HardwareParams) -> bool:
        task = ansor.SearchTask(tensors=W.matmul(8, 8, 1024), hardware_params=hw)
        pol = SketchPolicy(task, RandomModel(0), SearchParams(population_size=8), seed=0)
        return any(isinstance(st, RfactorStep) for s in pol.sketches for st in s.steps)

    assert has_rfactor(SIXTEEN) and not has_rfactor(TWO)


def test_explicit_search_params_win_over_the_machine():
    task = ansor.SearchTask(tensors=W.relu(4, 8, 64), hardware_params=SIXTEEN)
    pol = SketchPolicy(task, RandomModel(0), SearchParams(num_cores=3, max_vector_lanes=4), seed=0)
    assert (pol.params.cores(), pol.params.vector_width()) == (3, 8)


def test_a_task_without_a_statement_gets_this_host(monkeypatch):
    monkeypatch.setenv(runtime.ENV_NUM_THREADS, "3")
    hw = ansor.SearchTask(tensors=W.relu(4, 8)).hardware_params
    assert hw == host_hardware_params()
    assert hw.num_cores == 3 and hw.vector_bits == vector_bits()
    assert hw.vector_lanes == vector_bits() // 32 and hw.cache_line_bytes >= 16 and hw.target


def test_the_search_does_not_guess_the_machine():
    class Bare:  # a task with no hardware_params
        compute_dag = ansor.ComputeDAG(W.relu(4, 8))
        workload_key = compute_dag.workload_key

    with pytest.raises(TypeError, match="hardware_params"):
        SketchPolicy(Bare(), RandomModel(0))
    with pytest.raises(TypeError, match="num_cores"):
        generate_sketches(Bare.compute_dag)
    with pytest.raises(ValueError, match="SearchParams.num_cores is not set"):
        SearchParams().cores()
    with pytest.raises(ValueError, match="max_vector_lanes is not set"):
        SearchParams().vector_width()
    assert SketchPolicy(Bare(), RandomModel(0), hardware_params=TWO).params.cores() == 2


@pytest.mark.parametrize("bad", [{"num_cores": 0}, {"num_cores": True}, {"num_cores": 2, "vector_bits": 100},
                                 {"num_cores": 2, "l2_cache_bytes": -1}, {"num_cores": 2, "target": 3}])
def test_bad_hardware_params_name_the_field(bad):
    field = next((k for k in bad if k != "num_cores"), "num_cores")
    with pytest.raises((ValueError, TypeError), match=field):
        HardwareParams(**bad)


def test_hardware_params_are_frozen_and_not_in_the_record():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SIXTEEN.num_cores = 4  # type: ignore[misc]
    with pytest.raises(TypeError, match="HardwareParams"):
        ansor.SearchTask(tensors=W.relu(4, 8), hardware_params={"num_cores": 16})
    a = ansor.SearchTask(tensors=W.relu(4, 8), hardware_params=SIXTEEN)
    assert a.to_json() == ansor.SearchTask(tensors=W.relu(4, 8)).to_json()
