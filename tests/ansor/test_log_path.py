"""An unusable log path is an error before tuning starts; a write error mid-run stops cleanly.

Before, a log path that is a directory, empty, under a file, not writable or on a full disk was
found only when the first measured round was appended: a raw traceback, the round lost, and a
failed write could leave half a line behind. Now ``SearchTask.tune``, the template tuners and
``ansor tune`` check the path first (one clear message naming it), and a failed append (disk full)
is rolled back to whole lines and ends the run with what it had.
"""
from __future__ import annotations

import errno
import logging
import os

import pytest

import ansor
from ansor import autotvm
from ansor.cli import main
from ansor.records import load_records
from ansor.tuning import STOP_LOG_FAILED, TuningOptions
from measure.measure import MeasureInput, MeasureResult
from measure.log_file import RecordFileError, append_durably, check_log_file
from measure.record import RecordToFile
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


def test_a_usable_path_is_created(tmp_path):
    path = tmp_path / "log.json"
    assert check_log_file(path) == str(path)
    assert path.is_file() and path.stat().st_size == 0
    path.write_text("{}\n")
    check_log_file(path)
    assert path.read_text() == "{}\n"  # an existing log is left as it is


def test_a_missing_directory_is_named_not_created(tmp_path):
    """Issue 40: a typo in --log's directory used to create it silently."""
    path = tmp_path / "new" / "dir" / "log.json"
    with pytest.raises(RecordFileError, match=f"its directory '{tmp_path}/new/dir' does not exist"):
        check_log_file(path)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("path, kind", [("/proc/version", "proc"), ("/proc/x.json", "proc"),
                                        ("/sys/kernel/notes", "sysfs")])
def test_kernel_interfaces_are_not_log_files(path, kind):
    """Issue 40: /proc/version passed the check (root may open it for appending), then every
    write failed and the first batch of measurements was lost."""
    if not os.path.exists(os.path.dirname(path)):
        pytest.skip(f"no {os.path.dirname(path)} here")
    with pytest.raises(RecordFileError, match=f"is on {kind}, a kernel interface, not storage"):
        check_log_file(path)


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


def test_cli_tune_stops_with_one_line_when_the_disk_fills(tmp_path, monkeypatch, capsys, caplog):
    log = tmp_path / "log.json"
    disk_full(monkeypatch, log, good_writes=0)
    rc = main(["tune", "matmul", "--args", "8,8,8", "--trials", "4", "--per-round", "2",
               "--log", str(log), "--population", "16", "--seed", "0", "-q"])
    assert rc == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"ansor tune: {STOP_LOG_FAILED}")
    assert "No space left on device" in err[0]
    assert log.read_bytes() == b""
    # Nothing at WARNING or above through logging: outside pytest, Python prints such records
    # on stderr, a second line for the same failure (issue 40).
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


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


# ---- ansor network tune: the same check, a failed log, side outputs (issue 40) -----------------

NET = ["network", "tune", "bert-base-layer", "--seq-len", "4", "--trials", "8", "--per-round", "2",
       "--population", "16", "--seed", "0", "--rounds", "0", "--log"]


@pytest.mark.parametrize("log, why", [
    ("/proc/version", "log file '/proc/version' is on proc, a kernel interface, not storage"),
    ("{tmp}/nodir/x.json", "log file '{tmp}/nodir/x.json': its directory '{tmp}/nodir' does not "
                           "exist"),
    ("{tmp}", "log file '{tmp}' is a directory"),
])
@pytest.mark.parametrize("command", [NET, ["tune", "matmul", "--args", "8,8,8", "--log"]])
def test_cli_refuses_an_unusable_log_up_front(command, log, why, tmp_path, monkeypatch, capsys):
    import ansor.task_scheduler

    def refuse(*a, **k):
        raise AssertionError("nothing may be tuned with an unusable log")

    monkeypatch.setattr(ansor.task_scheduler.TaskScheduler, "tune", refuse)
    monkeypatch.setattr(ansor.SearchTask, "tune", refuse)
    assert main(command + [log.format(tmp=tmp_path)]) == 2
    prog = "ansor network tune" if command is NET else "ansor tune"
    assert capsys.readouterr().err == f"{prog}: {why.format(tmp=tmp_path)}\n"
    assert not (tmp_path / "nodir").exists()


@pytest.fixture
def fake_measurers(monkeypatch):
    """``ansor network tune`` with the scheduler tests' instant fake builder and runner."""
    import ansor.tuning
    from tests.ansor.sched_fakes import FakeBuilder, FakeRunner

    real = ansor.tuning.TuningOptions
    monkeypatch.setattr(ansor.tuning, "TuningOptions",
                        lambda **kw: real(**{**kw, "builder": FakeBuilder(), "runner": FakeRunner()}))


def test_network_tune_exits_1_when_its_log_fails_mid_run(tmp_path, monkeypatch, capsys, caplog,
                                                         fake_measurers):
    """Was: the run stopped early, then compiled and compared the network and exited 0."""
    log = tmp_path / "log.json"
    disk_full(monkeypatch, log, good_writes=1)
    assert main(NET + [str(log)]) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err[-1].startswith(f"ansor network tune: {STOP_LOG_FAILED}: writing to the log file")
    assert "No space left on device" in err[-1] and "Traceback" not in captured.err
    assert "measured latency" not in captured.out  # nothing compiled on a half-written log
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    monkeypatch.undo()
    assert len(list(load_records(log))) == 1  # the first round (8 tasks, 8 trials: 1 a round)


def _failing_savefig(monkeypatch) -> None:
    """matplotlib's savefig on a full disk: half the image written, then ENOSPC."""
    from matplotlib.figure import Figure

    def savefig(self, fname, **kw):
        fname.write(b"\x89PNG half an image")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", savefig)


def test_a_failed_plot_leaves_no_file_and_is_a_warning(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    from ansor.cli.network_tune import side_plot
    from ansor.task_scheduler import plot_latency_history

    hist = tmp_path / "h.tsv"
    hist.write_text("round\ttrials\telapsed_s\testimated_latency_ms\n1\t2\t0.5\t1.25\n")
    _failing_savefig(monkeypatch)
    with pytest.raises(OSError, match="No space left on device"):
        plot_latency_history(hist, tmp_path / "h.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.tsv"]  # no partial or temp file
    side_plot(str(hist), str(tmp_path / "h.png"))
    assert capsys.readouterr().err == (f"ansor network tune: warning: the plot {tmp_path}/h.png "
                                       "was not written: No space left on device\n")
    monkeypatch.undo()
    assert plot_latency_history(hist, tmp_path / "h.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.png", "h.tsv"]
    assert (tmp_path / "h.png").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_history_that_cannot_be_written_does_not_stop_the_run(tmp_path, caplog):
    from ansor.task_scheduler import LogEstimatedLatency, TaskScheduler
    from tests.ansor.test_task_scheduler import options, small_tasks

    hist = LogEstimatedLatency(tmp_path / "gone" / "h.tsv")  # its directory is not there
    res = TaskScheduler(small_tasks(), callbacks=[hist]).tune(options(8, per_round=4))
    assert res.trials == 8 and hist.error == "No such file or directory"
    assert sum("latency history" in r.getMessage() for r in caplog.records) == 1  # said once
