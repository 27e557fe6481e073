"""Network timing mode at the tuner's end: a network's tasks know their constants and their
network footprint (the other kernels' argument bytes); a network-mode record says so and loads
back; the best of a task prefers network-mode records, then cold, then warm; a resumed run counts
only its own mode's records."""
from __future__ import annotations

import json
import types

from ansor.graph.plan import plan_network
from ansor.graph.tasks import argument_bytes
from ansor.measurer import ProgramMeasurer
from ansor.records import RecordToFile, best_record, best_records
from ansor.resume import restore_log
from ansor.search_task import SearchTask
from measure.measure import COLD, NETWORK, WARM, MeasureInput, MeasureResult, network_conditions
from measure.record import iter_lines
from tests.ansor.graph.test_layout_rewrite import conv_dense_net

TASK = dict(func="matmul", args=(16, 8, 4))


def test_a_networks_tasks_carry_their_constants_and_footprint():
    plan = plan_network(conv_dense_net())
    total = sum(argument_bytes(o.dag) for o in plan.occurrences)
    conv = plan.occurrences[0].dag  # conv + bias + relu, 3x9x9x8 -> 3x9x9x24, weight 3x3x8x24
    assert argument_bytes(conv) == 4 * (3 * 9 * 9 * 8 + 3 * 3 * 8 * 24 + 24 + 3 * 9 * 9 * 24)
    for ti, task in enumerate(plan.tasks):
        own = next(plan.occurrences[i].dag for i, t in plan.task_of.items() if t == ti)
        assert task.network_footprint_bytes == total - argument_bytes(own) > 0
        assert network_conditions(task) == {"constants": list(task.constant_inputs),
                                            "footprint": task.network_footprint_bytes}
    assert {t.desc.split()[0]: t.constant_inputs for t in plan.tasks}["global_avg_pool"] == ()
    off = plan_network(conv_dense_net(), layout_rewrite=False)  # constants known without rewrite
    assert [network_conditions(t) for t in off.tasks] == [network_conditions(t) for t in plan.tasks]


def _states(task):
    s0 = task.compute_dag.init_state()
    op = task.compute_dag.output_ops[0].name
    return [s0, s0.split(op, "i", [2]), s0.split(op, "i", [4])]


def _log(path, task, costs):
    """``costs``: (mode, [cost of state 0, of state 1, ...]) in log order."""
    cb = RecordToFile(path)
    states = _states(task)
    for mode, cs in costs:
        cb([MeasureInput(task, s) for s in states[:len(cs)]], [MeasureResult((c,), 0, cache=mode) for c in cs])


def test_a_network_mode_record_says_so_and_loads_back(tmp_path):
    task = SearchTask(**TASK)
    path = tmp_path / "log.json"
    _log(path, task, [(WARM, [1e-3]), (NETWORK, [2e-3])])
    raw = path.read_bytes().splitlines()
    assert "cache" not in json.loads(raw[0])["result"]
    assert json.loads(raw[1])["result"]["cache"] == NETWORK
    assert [ln.result.cache for ln in iter_lines(path)] == [WARM, NETWORK]


def test_the_best_prefers_network_mode_then_cold_then_warm(tmp_path):
    task = SearchTask(**TASK)
    keys = [s.canonical_key() for s in _states(task)]
    path = tmp_path / "all.json"
    # Each mode's fastest is another state; network mode's is the slowest of all costs.
    _log(path, task, [(WARM, [1e-4, 2e-4, 3e-4]), (COLD, [3e-3, 1e-3]), (NETWORK, [9e-3, 8e-3, 7e-3])])
    inp, res = best_record(path, task)
    assert res.cache == NETWORK and inp.state.canonical_key() == keys[2]
    assert best_records(path, [task], cache=COLD)[0][1].cache == COLD
    assert best_records(path, [task], cache=WARM)[0][1].cache == WARM
    no_network = tmp_path / "cw.json"
    _log(no_network, task, [(WARM, [1e-4]), (COLD, [3e-3, 1e-3])])
    inp, res = best_record(no_network, task)
    assert res.cache == COLD and inp.state.canonical_key() == keys[1]
    only_warm = tmp_path / "w.json"
    _log(only_warm, task, [(WARM, [1e-4, 2e-5])])
    assert best_records(only_warm, [task], cache=NETWORK)[0][1].cache == WARM  # the other when none


def test_a_resumed_network_mode_run_restores_only_its_own_records(tmp_path):
    task = SearchTask(**TASK)
    path = tmp_path / "log.json"
    _log(path, task, [(WARM, [1e-3, 2e-3]), (COLD, [4e-3]), (NETWORK, [5e-3])])
    m = ProgramMeasurer(types.SimpleNamespace(), types.SimpleNamespace(cache=NETWORK))
    out = restore_log(str(path), [task], {task.workload_key: 0}, m)
    assert len(out.inputs) == 1 and out.other_cache == 3
    assert "this run times network: ignored" in out.note()
    assert all(r.cache == NETWORK for r in out.results)
