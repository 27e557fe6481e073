"""benchmarks/kernel_conditions.py: a network without a log (the untuned schedules) gives a row per
task with its weight, warm, cold, network-mode and in-network times, and the totals; the table and
the JSON (a report written before network mode still renders)."""
from __future__ import annotations

import json

import pytest

from tests.util import benchmark_module


def _module():
    return benchmark_module("kernel_conditions")


@pytest.mark.slow
def test_a_small_network_without_a_log(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ANSOR_NUM_THREADS", "1")
    out = tmp_path / "kc.json"
    assert _module().main(["--network", "resnet-18", "--image-size", "32", "--repeat", "1",
                           "--number", "1", "--min-repeat-ms", "2", "--rounds", "1", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert len(rep["tasks"]) == 18 and rep["log"] is None and rep["output_error"] < 1e-3
    for row in rep["tasks"]:
        assert row["weight"] >= 1 and row["recorded"] is None
        assert row["warm"] > 0 and row["cold"] > 0 and row["network"] > 0 and row["handoff"] > 0
        assert row["in_network"] > 0
    t = rep["totals"]
    assert t["estimate_warm"] == pytest.approx(sum(r["weight"] * r["warm"] for r in rep["tasks"]))
    assert t["estimate_network"] == pytest.approx(sum(r["weight"] * r["network"] for r in rep["tasks"]))
    assert t["estimate_handoff"] == pytest.approx(sum(r["weight"] * r["handoff"] for r in rep["tasks"]))
    assert t["in_network_steps"] >= t["in_network_tasks"] > 0 and t["network"] > 0
    table = capsys.readouterr().out
    assert "| estimate from cold costs (sum of weight x cold) |" in table and table.count("\n| ") >= 18 + 6
    assert "| estimate from network-mode costs (sum of weight x network mode) |" in table


def test_the_table_of_a_report():
    mod = _module()
    rep = {"machine": {"cpu": "Test CPU", "llvm_cpu": "znver4", "date": "today"}, "threads": 2,
           "network": "net", "log": "log.json", "layout_rewrite": True,
           "tasks": [{"task": "conv2d 1x8x8x64", "weight": 2, "recorded": {"seconds": 1e-3, "cache": "cold"},
                      "warm": 1e-3, "cold": 2e-3, "network": 1.5e-3, "handoff": 3e-3, "in_network": 6e-3},
                     {"task": "dense", "weight": 1, "recorded": None, "warm": None, "cold": 1e-3,
                      "in_network": None}],
           "totals": {"estimate_warm": None, "estimate_cold": 5e-3, "in_network_tasks": 6e-3,
                      "in_network_steps": 7e-3, "network": 1e-2},
           "steps": [{"name": "conv", "task": "k", "transform": False, "seconds": 6e-3},
                     {"name": "reshape", "task": "", "transform": False, "seconds": 5e-4}]}
    md = mod.markdown(rep)
    assert ("| 0 | conv2d 1x8x8x64 | 2 | 1.000 cold | 1.000 | 2.000 | 1.500 | 3.000 | 6.000 | 3.000 | 3.00x | 1.50x "
            "| 2.00x | 1.00x |") in md
    assert "| 1 | dense | 1 | - | - | 1.000 | - | - | - | - | - | - | - | - |" in md  # written before network mode
    assert "Steps the estimate does not cost: 1, 0.500 ms" in md and "| reshape | no reduction | 0.500 |" in md
    assert "| estimate from network-mode costs (sum of weight x network mode) | - | - |" in md
    assert "| estimate from warm costs (sum of weight x warm) | - | - |" in md
    assert "| measured network latency (benchmark) | 10.000 | 1.00x |" in md
