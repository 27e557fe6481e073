"""``benchmarks/runtime_sharing.py`` (issue 44) and ``benchmarks/tree_runs.py``, the A/B runner it
shares with ``search_round.py``: one tiny round of every part on this tree through the command line
(every figure in the JSON, positive), the niced neighbour gone on every exit, and one-line errors."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.util import benchmark_module

ROOT = Path(__file__).resolve().parents[2]


def _module(name: str):
    """A script of ``benchmarks/`` imported by path (it is not a package)."""
    return benchmark_module(name)


def _tiny_onnx(path: Path) -> str:
    """A three-kernel network (conv + relu, pool, dense) written as ONNX."""
    from ansor.graph import GraphBuilder
    from ansor.graph.onnx_export import export_onnx

    rng = np.random.default_rng(0)
    b = GraphBuilder("tiny")
    x = b.input("x", (1, 8, 8, 4))
    w = b.constant(rng.standard_normal((3, 3, 4, 8)).astype(np.float32), "w")
    y = b.relu(b.conv2d(x, w, padding=1))
    y = b.reshape(b.global_avg_pool(y), (1, 8))
    fc = b.constant(rng.standard_normal((5, 8)).astype(np.float32), "fc")
    export_onnx(b.build(b.dense(y, fc)), path)
    return str(path)


def _positive_numbers(d: dict) -> None:
    for k, v in d.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            assert v > 0, k


def _log_of_one_schedule(path: Path, workload: str, args: tuple) -> str:
    """A log holding the untuned schedule of ``workload(args)`` as its one record."""
    from ansor.bench.inputs import make_dag
    from ansor.records import RecordToFile
    from ansor.search_task import SearchTask
    from ansor.untuned import untuned_schedule
    from measure.measure import MeasureInput, MeasureResult

    state, _ = untuned_schedule(make_dag(workload, args))
    RecordToFile(path)([MeasureInput(SearchTask(func=workload, args=args), state)],
                       [MeasureResult((1e-4,), 0, "", 0.1, 1.7e9)])
    return str(path)


@pytest.mark.slow
def test_one_tiny_round_of_every_part(tmp_path, capsys) -> None:
    rs = _module("runtime_sharing")
    net = _tiny_onnx(tmp_path / "tiny.onnx")
    log = _log_of_one_schedule(tmp_path / "k.json", "conv2d_nhwc", (1, 8, 8, 8, 16, 3, 3, 1, 1))
    out = tmp_path / "r.json"
    assert rs.main(["--trees", str(ROOT), "--rounds", "1", "--threads", "2", "--repeat", "2",
                    "--min-repeat-ms", "1", "--warmup-s", "0", "--sizes", "64",
                    "--overhead-network", net, "--kernel", "conv2d_nhwc:1,8,8,8,16,3,3,1,1",
                    "--kernel-log", log, "--numpy-n", "32", "--torch-n", "32", "--niced-network", net,
                    "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    tree = str(ROOT)
    assert rep["threads"] == 2 and rep["machine"]["cpu"] and list(rep["trees"]) == [tree]
    ov = rep["parts"]["overhead"][tree]
    assert len(ov["rounds"]) == 1 and "error" not in ov["rounds"][0]
    assert set(ov["median"]) >= {"add_64_parallel_s", "add_64_serial_s", "network_inference_s",
                                 "network_kernels", "network_per_kernel_s", "network_executor_s"}
    assert ov["median"]["network_kernels"] >= 2
    _positive_numbers(ov["median"])
    il = rep["parts"]["interleave"][tree]
    assert "error" not in il["rounds"][0] and il["rounds"][0]["kernel_threads"] == 2
    assert il["rounds"][0]["schedule"] == "log"  # the record of --kernel-log, not the rules
    assert set(il["median"]) >= {"kernel_s", "numpy_s", "kernel_numpy_s", "torch_s", "kernel_torch_s",
                                 "numpy_pair_over_sum", "torch_pair_over_sum"}
    _positive_numbers(il["median"])
    ni = rep["parts"]["niced"]
    for system in (tree, "onnxruntime"):
        assert len(ni[system]["quiet"]) == len(ni[system]["loaded"]) == 1
        assert ni[system]["quiet_s"] > 0 and ni[system]["loaded_s"] > 0 and ni[system]["slowdown"] > 0
    assert ni[tree]["slowdown_over_onnxruntime"] > 0
    text = capsys.readouterr().out
    assert "pair / (kernel + numpy)" in text and "slowdown / onnxruntime's" in text and "Errors" not in text


def _children_running(code_part: str) -> list[int]:
    """Pids of this process's children whose command line contains ``code_part``."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and code_part in cmd:
            found.append(int(d.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_busy_neighbour_runs_at_nice_19_and_dies_with_an_interrupted_block() -> None:
    rs = _module("runtime_sharing")
    with pytest.raises(KeyboardInterrupt):
        with rs.busy_process(True) as proc:
            stat = Path(f"/proc/{proc.pid}/stat").read_text()
            assert int(stat.rsplit(")", 1)[1].split()[16]) == 19  # field 19: nice
            assert _children_running("os.nice(19)") == [proc.pid]
            raise KeyboardInterrupt  # what Ctrl-C raises in the driver
    assert proc.returncode is not None and _children_running("os.nice(19)") == []
    with rs.busy_process(False) as none:
        assert none is None and _children_running("os.nice(19)") == []


def test_tree_runs_calls_a_function_in_the_tree_and_fails_in_one_line(tmp_path) -> None:
    tr = _module("tree_runs")
    assert tr.run_in_tree(str(ROOT), "tree_runs", "check_trees", [[str(ROOT)]]) == [str(ROOT)]
    with pytest.raises(tr.TreeRunError, match=r"^tree_runs\.nope on .* failed: AttributeError") as e:
        tr.run_in_tree(str(ROOT), "tree_runs", "nope")
    assert "\n" not in str(e.value)
    with pytest.raises(SystemExit, match="is not a source tree"):
        tr.check_trees([str(tmp_path)])
    with pytest.raises(SystemExit, match="named twice"):
        tr.check_trees([str(ROOT), str(ROOT) + "/"])
