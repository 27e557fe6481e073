"""``distill`` must never lose good records: it keeps only records that replay, never writes over
its input unless asked to (and then keeps a backup), and keeps the file mode.

The issue's case: one record with an invalid step (an annotation on stage 999) and a tiny cost
used to win its workload; distilled in place, every good record was gone and ``apply_best``
failed; the rewritten log also lost its mode (0664 -> 0600).
"""
from __future__ import annotations

import json
import os

import pytest

from ansor.cli import main
from ansor.records import DistillReport, RecordWarning, best_record, distill, load_records
from ansor.search_task import SearchTask
from measure.measure import MAX_FLOAT, MeasureErrorNo, MeasureInput, MeasureResult
from measure.record import encode_record


@pytest.fixture(scope="module")
def task() -> SearchTask:
    return SearchTask(func="matmul", args=(17, 7, 9))


def _line(task: SearchTask, factor: int, cost: float, error_no: int = 0) -> str:
    state = task.compute_dag.init_state().split("matmul", "i", [factor])
    costs = (cost,) if error_no == 0 else (MAX_FLOAT,)
    return encode_record(MeasureInput(task, state), MeasureResult(costs, error_no, "", 0.1, 5.0))


def _poisoned(task: SearchTask, cost: float = 1e-9) -> str:
    obj = json.loads(_line(task, 2, cost))
    obj["input"]["steps"].append(["AN", 999, 0, "parallel"])
    return json.dumps(obj)


def _unregistered(task: SearchTask, cost: float) -> str:
    obj = json.loads(_line(task, 3, cost))
    obj["input"]["task"] = {"workload": "registered_elsewhere", "args": [5]}
    obj["input"]["workload_key"] = "f" * 32
    return json.dumps(obj)


@pytest.fixture
def log(tmp_path, task):
    """Three good records, one that does not replay (the cheapest), one failed measurement, one
    of a workload this process cannot rebuild, one corrupt line; mode 0664."""
    path = tmp_path / "log.json"
    path.write_text("\n".join([
        _line(task, 4, 3e-3), _poisoned(task), _line(task, 1, 2e-3),
        _line(task, 17, 0, int(MeasureErrorNo.COMPILE_HOST)), _unregistered(task, 1e-3),
        "{corrupt", _line(task, 8, 4e-3)]) + "\n")
    os.chmod(path, 0o664)
    return path


def test_distill_keeps_only_records_that_replay(log, tmp_path, task):
    out = tmp_path / "best.json"
    with pytest.warns(RecordWarning) as caught:
        rep = distill(log, out, top_k=2)
    msgs = [str(w.message) for w in caught]
    assert any(":2: " in m and "do not replay" in m for m in msgs)
    assert any(":5: " in m and "'registered_elsewhere' is not registered" in m for m in msgs)
    assert isinstance(rep, DistillReport)
    assert (rep.written, rep.unreplayable, rep.unrebuildable, rep.failed, rep.unreadable,
            rep.not_best) == (2, 1, 1, 1, 1, 1)
    assert [r.costs for _, r in load_records(out)] == [(2e-3,), (3e-3,)]
    assert best_record(out, task)[1].costs == (2e-3,)
    assert task.apply_best(out) is not None
    assert "kept 2" in rep.summary() and "1 do not replay" in rep.summary()


def test_distill_refuses_to_overwrite_its_input(log, tmp_path):
    before = log.read_bytes()
    with pytest.raises(ValueError, match="is the input.*in_place=True"):
        distill(log, log)
    link = tmp_path / "same.json"
    os.link(log, link)  # another name of the same file
    with pytest.raises(ValueError, match="is the input"):
        distill(log, link)
    assert log.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.json", "same.json"]


def test_distill_in_place_keeps_a_backup_and_the_mode(log, tmp_path, task):
    before = log.read_bytes()
    with pytest.warns(RecordWarning):
        rep = distill(log, top_k=1, in_place=True)
    assert rep.written == 1 and rep.backup == str(log) + ".bak"
    assert open(rep.backup, "rb").read() == before
    assert os.stat(log).st_mode & 0o777 == 0o664
    assert os.stat(rep.backup).st_mode & 0o777 == 0o664
    assert [r.costs for _, r in load_records(log)] == [(2e-3,)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.json", "log.json.bak"]
    with pytest.raises(ValueError, match="in_place"):
        distill(log, tmp_path / "other.json", in_place=True)


def test_distill_output_keeps_the_mode_of_the_file_it_replaces(log, tmp_path):
    out = tmp_path / "out.json"
    with pytest.warns(RecordWarning):
        distill(log, out)
    assert os.stat(out).st_mode & 0o777 == 0o664  # new: the input's mode
    os.chmod(out, 0o640)
    with pytest.warns(RecordWarning):
        distill(log, out)
    assert os.stat(out).st_mode & 0o777 == 0o640  # replaced: its own mode


def test_distill_into_a_directory_is_a_clear_error(log, tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        distill(log, tmp_path)


def test_cli_distill_refuses_o_equal_to_the_input(log, capsys):
    before = log.read_bytes()
    assert main(["records", "distill", str(log), "-o", str(log)]) == 2
    err = capsys.readouterr().err
    assert "is the input" in err and "--in-place" in err
    assert log.read_bytes() == before


def test_cli_distill_in_place_reports_what_it_kept_and_dropped(log, capsys):
    with pytest.warns(RecordWarning):
        assert main(["records", "distill", str(log), "--in-place"]) == 0
    out = capsys.readouterr().out
    assert f"wrote 1 record(s) to {log}" in out
    assert "1 do not replay" in out and "1 of workloads that cannot be rebuilt" in out
    assert f"original kept as {log}.bak" in out
    assert len(log.read_text().splitlines()) == 1


def test_cli_distill_needs_an_output(log, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["records", "distill", str(log)])
    assert "one of the arguments -o/--output --in-place is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["records", "distill", str(log), "-o", str(tmp_path / "x.json"), "--in-place"])
    assert "not allowed with" in capsys.readouterr().err
    assert main(["records", "distill", str(log), "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_cli_distill_import_registers_the_workloads_to_replay(tmp_path, monkeypatch):
    """A registered workload replays only where its module is imported: without ``--import``
    its records are dropped (and the input is left alone), with it they are kept."""
    import subprocess
    import sys
    import textwrap

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    (tmp_path / "distill_wl_mod.py").write_text(textwrap.dedent("""
        from compute import te
        from compute.workload_registry import register_workload

        @register_workload("distill_test_scale")
        def scale(n):
            a = te.placeholder((n,), "float32", "A")
            return [a, te.compute((n,), lambda i: a[i] * 2.0, "B")]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import distill_wl_mod  # noqa: F401 - registers the workload in this process

    t = SearchTask(func="distill_test_scale", args=(8,))
    log = tmp_path / "log.json"
    log.write_text(encode_record(MeasureInput(t, t.compute_dag.init_state()),
                                 MeasureResult((1e-3,), 0, "", 0.1, 5.0)) + "\n")
    env = dict(os.environ, PYTHONPATH=root)

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "ansor.cli", "records", "distill", "log.json",
                               "-o", "out.json", *extra], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    p = run()
    assert p.returncode == 0 and "wrote 0 record(s)" in p.stdout
    assert "'distill_test_scale' is not registered" in p.stderr
    p = run("--import", "distill_wl_mod")
    assert p.returncode == 0 and "wrote 1 record(s)" in p.stdout, p.stderr
    assert (tmp_path / "out.json").read_text() == log.read_text()
