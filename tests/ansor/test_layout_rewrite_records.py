"""Records of tasks measured with weight layout rewrite: the task's ``layout_rewrite`` field
round-trips, records without it (every older log) load as before, the workload key does not
change (a network run resumes from either), and a malformed field is a clear, skipped line."""
from __future__ import annotations

import json
import warnings

import pytest

import ansor
from ansor.records import best_record, load_records
from compute.ops import workloads as W
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordToFile, RecordWarning, decode_line, RecordFormatError

from ..sketch.test_pack import packed_gemm


def _write(path, task, state, cost=1e-3):
    RecordToFile(path)([MeasureInput(task, state)], [MeasureResult((cost,), 0)])


def test_the_field_round_trips_for_dag_and_registered_tasks(tmp_path):
    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    log = tmp_path / "log.json"
    task = ansor.SearchTask(tensors=dag, layout_rewrite_inputs=(1,))
    _write(log, task, s)
    reg = ansor.SearchTask(func="matmul", args=(5, 37, 3), layout_rewrite_inputs=[1])
    assert reg.to_json() == {"workload": "matmul", "args": [5, 37, 3], "layout_rewrite": [1]}
    _write(log, reg, s)
    line = json.loads(log.read_text().splitlines()[0])
    assert line["input"]["task"]["layout_rewrite"] == [1]
    loaded = [inp.task for inp, _ in load_records(log)]
    assert [t.layout_rewrite_inputs for t in loaded] == [(1,), (1,)]
    assert ansor.SearchTask.from_json(task.to_json()).layout_rewrite_inputs == (1,)


def test_an_old_record_loads_and_any_task_of_the_workload_finds_it(tmp_path):
    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    log = tmp_path / "log.json"
    _write(log, ansor.SearchTask(tensors=dag), s, 2e-3)  # measured with the pack inside
    (inp, _), = load_records(log)
    assert inp.task.layout_rewrite_inputs == () and "layout_rewrite" not in inp.task.to_json()
    on = ansor.SearchTask(tensors=dag, layout_rewrite_inputs=[1])
    _write(log, on, s, 1e-3)
    # one workload: the rewriting task finds the old record and the new, pooled as one schedule
    best = best_record(log, on)
    assert best is not None and best[0].task is on
    assert best_record(log, ansor.SearchTask(tensors=dag)) is not None


def test_a_bad_task_argument_is_a_clear_error():
    dag = ansor.ComputeDAG(W.matmul(4, 8, 2))
    with pytest.raises(ValueError, match="argument 2 .* is an output"):
        ansor.SearchTask(tensors=dag, layout_rewrite_inputs=[2])
    with pytest.raises(ValueError, match="outside 0..2"):
        ansor.SearchTask(tensors=dag, layout_rewrite_inputs=[5])
    with pytest.raises(TypeError, match="list of argument positions"):
        ansor.SearchTask(tensors=dag, layout_rewrite_inputs="1")


@pytest.mark.parametrize("bad", ["1", {"a": 1}, [True], [-1], [1, 1], [1.0], list(range(2000))])
def test_a_malformed_field_is_rejected_when_read(tmp_path, bad):
    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    log = tmp_path / "log.json"
    _write(log, ansor.SearchTask(tensors=dag, layout_rewrite_inputs=[1]), s)
    rec = json.loads(log.read_text())
    rec["input"]["task"]["layout_rewrite"] = bad
    text = json.dumps(rec)
    with pytest.raises(RecordFormatError, match="input.task.layout_rewrite must be a list of distinct"):
        decode_line(text)
    log.write_text(text + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(load_records(log)) == []
    assert any(issubclass(w.category, RecordWarning) and "layout_rewrite" in str(w.message) for w in caught)


def test_a_position_the_dag_does_not_have_skips_the_record(tmp_path):
    """Well-formed but wrong for this DAG (the output's position): caught when the task is rebuilt."""
    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    log = tmp_path / "log.json"
    _write(log, ansor.SearchTask(tensors=dag, layout_rewrite_inputs=[1]), s)
    rec = json.loads(log.read_text())
    rec["input"]["task"]["layout_rewrite"] = [2]
    log.write_text(json.dumps(rec) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(load_records(log)) == []
    assert any("is an output" in str(w.message) for w in caught)


def test_a_network_run_resumes_from_records_with_and_without_the_field(tmp_path):
    """``restore_log`` matches by workload key: a rewriting network task restores the records it
    wrote and those of an older run without rewrite, replayed on the task it holds."""
    from ansor.measurer import ProgramMeasurer
    from ansor.resume import restore_log
    from measure.builder import LocalBuilder
    from measure.runner import LocalRunner

    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    _, s2 = packed_gemm(5, 37, 3, (4, 16), (2, 8, 2))
    log = tmp_path / "log.json"
    _write(log, ansor.SearchTask(tensors=dag), s, 2e-3)
    _write(log, ansor.SearchTask(tensors=dag, layout_rewrite_inputs=[1]), s2, 1e-3)
    task = ansor.SearchTask(tensors=dag, layout_rewrite_inputs=[1])
    m = ProgramMeasurer(LocalBuilder(n_parallel=1), LocalRunner())
    out = restore_log(str(log), [task], {task.workload_key: 0}, m)
    assert len(out.inputs) == 2 and all(inp.task is task for inp in out.inputs)
    assert out.per_task[0] == [2e-3, 1e-3]
