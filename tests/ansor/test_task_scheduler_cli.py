"""``ansor network tune`` (issue 17): arguments and errors, without measuring anything."""
import json
import re

import pytest

from ansor.cli import main as ansor_main


def test_tune_is_listed(capsys):
    with pytest.raises(SystemExit):
        ansor_main(["network", "tune", "--help"])
    out = capsys.readouterr().out
    for flag in ("--trials", "--log", "--strategy", "--tasks", "--min-share", "--per-round", "--seed"):
        assert flag in out


def test_a_filter_matching_nothing_is_named(tmp_path, capsys):
    assert ansor_main(["network", "tune", "bert-base-layer", "--seq-len", "4", "--trials", "8",
                       "--log", str(tmp_path / "l.json"), "--tasks", "nothing-like-this"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line, no traceback
    assert re.search("ansor: the task filter .*'nothing-like-this'.* excludes all 8 tasks", err)


def test_a_model_without_tasks_is_bad_input(tmp_path, capsys):
    """A model with no reduction has nothing to tune: bad input (exit 2), one line."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")],
                                                "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "relu.onnx"
    onnx.save(model, str(path))
    assert ansor_main(["network", "tune", str(path), "--trials", "8",
                       "--log", str(tmp_path / "l.json")]) == 2
    assert "has no task to tune" in capsys.readouterr().err


def test_bad_values_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        ansor_main(["network", "tune", "bert-base-layer", "--trials", "-1", "--log", "x"])
    assert "--trials" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ansor_main(["network", "tune", "bert-base-layer", "--trials", "8", "--log", "x",
                    "--strategy", "greedy"])
    assert "invalid choice: 'greedy'" in capsys.readouterr().err
    # a log that cannot be appended to is refused before anything is measured (bad input: 2)
    assert ansor_main(["network", "tune", "bert-base-layer", "--seq-len", "4", "--trials", "8",
                       "--log", str(tmp_path)]) == 2
    assert f"ansor network tune: log file '{tmp_path}' is a directory" in capsys.readouterr().err


def test_a_real_tuning_run_end_to_end(tmp_path, capsys):
    """A small network from an ONNX file, really measured: the progress table, the history
    file, then the untuned and tuned network beside onnxruntime and PyTorch and the exported
    library; a second run resumes from the log."""
    import numpy as np

    from ansor.graph import GraphBuilder
    from ansor.graph.onnx_export import export_onnx

    rng = np.random.default_rng(0)
    b = GraphBuilder("tiny")
    x = b.input("x", (1, 8, 8, 8))
    y = b.relu(b.conv2d(x, b.constant(rng.standard_normal((3, 3, 8, 16)).astype(np.float32), "w"),
                        b.constant(rng.standard_normal(16).astype(np.float32), "b"), padding=1))
    y = b.dense(b.reshape(b.global_avg_pool(y), (1, 16)), b.constant(rng.standard_normal((4, 16)).astype(np.float32), "d"))
    model = tmp_path / "tiny.onnx"
    export_onnx(b.build(y), model)
    log = tmp_path / "log.json"
    argv = ["network", "tune", str(model), "--trials", "4", "--per-round", "2", "--population", "32",
            "--log", str(log), "--seed", "0", "--rounds", "1"]
    assert ansor_main(argv) == 0
    out = capsys.readouterr().out
    assert "| ID | task" in out and "estimated total latency" in out
    # calibrated in the network after the warm-up, and on the network as finally chosen
    cal = re.findall(r"calibrated in the network at trial (\d+): kernels ([0-9.]+) ms", out)
    assert len(cal) >= 2 and all(float(ms) > 0 for _, ms in cal), out
    assert "scaled by its slowdown in the network" in out
    tsv = (tmp_path / "log.json.calibration.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == ["trials", "task", "record_ms", "in_network_ms", "factor"] and len(tsv) >= 3
    assert re.search(r"estimated latency, calibrated in the network as compiled now: [0-9.]+ ms", out)
    rows = {ln.split("|")[1].strip(): ln for ln in out.splitlines() if ln.startswith("| ")}
    for system in ("ansor, untuned", "ansor, tuned", "onnxruntime", "PyTorch eager"):
        assert system in rows, out
        assert float(rows[system].split("|")[2]) > 0, rows[system]
    assert (tmp_path / "log.json.latency.tsv").read_text().count("\n") >= 2
    # It ends with the shippable result: the library beside the log and how to run it.
    assert (tmp_path / "log-lib" / "net.so").is_file() and (tmp_path / "log-lib" / "ansor_runtime.py").is_file()
    assert "import ansor_runtime" in out and "log-lib/net.so" in out
    # 4 trials, plus the re-measurements that confirm each task's best (same steps again)
    recs = [json.loads(ln) for ln in log.read_text().splitlines()]
    distinct = {(r["input"]["workload_key"], json.dumps(r["input"]["steps"])) for r in recs}
    assert len(distinct) == 4 and len(recs) > 4
    assert ansor_main(argv[:4] + ["2"] + argv[5:-1] + ["0", "--no-calibrate"]) == 0
    out = capsys.readouterr().out
    assert "4 record(s)" in out and "calibrated" not in out
    recs = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert len({(r["input"]["workload_key"], json.dumps(r["input"]["steps"])) for r in recs}) == 6
