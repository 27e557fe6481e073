"""The ansor command line: the default job and the workload commands."""
from __future__ import annotations

import pytest

from ansor.cli import main


def test_default_job_checks_and_reports_speedups(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.count("matches reference") == 4 and "MISMATCH" not in out
    assert "speed-up of the schedules over the default" in out and "numpy" in out


def test_workloads_lists_the_library(capsys):
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    assert "conv2d_nhwc" in out and "matmul" in out and "default --args" in out


def test_build_small_workload(capsys):
    assert main(["build", "matmul", "--args", "17,7,9"]) == 0
    assert "matches reference" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["build", "nope"], "unknown workload 'nope'"),
    (["build", "matmul", "--args", "1,2"], "matmul"),
    (["build", "matmul", "--args", "__import__('os')"], "not a comma-separated list"),
])
def test_build_bad_input_is_a_clear_error(argv, message, capsys):
    try:
        rc = main(argv)
    except SystemExit as err:
        rc = err.code if isinstance(err.code, int) else 2
        text = str(err)
    else:
        text = capsys.readouterr().err
    assert rc == 2
    assert message in text + capsys.readouterr().err


def test_warnings_and_errors_are_one_line_without_a_traceback(tmp_path, capsys):
    """Issue 40: a skipped record is one ``ansor: warning:`` line (not Python's message plus
    source line), an unexpected exception one ``internal error`` line with exit 1, and --debug
    shows the traceback."""
    import warnings

    from ansor.cli import main as cli_main

    import os
    import subprocess
    import sys

    log = tmp_path / "bad.json"
    log.write_text("{not json\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k != "ANSOR_DEBUG"}
    env["PYTHONPATH"] = root
    p = subprocess.run([sys.executable, "-m", "ansor.cli", "records", "show", str(log)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert f"ansor: warning: {log}:1:" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert all(line.startswith("ansor: ") for line in p.stderr.strip().splitlines()), p.stderr
    assert cli_main(["records", "show", str(log)]) in (0, 1)
    assert warnings.formatwarning.__name__ != "_one_line_warning"  # restored after the command
    import ansor.cli as cli

    def boom(args):
        raise TypeError("a bug of ours")

    orig = cli._dispatch
    cli._dispatch = boom
    try:
        assert cli_main(["records", "show", str(log)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("ansor: internal error: TypeError: a bug of ours") and err.count("\n") == 1
        with pytest.raises(TypeError):
            cli_main(["--debug", "records", "show", str(log)])
    finally:
        cli._dispatch = orig
