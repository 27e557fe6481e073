"""A record whose computation reads out of bounds is refused by every reader of records.

Issue 40, item 2: a record's DAG reading ``C[(i*791900) % 2000003, j]`` (C has 32 rows) was
compiled and run by ``ansor records verify`` ("worker killed by SIGSEGV") and kept by
``distill``, while ``ansor.build`` refused the same DAG. Every reader rebuilds a record's task
through ``SearchTask.from_json``, which now runs the DAG's bounds check (cached per computation);
the cost model's reader runs it too.
"""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

import ansor
from ansor import te
from ansor.records import RecordWarning, best_record, distill, load_records
from measure.measure import MeasureInput, MeasureResult
from measure.record import encode_record

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _oob_task() -> ansor.SearchTask:
    C = te.placeholder((32, 8), name="C")
    D = te.compute((32, 8), lambda i, j: C[(i * 791900) % 2000003, j] * 2.0, name="D")
    return ansor.SearchTask(tensors=[C, D])  # accepted: only check_bounds decides the modulo


def _good_task() -> ansor.SearchTask:
    C = te.placeholder((32, 8), name="C")
    D = te.compute((32, 8), lambda i, j: C[(i * 7) % 32, j] * 2.0, name="D")
    return ansor.SearchTask(tensors=[C, D])


def _line(task: ansor.SearchTask, cost: float) -> str:
    return encode_record(MeasureInput(task, task.compute_dag.init_state()),
                         MeasureResult((cost,), 0, "", 0.1, 1.0))


@pytest.fixture
def log(tmp_path) -> str:
    """Line 1: the out-of-bounds record (the fastest); line 2: an in-range one."""
    path = tmp_path / "oob.json"
    path.write_text(_line(_oob_task(), 1e-7) + "\n" + _line(_good_task(), 1e-5) + "\n")
    return str(path)


def _refusals(caught, log: str) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, RecordWarning)
            and str(w.message).startswith(f"{log}:1: skipped record: its computation is refused")
            and "reads tensor 'C' out of bounds" in str(w.message)]


def test_verify_never_runs_the_record(log, tmp_path):
    oob_only = tmp_path / "only.json"
    oob_only.write_text(open(log).readline())
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "ansor.cli", "records", "verify", str(oob_only),
                        "--number", "1", "--repeat", "1"], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=240)
    out = p.stdout + p.stderr
    assert "SIGSEGV" not in out and "RUNTIME" not in out, out
    assert f"{oob_only}:1: skipped record: its computation is refused" in p.stderr, out
    assert "cannot rebuild the record" in p.stdout, out
    assert p.returncode == 1, out  # nothing could be verified: a failure, not a crash


def test_distill_drops_the_record(log, tmp_path):
    out = str(tmp_path / "best.json")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = distill(log, out)
    assert _refusals(caught, log)
    assert report.written == 1 and report.unrebuildable == 1
    assert "1 of workloads that cannot be rebuilt here or are refused" in report.summary()
    with open(out) as f:
        assert f.read() == open(log).readlines()[1]


def test_load_and_best_record_skip_the_record(log):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = list(load_records(log))
        assert best_record(log, _oob_task().workload_key) is None
    assert _refusals(caught, log)
    assert [inp.task.workload_key for inp, _ in pairs] == [_good_task().workload_key]


def test_cost_model_training_skips_the_record(log):
    from cost_model.lgbm_model import LGBModel

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert LGBModel().update_from_file(log) == 1
    assert any(f"{log}:1:" in str(w.message) and "out of bounds" in str(w.message)
               for w in caught), [str(w.message) for w in caught]


def test_the_verdict_is_checked_once_per_computation(monkeypatch):
    from compute import access_bounds

    calls = []
    real = access_bounds.check_unproven
    monkeypatch.setattr(access_bounds, "check_unproven",
                        lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    # In range (17..20) but not provably so by intervals; a computation of its own, so no
    # verdict is cached yet.
    C = te.placeholder((32, 8), name="C")
    desc = ansor.SearchTask(tensors=[C, te.compute(
        (32, 8), lambda i, j: C[i - (i // 4) * 4 + 17, j], name="D")]).to_json()
    for _ in range(3):
        ansor.SearchTask.from_json(desc)
    assert len(calls) == 1
    for _ in range(2):
        with pytest.raises(access_bounds.OutOfBoundsError):
            ansor.SearchTask.from_json(_oob_task().to_json())
    assert len(calls) == 3  # a refusal is not cached: its message names this DAG's tensors


def test_a_line_lying_about_its_key_does_not_lend_its_computation(tmp_path):
    """The cost model's reader cached a computation by the workload key a line claims: a first
    line claiming the good task's key with another computation made every honest line of that
    key train on the liar's computation. Now the liar is skipped and the honest line keeps its own."""
    from cost_model.lgbm_model import lines_with_states

    good = _good_task()
    C = te.placeholder((32, 8), name="C")
    other = ansor.SearchTask(tensors=[C, te.compute((32, 8), lambda i, j: C[i, j] + 1.0, name="D")])
    liar = _line(other, 1e-5).replace(other.workload_key, good.workload_key)
    assert good.workload_key in liar
    path = tmp_path / "liar.json"
    path.write_text(liar + "\n" + _line(good, 1e-5) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = list(lines_with_states(path, None))
    assert [line.lineno for line, _, _ in rows] == [2]
    assert rows[0][1].dag.workload_key == good.workload_key
    assert any(f"{path}:1:" in str(w.message) and "the record says" in str(w.message) for w in caught)
