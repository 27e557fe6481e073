"""``best_records``: the best record of each of several tasks in one pass over the log.

A network compile asks for the best schedule of each of its tasks; asking ``best_record`` once
per task parsed the whole log once per task (18 times for ResNet-18).
"""
from __future__ import annotations

from ansor import task_records
from ansor.records import RecordToFile, best_record, best_records
from ansor.search_task import SearchTask
from measure.measure import MeasureErrorNo, MeasureInput, MeasureResult


def _log(path, tasks):
    cb = RecordToFile(path)
    for t in tasks:
        s0 = t.compute_dag.init_state()
        op = t.compute_dag.output_ops[0].name
        states = [s0, s0.split(op, "i", [2]), s0.split(op, "i", [4])]
        cb([MeasureInput(t, s) for s in states],
           [MeasureResult((3e-3,), 0), MeasureResult((1e-3,), 0),
            MeasureResult((1e-9,), MeasureErrorNo.RUN_TIMEOUT, "slow")])


def test_best_records_reads_the_log_once_and_agrees_with_best_record(tmp_path, monkeypatch):
    tasks = [SearchTask(func="matmul", args=(16, 8, 4)), SearchTask(func="matmul", args=(8, 8, 8))]
    unrecorded = SearchTask(func="matmul", args=(4, 4, 4))
    path = tmp_path / "log.json"
    _log(path, tasks)
    want = [best_record(path, t) for t in tasks + [unrecorded]]
    reads = []
    real = task_records.iter_lines

    def counting(*args, **kwargs):
        reads.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(task_records, "iter_lines", counting)
    got = best_records(path, tasks + [unrecorded])
    assert len(reads) == 1
    assert got[2] is None and want[2] is None
    for (gi, gr), (wi, wr), t in zip(got[:2], want[:2], tasks):
        assert gi.task is t and gr == wr
        assert gi.state.canonical_key() == wi.state.canonical_key()
