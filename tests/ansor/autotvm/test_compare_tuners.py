"""benchmarks/compare_tuners.py: the curves it reads from logs, its checkpoints and table, and
(slow) a tiny end-to-end run of every method."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.util import benchmark_module

import ansor
from ansor import autotvm

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench():
    return benchmark_module("compare_tuners")


def test_checkpoints_and_table(bench):
    assert bench.checkpoints(500) == [64, 200, 500]
    assert bench.checkpoints(300) == [64, 200, 300]
    assert bench.checkpoints(16) == [16]
    runs = [{"op": "gemm", "method": "random", "seed": s, "curve": [1.0, 2.0, 2.0, 5.0 + s]}
            for s in (0, 1)] + [{"op": "gemm", "method": "ga", "seed": 0, "curve": [3.0, 3.0]},
                                {"op": "gemm", "method": "lgbm", "seed": 0, "curve": []}]
    table = bench.summarize(runs, 4)
    assert table["gemm"]["random"] == {"4": 5.5}
    assert table["gemm"]["ga"] == {"4": 3.0}  # stopped after 2 trials: its last best
    assert table["gemm"]["lgbm"] == {"4": None}
    md = bench.markdown(table, 4, 2)
    assert "| gemm | random | 5.5 |" in md and "| gemm | lgbm | - |" in md and "mean of 2 seeds" in md


def test_curve_is_read_from_the_log(bench, tmp_path):
    task = autotvm.create_task("matmul", (16, 16, 16))
    log = tmp_path / "l.json"
    with ansor.LocalBuilder(n_parallel=2) as b, \
            ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0) as r:
        res = autotvm.RandomTuner(task, seed=0).tune(5, autotvm.measure_option(b, r), log_file=log,
                                                     verbose=0)
    curve = bench.curve_from_log(str(log), task.workload_key)
    assert curve == pytest.approx(list(res.curve))
    assert bench.curve_from_log(str(log), "other") == []
    assert bench.curve_from_log(str(tmp_path / "missing.json"), task.workload_key) == []


@pytest.mark.slow
def test_tiny_end_to_end_run(bench, tmp_path, capsys):
    out = tmp_path / "ct.json"
    rc = bench.main(["--trials", "3", "--batch", "3", "--small", "--ops", "depthwise",
                     "--methods", ",".join(bench.METHODS), "--out", str(out),
                     "--number", "1", "--min-repeat-ms", "0"])
    assert rc == 0
    report = json.loads(out.read_text())
    assert {r["method"] for r in report["runs"]} == set(bench.METHODS)
    for r in report["runs"]:
        assert len(r["curve"]) == 3 and r["best_gflops"] > 0, r
    assert "| depthwise | lgbm |" in capsys.readouterr().out
