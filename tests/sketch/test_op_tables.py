"""The producer / consumer tables shared by states with the same operations (sketch.op_tables):
equal to tables built afresh, shared on a hit, rebuilt for other operations, and bounded."""
from __future__ import annotations

import random

import ansor
from measure.target import host_hardware_params
from sketch import op_tables
from sketch.init_population import sample_initial_population
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches


def test_tables_equal_fresh_ones_on_sampled_states():
    op_tables.clear_cache()
    hw = host_hardware_params()
    for func, args in (("matmul", (64, 48, 32)), ("conv2d_bias_relu", (1, 14, 14, 16, 16, 3, 3, 1, 1))):
        task = ansor.SearchTask(func=func, args=args)
        pop = sample_initial_population(generate_sketches(task.compute_dag, hardware_params=hw), 32,
                                        random.Random(1), SearchParams().with_hardware(hw))
        for s in pop:
            fresh_p = op_tables.build_producer_table(s.stages)
            assert s.producer_map() == fresh_p
            fresh_c = op_tables.build_consumer_table(s.stages, fresh_p)
            assert {k: s.consumers(k) for k in range(len(s.stages))} == fresh_c


def test_shared_on_the_same_operations_rebuilt_on_others():
    op_tables.clear_cache()
    dag = ansor.SearchTask(func="matmul", args=(16, 16, 16)).compute_dag
    a, b = dag.init_state(), dag.init_state()
    assert a is not b and a.producer_map() is b.producer_map()  # same operations: one table
    assert op_tables.consumer_table(dag, a.stages) is op_tables.consumer_table(dag, b.stages)
    c = a.cache_write(a.stages[-1].name)
    assert c.producer_map() is not a.producer_map()  # a new operation: its own tables
    assert c.producer_map() == op_tables.build_producer_table(c.stages)
    assert len(c.stages) == len(a.stages) + 1


def test_bounded(monkeypatch):
    op_tables.clear_cache()
    monkeypatch.setattr(op_tables, "MAX_ENTRIES", 1)
    dag = ansor.SearchTask(func="matmul", args=(16, 16, 16)).compute_dag
    s = dag.init_state()
    op_tables.producer_table(dag, s.stages)
    op_tables.producer_table(dag, s.cache_write(s.stages[-1].name).stages)
    assert len(op_tables._CACHE[dag]) == 1
    op_tables.clear_cache()
    assert dag not in op_tables._CACHE
