"""The command line and the benchmark suite as modules of one concept each (issue 15).

``ansor`` starts without the benchmark harness; the suite's TVM peer does not import the suite's
command line (they used to import each other); the quick start's numpy figure is timed by the
suite's fresh-process helper (``ansor.bench.timing``), not a copy of it. (Their size limit is
``tests/test_sizes.py``'s, as every package's.)
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from ansor.bench import timing
from ansor.cli import numpy_matmul, tune

ROOT = Path(__file__).resolve().parents[2]


def _loaded_after(stmt: str) -> set[str]:
    """The ``ansor.bench`` modules a fresh interpreter has loaded after ``stmt``."""
    code = (f"import sys; {stmt}; "
            "print(' '.join(m for m in sys.modules if m.startswith('ansor.bench')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    return set(out.stdout.split())


def test_cli_starts_without_the_bench_harness() -> None:
    loaded = _loaded_after("import ansor.cli")
    assert not loaded & {"ansor.bench.suite", "ansor.bench.driver", "ansor.bench.workers",
                         "ansor.bench.peers", "ansor.bench.peers_tvm", "ansor.bench.report"}


def test_tvm_peer_does_not_import_the_suite_cli() -> None:
    assert "ansor.bench.suite" not in _loaded_after("import ansor.bench.peers_tvm")


def test_quick_start_numpy_figure_goes_through_run_fresh(monkeypatch) -> None:
    calls = []

    def fake_run_fresh(argv, threads, **kw):
        calls.append((list(argv), threads))
        return {"seconds": 0.25}

    monkeypatch.setattr(timing, "run_fresh", fake_run_fresh)
    assert numpy_matmul.best_seconds_in_fresh_process(64, 3) == (0.25, "")
    assert calls == [(["-m", "ansor.cli.numpy_matmul", "64"], 3)]
    monkeypatch.setattr(timing, "run_fresh", lambda *a, **kw: {"error": "timed out after 120 s"})
    assert numpy_matmul.best_seconds_in_fresh_process(64, 3) == (None, "timed out after 120 s")


def test_numpy_worker_in_a_fresh_process() -> None:
    sec, why = numpy_matmul.best_seconds_in_fresh_process(32, 1)
    assert why == "" and sec is not None and sec > 0
    sec, why = numpy_matmul.best_seconds_in_fresh_process(-1, 1)
    assert sec is None and why.startswith("exited with status 1") and "negative" in why


def test_quick_start_prints_numpy_comparison(monkeypatch, capsys) -> None:
    monkeypatch.setattr(numpy_matmul, "best_seconds_in_fresh_process", lambda n, t: (0.02, ""))
    tune._print_numpy_comparison(SimpleNamespace(best_cost=0.01, kept_cost=0.01, default_is_faster=False,
                                                  kept_speedup=None))
    out = capsys.readouterr().out
    assert "numpy a @ b (OpenBLAS, " in out and "best of 7): 20.000 ms" in out
    assert "runs at 2.00x numpy's speed" in out
    monkeypatch.setattr(numpy_matmul, "best_seconds_in_fresh_process",
                        lambda n, t: (None, "timed out after 120 s"))
    tune._print_numpy_comparison(SimpleNamespace(best_cost=0.01, kept_cost=0.01, default_is_faster=False,
                                                  kept_speedup=None))
    assert capsys.readouterr().out == "numpy a @ b: not measured (timed out after 120 s)\n"


def test_best_seconds_is_the_fastest_repeat() -> None:
    sec = numpy_matmul.best_seconds(16, repeats=3, min_repeat_s=0.001)
    assert 0 < sec < 1
