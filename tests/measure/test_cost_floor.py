"""A cost below the physical floor of its computation is not a measurement (measure/cost_floor.py).

Issue 40, item 4: a record claiming 1e-300 s was kept by ``distill`` and shown on resume as
"best 1e-294 us" with a 300-digit GFLOPS. A line whose cost is below what any CPU could do for
the operations it claims is now skipped on reading (every reader), and one below the floor of
its task's own operations and output (a record may under-state its flops) wherever a record is
matched with its task - each with a warning naming file, line, the cost and the floor.
"""
from __future__ import annotations

import glob
import json
import os
import warnings

import pytest

from ansor.records import RecordWarning, best_record, distill, load_records, summarize, verify_best
from ansor.search_task import SearchTask
from measure.cost_floor import cost_floor, dag_cost_floor, implausible_cost
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordFormatError, decode_line, encode_record

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def task() -> SearchTask:
    return SearchTask(func="matmul", args=(128, 128, 128))


def _line(task: SearchTask, cost: float, flop: float | None = None, split: int = 4) -> str:
    state = task.compute_dag.init_state().split("matmul", "i", [split])
    rec = json.loads(encode_record(MeasureInput(task, state), MeasureResult((cost,), 0, "", 0.1, 1.0)))
    if flop is not None:
        rec["input"]["flop"] = flop
    return json.dumps(rec)


def _skips(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, RecordWarning)]


def test_the_floor_is_far_below_real_kernels(task):
    flop, out = dag_cost_floor(task.compute_dag)
    assert (flop, out) == (2 * 128 ** 3, 128 * 128 * 4)
    assert 0 < cost_floor(flop, out) < flop / 100e12  # 100 TFLOPS is a large server
    assert 0 < cost_floor(None) < 1e-10  # one cycle: a call of an empty kernel is slower


def test_a_line_faster_than_its_own_flops_allow_is_rejected_on_reading(task):
    with pytest.raises(RecordFormatError, match=r"result\.costs\[0\] is 1e-300 s, below the "
                                                 r"physical floor of \S+ s for 4\.194e\+06 operations"):
        decode_line(_line(task, 1e-300))
    # No flop claimed: one clock cycle is still the floor.
    rec = json.loads(_line(task, 1e-300))
    del rec["input"]["flop"]
    with pytest.raises(RecordFormatError, match=r"for one clock cycle on any CPU"):
        decode_line(json.dumps(rec))
    assert decode_line(_line(task, 1e-3)).result.costs == (1e-3,)


def test_the_issue_case_every_reader_skips_it(task, tmp_path):
    """A good record (1 ms), then one claiming 1e-300 s for another schedule."""
    log = tmp_path / "log.json"
    log.write_text(_line(task, 1e-3) + "\n" + _line(task, 1e-300, split=8) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [r.costs for _, r in load_records(log)] == [(1e-3,)]
        assert best_record(log, task)[1].costs == (1e-3,)
        assert [r.best_cost for r in summarize(log)] == [1e-3]
        report = distill(log, tmp_path / "out.json")
    skips = _skips(caught)
    assert skips and all(s.startswith(f"{log}:2: skipped record: result.costs[0] is 1e-300 s, "
                                      "below the physical floor") for s in skips), skips
    assert report.written == 1 and report.unreadable == 1
    assert (tmp_path / "out.json").read_text() == _line(task, 1e-3) + "\n"


def test_a_record_under_stating_its_flops_is_skipped_where_its_task_is_known(task, tmp_path):
    """Claims 1 flop (its floor then one cycle) at 1e-10 s; the task's 4.2M flops need more."""
    log = tmp_path / "log.json"
    log.write_text(_line(task, 1e-3) + "\n" + _line(task, 1e-10, flop=1.0, split=8) + "\n")
    assert decode_line(open(log).readlines()[1]).result.costs == (1e-10,)  # plausible as claimed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [r.costs for _, r in load_records(log)] == [(1e-3,)]
        assert best_record(log, task)[1].costs == (1e-3,)
        assert best_record(log, task.workload_key)[1].costs == (1e-3,)
        assert str(task.apply_best(log)) == str(best_record(log, task)[0].state)
        report = distill(log, tmp_path / "out.json")
    skips = _skips(caught)
    assert skips and all(s.startswith(f"{log}:2: skipped record: result.costs[0] is 1e-10 s, "
                                      "below the physical floor") and "4.194e+06 operations" in s
                         for s in skips), skips
    assert report.written == 1 and report.implausible == 1 and report.unreadable == 0
    assert "1 faster than any CPU could run them" in report.summary()


def test_verify_hands_on_to_the_next_best(task, tmp_path, monkeypatch):
    """verify re-measures the best record that can be used, not a refused one."""
    log = tmp_path / "log.json"
    log.write_text(_line(task, 1e-3) + "\n" + _line(task, 1e-10, flop=1.0, split=8) + "\n")
    import ansor.records as records

    measured = []

    class FakeRunner:  # no worker processes: the test is about the pick
        def __init__(self, **kw): pass
        def __enter__(self): return self
        def __exit__(self, *a): return False
        def run(self, inputs, built):
            measured.extend(inputs)
            return [MeasureResult((2e-3,), 0) for _ in inputs]

    class FakeBuilder(FakeRunner):
        def build(self, inputs): return [None for _ in inputs]

    monkeypatch.setattr(records, "LocalRunner", FakeRunner)
    monkeypatch.setattr(records, "LocalBuilder", FakeBuilder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        row, = verify_best(log)
    assert any(s.startswith(f"{log}:2:") for s in _skips(caught))
    assert (row.recorded, row.measured, row.error) == (1e-3, 2e-3, "")
    assert [inp.state.steps for inp in measured] == [decode_line(_line(task, 1e-3)).steps]


def test_cost_model_training_skips_it(task, tmp_path):
    from cost_model.lgbm_model import LGBModel

    log = tmp_path / "log.json"
    log.write_text(_line(task, 1e-3) + "\n" + _line(task, 1e-10, flop=1.0, split=8) + "\n"
                   + _line(task, 1e-300, split=16) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert LGBModel().update_from_file(log) == 1
    skips = _skips(caught)
    assert any(s.startswith(f"{log}:2:") and "physical floor" in s for s in skips), skips
    assert any(s.startswith(f"{log}:3:") and "physical floor" in s for s in skips), skips


def test_no_published_or_test_record_is_below_the_floor():
    """Real measurements (every log shipped in the repository) are far above it."""
    paths = glob.glob(os.path.join(ROOT, "benchmarks", "**", "*.json"), recursive=True)
    paths += glob.glob(os.path.join(ROOT, "tests", "**", "*.json"), recursive=True)
    n = 0
    for path in paths:
        with open(path, "rb") as f:
            for raw in f:
                if not raw.startswith(b'{"v":1,"input"'):
                    continue
                rec = json.loads(raw)
                r = rec["result"]
                if r["error_no"] == 0 and r["costs"]:
                    n += 1
                    assert implausible_cost(r["costs"], rec["input"].get("flop")) is None, path
    assert n > 1000
