"""``TemplateTask.best_config`` reads records through the records layer's one line -> input
function: a best record whose steps do not replay is skipped with a warning naming its line, and
the best record that does replay is returned (it used to raise from deep inside the replay)."""
from __future__ import annotations

import json

import pytest

from ansor import autotvm
from ansor.autotvm.records import ConfigRecordToFile
from measure.measure import MeasureErrorNo, MeasureInput, MeasureResult
from measure.record import RecordWarning


def test_a_best_record_that_does_not_replay_is_skipped(tmp_path):
    task = autotvm.create_task("matmul", (32, 32, 32))
    cfgs = [task.space.get(i) for i in range(3)]
    states = [task.instantiate(c) for c in cfgs]
    log = tmp_path / "log.json"
    ConfigRecordToFile(log, task.template.name, task.space.signature).write(
        [MeasureInput(task.search_task, s) for s in states],
        [MeasureResult((c,), int(MeasureErrorNo.NO_ERROR)) for c in (3e-3, 1e-3, 2e-3)], cfgs)
    lines = log.read_text().splitlines()
    bad = json.loads(lines[1])  # the fastest: its steps are made not to replay
    bad["input"]["steps"] = [["SP", 2, 0, 32, [64], True]]
    lines[1] = json.dumps(bad)
    log.write_text("\n".join(lines) + "\n")
    with pytest.warns(RecordWarning, match=r"log\.json:2: skipped record: its steps do not replay"):
        cfg, state = task.best_config(log)
    assert cfg is not None and cfg.index == cfgs[2].index
    assert state.canonical_key() == states[2].canonical_key()
