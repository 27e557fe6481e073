"""Costs a record may carry: a successful measurement's costs must be finite and positive.

A line claiming a successful result with a cost of -1 s, 0 s, NaN or infinity is not a
measurement: before this check it became the "best" record everywhere (``records show``,
``best_record``, ``apply_best``, resume, ``verify``). Such lines are now skipped on load with a
warning naming file and line, like every other bad line; failed measurements keep their
``MAX_FLOAT`` (or empty) costs.
"""
from __future__ import annotations

import json

import pytest

from ansor.records import best_record, load_records, summarize
from ansor.search_task import SearchTask
from measure.measure import MAX_FLOAT, MeasureErrorNo, MeasureInput, MeasureResult
from measure.record import RecordFormatError, RecordWarning, decode_line, encode_record


@pytest.fixture(scope="module")
def task() -> SearchTask:
    return SearchTask(func="matmul", args=(17, 7, 9))


def _line(task: SearchTask, costs, error_no: int = 0) -> str:
    state = task.compute_dag.init_state().split("matmul", "i", [4])
    line = json.loads(encode_record(MeasureInput(task, state),
                                    MeasureResult((1e-3,), error_no, "", 0.1, 5.0)))
    line["result"]["costs"] = costs
    return json.dumps(line)


@pytest.mark.parametrize("costs, message", [
    ([-1.0], r"costs\[0\] is -1.0"),
    ([0.0], r"costs\[0\] is 0.0"),
    ([-0.0], r"costs\[0\] is -0.0"),
    ([1e-3, -1e-3], r"costs\[1\] is -0.001"),
    ([0], r"costs\[0\] is 0"),
])
def test_a_successful_result_with_a_non_positive_cost_is_rejected(task, costs, message):
    with pytest.raises(RecordFormatError, match=message + ".*must be positive"):
        decode_line(_line(task, costs))


@pytest.mark.parametrize("text", ["1e999", "-1e999", "NaN", "Infinity", "-Infinity"])
def test_a_non_finite_cost_is_rejected(task, text):
    line = _line(task, [1.5]).replace('"costs": [1.5]', f'"costs": [{text}]')
    assert text in line
    with pytest.raises(RecordFormatError, match="not finite|non-JSON number"):
        decode_line(line)


@pytest.mark.parametrize("costs", [[MAX_FLOAT], [], [MAX_FLOAT, MAX_FLOAT]])
def test_failed_measurements_keep_their_placeholder_costs(task, costs):
    rec = decode_line(_line(task, costs, int(MeasureErrorNo.COMPILE_HOST)))
    assert rec.result.costs == tuple(costs) and not rec.is_valid


def test_a_negative_cost_is_never_the_best(task, tmp_path, capsys):
    """The issue's case: one record with cost -1.0 among good ones."""
    from ansor.cli import main

    path = tmp_path / "log.json"
    path.write_text("\n".join([_line(task, [2e-3]), _line(task, [-1.0]), _line(task, [0.0]),
                               _line(task, [1e-3])]) + "\n")
    with pytest.warns(RecordWarning, match=r"log\.json:2: skipped record: .*costs\[0\] is -1.0"):
        inp, res = best_record(path, task)
    # The four lines are one schedule: its cost is the median of the two valid ones
    assert res.costs == (1.5e-3,)
    with pytest.warns(RecordWarning, match=r"log\.json:3: .*must be positive"):
        assert [r.costs for _, r in load_records(path)] == [(2e-3,), (1e-3,)]
    with pytest.warns(RecordWarning):
        row, = summarize(path)
    assert (row.n_records, row.n_valid, row.best_cost) == (2, 2, 1.5e-3)
    with pytest.warns(RecordWarning):
        assert task.apply_best(path).canonical_key() == inp.state.canonical_key()
    with pytest.warns(RecordWarning):
        assert main(["records", "show", str(path)]) == 0
    assert "1.5000" in capsys.readouterr().out  # best 1.5 ms, not -1000 ms


def test_resume_does_not_start_from_a_negative_cost(task, tmp_path):
    from ansor.tuning import TuningOptions

    path = tmp_path / "log.json"
    path.write_text(_line(task, [-1.0]) + "\n" + _line(task, [2e-3]) + "\n")
    with pytest.warns(RecordWarning, match=r"log\.json:1: .*must be positive"):
        res = task.tune(TuningOptions(num_measure_trials=0, log_file=path, verbose=0))
    assert res.resumed_records == 1 and res.best_cost == 2e-3
