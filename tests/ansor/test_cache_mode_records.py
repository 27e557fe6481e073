"""The timing mode in the records (``result.cache``): a cold record says so, a warm one and every
record written before the modes existed do not and load as warm; the best of a task never ranks a
warm cost against a cold one; a resumed run counts only its own mode's records."""
from __future__ import annotations

import json
import types

import pytest

from ansor.records import RecordToFile, best_record, best_records, distill, load_records
from ansor.resume import restore_log
from ansor.search_task import SearchTask
from ansor.measurer import ProgramMeasurer
from measure.measure import COLD, WARM, MeasureInput, MeasureResult
from measure.record import RecordFormatError, decode_line, iter_lines

TASK = dict(func="matmul", args=(16, 8, 4))


def _states(task):
    s0 = task.compute_dag.init_state()
    op = task.compute_dag.output_ops[0].name
    return [s0, s0.split(op, "i", [2]), s0.split(op, "i", [4])]


def _log(path, task, warm_costs, cold_costs):
    cb = RecordToFile(path)
    states = _states(task)
    cb([MeasureInput(task, s) for s in states[:len(warm_costs)]],
       [MeasureResult((c,), 0) for c in warm_costs])
    cb([MeasureInput(task, s) for s in states[:len(cold_costs)]],
       [MeasureResult((c,), 0, cache=COLD) for c in cold_costs])


def test_a_cold_record_says_so_and_an_old_one_loads_as_warm(tmp_path):
    task = SearchTask(**TASK)
    path = tmp_path / "log.json"
    _log(path, task, [1e-3], [2e-3])
    raw = path.read_bytes().splitlines()
    assert "cache" not in json.loads(raw[0])["result"]  # warm: the line as before
    assert json.loads(raw[1])["result"]["cache"] == COLD
    assert [ln.result.cache for ln in iter_lines(path)] == [WARM, COLD]
    with pytest.raises(RecordFormatError, match="result.cache must be one of"):
        decode_line(raw[1].replace(b'"cold"', b'"tepid"'))


def test_old_logs_load(tmp_path):
    """A published log written before the modes: every record loads, warm."""
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    old = os.path.join(root, "benchmarks", "published", "2026-11-26-znver4-layout-modes",
                       "best_records-a.json")
    lines = list(iter_lines(old))
    assert len(lines) > 10 and all(ln.result.cache == WARM for ln in lines)
    path = tmp_path / "old.json"
    task = SearchTask(**TASK)
    RecordToFile(path)([MeasureInput(task, _states(task)[1])], [MeasureResult((1e-3,), 0)])
    assert b"cache" not in path.read_bytes()
    assert len(list(load_records(path))) == 1 and best_record(path, task)[1].cache == WARM


def test_the_best_never_ranks_a_warm_cost_against_a_cold_one(tmp_path):
    task = SearchTask(**TASK)
    path = tmp_path / "log.json"
    # Warm, state 2 wins (0.5 ms); cold, state 1 wins (3 ms), slower than every warm cost.
    _log(path, task, [1e-3, 2e-3, 5e-4], [4e-3, 3e-3, 6e-3])
    keys = [s.canonical_key() for s in _states(task)]
    cold = best_record(path, task)  # the network's condition first
    assert cold[1].cache == COLD and cold[1].costs == (3e-3,)
    assert cold[0].state.canonical_key() == keys[1]
    warm = best_records(path, [task], cache=WARM)[0]
    assert warm[1].cache == WARM and warm[0].state.canonical_key() == keys[2]
    only_warm = tmp_path / "warm.json"
    _log(only_warm, task, [1e-3, 2e-3, 5e-4], [])
    assert best_records(only_warm, [task], cache=COLD)[0][1].cache == WARM  # the other when none
    out = tmp_path / "distilled.json"
    distill(path, out)  # the best of each mode kept
    assert sorted((ln.result.cache, ln.result.costs) for ln in iter_lines(out)) == \
        [(COLD, (3e-3,)), (WARM, (5e-4,))]


@pytest.mark.parametrize("mode", [WARM, COLD])
def test_a_resumed_run_restores_only_its_own_modes_records(tmp_path, mode):
    task = SearchTask(**TASK)
    path = tmp_path / "log.json"
    _log(path, task, [1e-3, 2e-3], [4e-3])
    runner = types.SimpleNamespace(cache=mode)
    m = ProgramMeasurer(types.SimpleNamespace(), runner)
    out = restore_log(str(path), [task], {task.workload_key: 0}, m)
    assert len(out.inputs) == (2 if mode == WARM else 1)
    assert out.other_cache == (1 if mode == WARM else 2)
    assert f"this run times {mode}: ignored" in out.note()
    assert all(r.cache == mode for r in out.results)


def test_verify_retimes_each_modes_best_in_its_own_mode(tmp_path, monkeypatch):
    import ansor.records as records
    from tests.ansor.sched_fakes import FakeBuilder, FakeRunner

    task = SearchTask(**TASK)
    path = tmp_path / "log.json"
    _log(path, task, [1e-3, 2e-3], [4e-3])
    modes = []

    class Runner(FakeRunner):
        def __init__(self, cache="warm", **kw):
            super().__init__()
            modes.append(cache)

    monkeypatch.setattr(records, "LocalRunner", Runner)
    monkeypatch.setattr(records, "LocalBuilder", lambda **kw: FakeBuilder())
    rows = records.verify_best(path)
    assert sorted(modes) == [COLD, WARM]
    assert sorted(r.recorded for r in rows) == [1e-3, 4e-3] and all(r.measured for r in rows)
