"""benchmarks/few_trials.py: several logs of one network timed in one alternation; the table
gives each against the reference and the median of each group of logs."""
from __future__ import annotations

import json

import pytest

from tests.util import benchmark_module


def _module():
    return benchmark_module("few_trials")


def test_the_table_groups_the_logs_against_the_reference():
    rep = {"machine": {"cpu": "Test CPU", "llvm_cpu": "znver4", "date": "today"}, "network": "net",
           "threads": 2, "rounds": 3, "reference": "100",
           "logs": {"100": "a", "10-s0": "b", "10-s1": "c", "10-s2": "d"},
           "results": {"100": {"seconds": 1e-3}, "10-s0": {"seconds": 1.2e-3}, "10-s1": {"seconds": 1.05e-3},
                       "10-s2": {"seconds": 0.9e-3}, "onnxruntime": {"seconds": 1.1e-3}}}
    md = _module().markdown(rep)
    assert "| 100 | 1.000 | 1.10x | 1.000 |" in md and "| 10-s0 | 1.200 | 0.92x | 1.200 |" in md
    assert "| 10 | 3 | 1.050 | 1.050 |" in md


def test_bad_log_arguments_are_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        _module().main(["--network", "resnet-18", "--reference", f"100={tmp_path / 'none.json'}"])
    assert "none.json: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _module().main(["--network", "resnet-18", "--reference", "just-a-path"])
    assert "expected NAME=LOG" in capsys.readouterr().err


def test_two_logs_and_no_peer(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("")
    b.write_text("")
    out = tmp_path / "r.json"
    assert _module().main(["--network", "resnet-18", "--image-size", "32", "--reference", f"ref={a}",
                           "--log", f"10-x={b}", "--rounds", "1", "--threads", "1", "--no-peer",
                           "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert set(rep["results"]) == {"ref", "10-x"} and all(v["seconds"] > 0 for v in rep["results"].values())
    assert "| 10 | 1 |" in capsys.readouterr().out
