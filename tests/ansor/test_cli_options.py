"""One command-line dialect (issue 41 item 6): the options ``ansor tune`` and ``ansor network
tune`` share are accepted by both with the same meaning - the same ``TuningOptions``, runner,
cost model and ANSOR_NUM_THREADS reach the tuner - plus ``ansor --version``, ``python -m ansor``
and the exit status of bad input. The tuners are replaced by a capture: nothing is measured
except in the -q runs, which use the scheduler tests' instant fake builder and runner."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ansor
import ansor.task_scheduler
import ansor.tuning
from ansor.cli import main
from ansor.cli import options as cli_options
from cost_model import RandomModel
from measure.runner import LocalRunner
from measure.runtime import ENV_NUM_THREADS

ROOT = Path(__file__).resolve().parents[2]
TUNE = ["tune", "matmul", "--args", "8,8,8"]
NETWORK_TUNE = ["network", "tune", "bert-base-layer", "--seq-len", "4"]
COMMANDS = pytest.mark.parametrize("command", [TUNE, NETWORK_TUNE], ids=["tune", "network-tune"])


class Captured(Exception):
    """Raised by the stand-in tuner once it has recorded what it was given."""


@pytest.fixture
def capture(monkeypatch, tmp_path):
    """Run a command up to the tuner's call; return what the tuner was handed."""
    monkeypatch.chdir(tmp_path)  # the default logs (WORKLOAD.json, MODEL.json) land here
    seen: dict = {}

    def search_task_tune(self, opts, cost_model=None):
        seen.update(opts=opts, model=cost_model, threads=os.environ.get(ENV_NUM_THREADS))
        raise Captured

    def scheduler_tune(self, opts):
        seen.update(opts=opts, model=self.cost_model, threads=os.environ.get(ENV_NUM_THREADS))
        raise Captured

    monkeypatch.setattr(ansor.SearchTask, "tune", search_task_tune)
    monkeypatch.setattr(ansor.task_scheduler.TaskScheduler, "tune", scheduler_tune)

    def run(argv: list[str]) -> dict:
        seen.clear()
        with pytest.raises(Captured):
            main(["--debug", *argv])  # --debug: the capture's exception propagates
        return dict(seen)

    return run


def _shared(opts) -> dict:
    """The fields of ``TuningOptions`` the shared options set (the log and the measurers'
    objects differ by nature)."""
    d = {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)}
    for name in ("log_file", "builder", "runner"):
        d.pop(name)
    return d


@pytest.mark.parametrize("extra", [
    [],
    ["--trials", "7", "--per-round", "5", "--early-stopping", "9", "--seed", "3"],
    ["--population", "32"],
    ["-q"], ["-v"], ["-vv"], ["--verbose"], ["--verbose", "0"], ["--verbose=2"],
])
def test_the_shared_options_reach_both_tuners_alike(extra, capture):
    tune = capture(TUNE + extra)["opts"]
    network = capture(NETWORK_TUNE + extra)["opts"]
    assert _shared(tune) == _shared(network)


@COMMANDS
def test_each_shared_option_means_the_same(command, capture):
    got = capture(command)
    opts = got["opts"]
    assert (opts.num_measure_trials, opts.num_measures_per_round) == (200, 64)
    assert opts.verbose == 1 and opts.seed is None and opts.search_params is None
    assert opts.runner == "local"  # no runner option given: the tuner's own
    assert os.path.basename(opts.log_file) == ("matmul.json" if command is TUNE else "bert-base-layer.json")
    assert type(got["model"]).__name__ == "LGBModel"  # --cost-model learned
    opts = capture(command + ["--trials", "7", "--per-round", "5", "--early-stopping", "9",
                              "--seed", "3", "--population", "32", "--log", "x.json"])["opts"]
    assert (opts.num_measure_trials, opts.num_measures_per_round, opts.early_stopping) == (7, 5, 9)
    assert opts.seed == 3 and opts.search_params.population_size == 32
    assert opts.log_file == "x.json"
    got = capture(command + ["--timeout", "2.5", "--min-repeat-ms", "7", "--cost-model", "random"])
    runner = got["opts"].runner
    assert isinstance(runner, LocalRunner) and (runner.timeout, runner.min_repeat_ms) == (2.5, 7)
    assert isinstance(got["model"], RandomModel)


@COMMANDS
def test_the_runner_settings_reach_a_cluster_alike(command, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    seen = {}

    def open_cluster(address, prog, **settings):
        seen.update(settings)
        return 2  # as if it could not be reached: nothing is tuned

    monkeypatch.setattr(cli_options, "open_cluster", open_cluster)
    assert main(command + ["--cluster", "tcp://127.0.0.1:1", "--timeout", "3",
                           "--min-repeat-ms", "5"]) == 2
    # The timing mode too, each command's default: warm for one kernel, network mode for a network.
    assert seen == {"timeout": 3.0, "min_repeat_ms": 5.0, "cache": "warm" if command is TUNE else "network"}


def test_records_verify_takes_the_measurement_options(monkeypatch, tmp_path):
    from ansor.cli import records

    seen = {}

    def verify_best(path, **kw):
        seen.update(kw)
        return []

    monkeypatch.setattr(records, "verify_best", verify_best)
    log = tmp_path / "log.json"
    log.write_text("")
    assert main(["records", "verify", str(log), "--timeout", "2", "--min-repeat-ms", "1"]) == 1
    assert (seen["run_timeout"], seen["min_repeat_ms"]) == (2.0, 1.0)
    assert main(["records", "verify", str(log)]) == 1  # no valid records: exit 1, as before
    assert (seen["run_timeout"], seen["min_repeat_ms"]) == (60.0, 100.0)


@COMMANDS
@pytest.mark.parametrize("extra, level", [(["-q"], 0), ([], 1), (["-v"], 2), (["-vv"], 3),
                                          (["-vvvv"], 3), (["--verbose"], 2),
                                          (["--verbose", "0"], 0), (["--verbose", "3"], 3),
                                          (["-q", "-v"], 0)])
def test_verbosity_levels(command, extra, level, capture):
    assert capture(command + extra)["opts"].verbose == level


def test_the_quick_start_takes_the_runner_options_too(capture):
    """Its runner (one timed call, a 4 s cut-off) with --timeout/--min-repeat-ms where given:
    they used to be ignored without a word when no workload was named."""
    runner = capture(["tune", "-q"])["opts"].runner
    assert (runner.number, runner.timeout, runner.min_repeat_ms) == (1, 4.0, 100)
    runner = capture(["tune", "-q", "--timeout", "2", "--min-repeat-ms", "3"])["opts"].runner
    assert (runner.number, runner.timeout, runner.min_repeat_ms) == (1, 2.0, 3.0)


def test_a_bare_verbose_does_not_swallow_the_workload(capture):
    opts = capture(["tune", "--verbose", "matmul", "--args", "8,8,8"])["opts"]
    assert opts.verbose == 2 and os.path.basename(opts.log_file) == "matmul.json"


@COMMANDS
def test_threads_is_ansor_num_threads_for_the_run(command, capture, monkeypatch):
    monkeypatch.setenv(ENV_NUM_THREADS, "2")
    assert capture(command + ["--threads", "1"])["threads"] == "1"
    assert os.environ[ENV_NUM_THREADS] == "2"  # restored after the command
    monkeypatch.delenv(ENV_NUM_THREADS)
    assert capture(command)["threads"] is None
    assert ENV_NUM_THREADS not in os.environ


@pytest.mark.parametrize("command", [["build", "matmul"], ["records", "verify", "LOG"],
                                     ["network", "run", "bert-base-layer"]])
def test_threads_is_accepted_by_every_command_that_runs_kernels(command, monkeypatch, capsys):
    seen = {}

    def stop(*a, **k):
        seen["threads"] = os.environ.get(ENV_NUM_THREADS)
        raise Captured

    from ansor.cli import build, network, records

    monkeypatch.setattr(build, "_check_and_time", stop)
    monkeypatch.setattr(records, "verify_best", stop)
    monkeypatch.setattr(network, "load_model", stop)
    monkeypatch.setattr(os.path, "isfile", lambda p: True)  # records: LOG "exists"
    monkeypatch.delenv(ENV_NUM_THREADS, raising=False)
    with pytest.raises(Captured):
        main(["--debug", *command, "--threads", "1"])
    assert seen["threads"] == "1" and ENV_NUM_THREADS not in os.environ


@COMMANDS
@pytest.mark.parametrize("flag, value, why", [
    ("--population", "15", ">= 16, got"), ("--population", "0", ">= 16, got"),
    ("--threads", "0", ">= 1"), ("--threads", "5000", "at most 4096"),
    ("--timeout", "0", "positive"), ("--verbose", "4", "at most 3"), ("--seed", "-1", "[0, "),
])
def test_the_same_bounds_in_both(command, flag, value, why, capsys):
    with pytest.raises(SystemExit) as exc:
        main(command + [flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: " in err and why in err


@COMMANDS
def test_a_bad_cost_model_file_is_exit_2_and_leaves_no_log(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "model.json"
    bad.write_text("{not a model")
    assert main(command + ["--cost-model", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.json"]  # no empty log
    assert main(command + ["--cost-model", "nope"]) == 2
    assert "--cost-model 'nope': not 'learned', 'untrained', 'random' or a model file" in \
        capsys.readouterr().err


def test_network_tune_default_log_is_named_after_the_model():
    from ansor.cli.network_tune import default_log

    assert default_log("bert-base-layer") == "bert-base-layer.json"
    assert default_log(os.path.join("models", "tiny.onnx")) == "tiny.json"


def test_the_defaults_are_the_tuners_and_runners():
    import inspect

    runner = inspect.signature(LocalRunner.__init__).parameters
    assert runner["timeout"].default == cli_options.DEFAULT_TIMEOUT_S
    assert runner["min_repeat_ms"].default == cli_options.DEFAULT_MIN_REPEAT_MS
    opts = ansor.tuning.TuningOptions()
    assert opts.num_measure_trials == cli_options.DEFAULT_TRIALS
    assert opts.num_measures_per_round == cli_options.DEFAULT_PER_ROUND


@pytest.fixture
def fake_measurers(monkeypatch, tmp_path):
    """Both tuning commands with the scheduler tests' instant fake builder and runner."""
    from tests.ansor.sched_fakes import FakeBuilder, FakeRunner

    monkeypatch.chdir(tmp_path)
    class WithFakes(ansor.tuning.TuningOptions):  # still a TuningOptions for the tuners' checks
        def __init__(self, **kw):
            super().__init__(**{**kw, "builder": FakeBuilder(), "runner": FakeRunner()})

    monkeypatch.setattr(ansor.tuning, "TuningOptions", WithFakes)


@pytest.mark.parametrize("command, progress", [
    (TUNE, "trials"), (NETWORK_TUNE + ["--rounds", "0"], "| ID | task"),
], ids=["tune", "network-tune"])
def test_quiet_silences_the_progress(command, progress, fake_measurers, capsys):
    argv = command + ["--trials", "2", "--per-round", "2", "--population", "16", "--seed", "0"]
    assert main(argv + ["--log", "a.json"]) == 0
    assert progress in capsys.readouterr().out
    assert main(argv + ["--log", "b.json", "-q"]) == 0
    out = capsys.readouterr().out
    assert progress not in out and "estimated total latency" not in out
    if command is TUNE:
        assert out == ""


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("ansor-py ") and out.split()[1][0].isdigit()


def test_version_falls_back_to_the_package(monkeypatch):
    import importlib.metadata

    from ansor.cli import package_version

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert package_version() == ansor.__version__


def test_python_dash_m_ansor():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "ansor", "--help"], capture_output=True,
                         text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("usage: ansor "), out.stderr
    assert "network" in out.stdout and "--version" in out.stdout
    out = subprocess.run([sys.executable, "-m", "ansor", "tune", "--population", "1"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 2 and "argument --population" in out.stderr


# ---- bad input: exit 2, one line, no traceback ---------------------------------------------------

def _one_line_exit_2(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ansor") and "Traceback" not in err, err
    return err


def test_network_run_with_a_missing_log(tmp_path, capsys):
    err = _one_line_exit_2(["network", "run", "bert-base-layer", "--seq-len", "4", "--log", str(tmp_path / "none.json")], capsys)
    assert "no such file" in err


def _dynamic_model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["tokens"], ["y"])],
                                                  "g", [x], [y]),
                                opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize("command", [["network", "tasks"], ["network", "run"],
                                     ["network", "tune"]])
def test_a_dynamic_shape_model_names_its_input(command, tmp_path, monkeypatch, capsys):
    pytest.importorskip("onnx")
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "dyn.onnx"
    _dynamic_model(model)
    err = _one_line_exit_2(command + [str(model)], capsys)
    assert "input 'tokens' has a dynamic dimension 0 ('batch')" in err
    assert err.rstrip().endswith("give it with --shape tokens=1x8 or --batch 1"), err  # the CLI's words


@pytest.mark.parametrize("command", [["network", "tasks"], ["network", "run"],
                                     ["network", "tune"]])
def test_a_bad_model_file_is_exit_2(command, tmp_path, monkeypatch, capsys):
    pytest.importorskip("onnx")
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "bad.onnx"
    model.write_bytes(b"\x00not a protobuf at all\xff" * 8)
    err = _one_line_exit_2(command + [str(model)], capsys)
    assert "not a valid ONNX model" in err


def test_the_network_times_in_network_mode_by_default_and_cache_overrides_either_default(capture):
    # No option: each tuner's own runner, in its mode (TaskScheduler's network, SearchTask's warm:
    # tests/ansor/test_cache_mode_defaults.py); an override is a runner of that mode.
    assert capture(NETWORK_TUNE)["opts"].runner == "local"
    assert capture(TUNE)["opts"].runner == "local"
    warm = capture(NETWORK_TUNE + ["--cache", "warm"])["opts"].runner
    assert isinstance(warm, LocalRunner) and warm.cache == "warm"
    cold = capture(TUNE + ["--cache", "cold"])["opts"].runner
    assert isinstance(cold, LocalRunner) and cold.cache == "cold"
    cold = capture(NETWORK_TUNE + ["--cache", "cold"])["opts"].runner  # the previous default
    assert isinstance(cold, LocalRunner) and cold.cache == "cold"
    assert capture(NETWORK_TUNE + ["--cache", "network"])["opts"].runner == "local"  # the default
    net = capture(TUNE + ["--cache", "network"])["opts"].runner
    assert isinstance(net, LocalRunner) and net.cache == "network"


@COMMANDS
def test_a_bad_cache_mode_is_a_usage_error(command, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(command + ["--cache", "tepid"])
    assert exc.value.code == 2 and "--cache: invalid choice: 'tepid'" in capsys.readouterr().err
