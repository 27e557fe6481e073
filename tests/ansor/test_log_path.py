"""An unusable log path is an error before tuning starts; a write error mid-run stops cleanly.

Before, a log path that is a directory, empty, under a file, not writable or on a full disk was
found only when the first measured round was appended: a raw traceback, the round lost, and a
failed write could leave half a line behind. Now ``SearchTask.tune``, the template tuners and
``ansor tune`` check the path first (one clear message naming it), and a failed append (disk full)
is rolled back to whole lines and ends the run with what it had.
"""
from __future__ import annotations

import errno
import os

import pytest

import ansor
from ansor import autotvm
from ansor.cli import main
from ansor.records import load_records
from ansor.tuning import STOP_LOG_FAILED, TuningOptions
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordFileError, RecordToFile, append_durably, check_log_file
from tests.ansor.test_tune import (SMALL_PARAMS, ListPolicy, builder,  # noqa: F401 - fixtures
                                   i_split_states, runner)


@pytest.fixture
def task():
    return ansor.SearchTask(func="matmul", args=(16, 16, 16))


def _opts(log, builder="local", runner="local", **kw) -> TuningOptions:
    kw.setdefault("verbose", 0)
    return TuningOptions(log_file=log, builder=builder, runner=runner, seed=0,
                         search_params=SMALL_PARAMS, **kw)


def disk_full(monkeypatch, path, good_writes: int) -> None:
    """After ``good_writes`` writes to ``path``, the disk is full: the next write stores half
    its bytes, the one after fails with ENOSPC (as a real short write on a full disk does)."""
    real = os.write
    target = os.path.realpath(path)
    state = {"writes": 0, "partial": False}

    def write(fd, data):
        try:
            mine = os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:
            mine = False
        if not mine:
            return real(fd, data)
        if state["writes"] < good_writes:
            state["writes"] += 1
            return real(fd, data)
        if not state["partial"] and len(data) > 1:
            state["partial"] = True
            return real(fd, bytes(data)[:len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)


# ---- the check ---------------------------------------------------------------------------------

@pytest.mark.parametrize("path, message", [
    ("", "log file path is empty"),
    ("/etc/passwd/x.json", r"'/etc/passwd/x.json': its directory '/etc/passwd' is not a directory"),
    ("/dev/null", "is not a regular file"),
])
def test_unusable_paths_are_named(path, message):
    with pytest.raises(RecordFileError, match=message):
        check_log_file(path)


def test_a_directory_is_not_a_log_file(tmp_path):
    with pytest.raises(RecordFileError, match=f"log file '{tmp_path}' is a directory"):
        check_log_file(tmp_path)


def test_a_path_without_write_permission(tmp_path, monkeypatch):
    real = os.open

    def denied(path, flags, *a):  # tests run as root, where permission checks pass
        if os.fspath(path).startswith(str(tmp_path)) and flags & os.O_WRONLY:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real(path, flags, *a)

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(RecordFileError, match=r"cannot open the log file '.*x.json' for "
                                              r"appending: Permission denied"):
        check_log_file(tmp_path / "x.json")


def test_a_usable_path_is_created_with_its_directory(tmp_path):
    path = tmp_path / "new" / "dir" / "log.json"
    assert check_log_file(path) == str(path)
    assert path.is_file() and path.stat().st_size == 0
    path.write_text("{}\n")
    check_log_file(path)
    assert path.read_text() == "{}\n"  # an existing log is left as it is


# ---- a failed append leaves whole lines --------------------------------------------------------

@pytest.mark.parametrize("ends_with_newline", [True, False])
def test_a_failed_append_is_rolled_back(tmp_path, monkeypatch, ends_with_newline):
    path = tmp_path / "log.json"
    before = b'{"a":1}\n' + (b"" if ends_with_newline else b'{"partial')
    path.write_bytes(before)
    disk_full(monkeypatch, path, good_writes=0)
    with pytest.raises(RecordFileError, match=r"log\.json.*No space left on device.*not "
                                              r"recorded"):
        append_durably(str(path), b'{"b":2}\n{"c":3}\n')
    assert path.read_bytes() == before


def test_record_to_file_counts_only_what_it_wrote(tmp_path, monkeypatch, task):
    path = tmp_path / "log.json"
    cb = RecordToFile(path)
    inp = MeasureInput(task, task.compute_dag.init_state())
    res = MeasureResult((1e-3,), 0, "", 0.1, 5.0)
    cb([inp, inp], [res, res])
    disk_full(monkeypatch, path, good_writes=0)
    with pytest.raises(RecordFileError):
        cb([inp] * 3, [res] * 3)
    monkeypatch.undo()
    assert cb.n_written == 2 and len(list(load_records(path))) == 2
    assert path.read_bytes().endswith(b"\n")


# ---- SearchTask.tune and ansor tune ------------------------------------------------------------

@pytest.mark.parametrize("bad", ["", "dir", "/etc/passwd/x.json", "/dev/null"])
def test_tune_checks_the_log_before_measuring_anything(task, tmp_path, bad):
    log = tmp_path if bad == "dir" else bad
    policy = ListPolicy(i_split_states(task, [1, 2]))
    with pytest.raises(RecordFileError, match="log file"):
        task.tune(_opts(log, num_measure_trials=2), search_policy=policy)
    assert policy.n_calls == 0


def test_a_full_disk_mid_run_stops_cleanly(task, builder, runner, tmp_path, monkeypatch, capsys):
    log = tmp_path / "log.json"
    policy = ListPolicy(i_split_states(task, [1, 2, 4, 8, 16, 1], j=4))
    disk_full(monkeypatch, log, good_writes=1)  # the first round is written, the second is not
    res = task.tune(_opts(log, builder, runner, num_measure_trials=6, num_measures_per_round=2,
                          verbose=1), search_policy=policy)
    monkeypatch.undo()
    assert res.stop_reason.startswith(STOP_LOG_FAILED)
    assert "No space left on device" in res.stop_reason and "not recorded" in res.stop_reason
    assert res.trials == 2 and policy.n_calls == 2  # the unrecorded batch is not counted
    assert res.best_state is not None
    data = log.read_bytes()
    assert data.endswith(b"\n") and len(data.splitlines()) == 2
    assert len(list(load_records(log))) == 2
    out = capsys.readouterr().out
    assert f"tuning finished: {STOP_LOG_FAILED}" in out and "Traceback" not in out


def test_cli_tune_with_a_directory_as_log(tmp_path, capsys):
    assert main(["tune", "matmul", "--args", "8,8,8", "--trials", "2", "--log",
                 str(tmp_path)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err == [f"ansor tune: log file '{tmp_path}' is a directory"]
    assert "trials" not in captured.out  # nothing was tuned


def test_cli_tune_stops_with_one_line_when_the_disk_fills(tmp_path, monkeypatch, capsys):
    log = tmp_path / "log.json"
    disk_full(monkeypatch, log, good_writes=0)
    rc = main(["tune", "matmul", "--args", "8,8,8", "--trials", "4", "--per-round", "2",
               "--log", str(log), "--population", "16", "--seed", "0", "-q"])
    assert rc == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"ansor tune: {STOP_LOG_FAILED}")
    assert "No space left on device" in err[0]
    assert log.read_bytes() == b""


# ---- the template tuners -----------------------------------------------------------------------

def test_template_tuner_checks_the_log_first(tmp_path):
    tt = autotvm.create_task("matmul", (16, 16, 16))
    with pytest.raises(RecordFileError, match="is a directory"):
        autotvm.RandomTuner(tt, seed=0).tune(4, log_file=tmp_path, verbose=0)


def test_template_tuner_stops_cleanly_when_the_disk_fills(builder, runner, tmp_path, monkeypatch,
                                                          capsys):
    tt = autotvm.create_task("matmul", (16, 16, 16))
    log = tmp_path / "log.json"
    disk_full(monkeypatch, log, good_writes=1)
    res = autotvm.RandomTuner(tt, seed=0).tune(8, autotvm.measure_option(builder, runner),
                                               log_file=log, batch_size=2, verbose=1)
    monkeypatch.undo()
    assert res.stop_reason.startswith(STOP_LOG_FAILED) and res.trials == 2
    assert "No space left on device" in res.stop_reason
    assert log.read_bytes().endswith(b"\n") and len(list(load_records(log))) == 2
    assert f"stopped: {STOP_LOG_FAILED}" in capsys.readouterr().out
