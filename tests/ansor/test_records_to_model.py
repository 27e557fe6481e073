"""Records read once, by the records layer, feed every consumer: the cost model learns from the
``(MeasureInput, MeasureResult)`` pairs ``ansor.records.load_records`` yields (the same samples
``update_from_file`` finds), and tuning resumes through ``record_to_input`` (a line whose steps
do not replay is skipped with a warning naming the line)."""
from __future__ import annotations

import json

import pytest

import ansor
from ansor.records import load_records, record_to_input
from cost_model import LGBModel
from measure.measure import MeasureErrorNo, MeasureInput, MeasureResult
from measure.record import LineWarner, RecordToFile, RecordWarning, iter_lines


def _log(tmp_path, n: int = 6):
    task = ansor.SearchTask(func="matmul", args=(32, 32, 32))
    s0 = task.compute_dag.init_state()
    states = [s0.split("matmul", "i", [f]) for f in (1, 2, 4, 8, 16, 32)[:n]]
    results = [MeasureResult((1e-3 * (i + 1),), int(MeasureErrorNo.NO_ERROR))
               for i in range(len(states))]
    path = tmp_path / "log.json"
    RecordToFile(path)([MeasureInput(task, s) for s in states], results)
    return task, states, path


def test_the_model_learns_from_loaded_records_as_from_the_file(tmp_path):
    task, states, path = _log(tmp_path)
    a, b = LGBModel(seed=0), LGBModel(seed=0)
    assert a.update_from_records(load_records(path)) == len(states)
    assert b.update_from_file(path) == len(states)
    assert a.num_samples() == b.num_samples()
    assert (a.predict(task, states) == b.predict(task, states)).all()


def test_a_line_that_does_not_replay_is_reported_with_its_number(tmp_path):
    task, _, path = _log(tmp_path, 2)
    lines = path.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["input"]["steps"] = [["SP", 2, 0, 32, [64], True]]  # i (32) split by 64: a bad factor
    path.write_text(lines[0] + "\n" + json.dumps(bad) + "\n")
    warner = LineWarner(str(path))
    with pytest.warns(RecordWarning, match=r"log\.json:2: skipped record: its steps do not "
                                           r"replay on matmul\(32, 32, 32\)"):
        got = [record_to_input(line, task, warner) for line in iter_lines(path, warner)]
        warner.finish()
    assert got[0] is not None and got[0].task is task and got[0].state.steps
    assert got[1] is None
