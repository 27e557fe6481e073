"""``--shape`` and ``--batch`` of the ``network`` commands (issue 42 item 2): a model with a
dynamic batch is sized on the command line, and every missing or bad shape is one line, exit 2,
in the command line's words (not a traceback, not a Python call)."""
from __future__ import annotations

import numpy as np
import pytest

from ansor.cli import main as ansor_main

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _tiny_dynamic(path) -> str:
    """conv 3x3 + relu + flatten + gemm on an NCHW input with a dynamic batch ``'batch'``."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    wd = numpy_helper.from_array(rng.standard_normal((5, 4 * 14 * 14)).astype(np.float32), "wd")
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])
    nodes = [helper.make_node("Conv", ["input", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]), helper.make_node("Gemm", ["f", "wd"], ["y"], transB=1)]
    model = helper.make_model(helper.make_graph(nodes, "tiny", [x], [y], [w, wd]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)


def _two_inputs(path) -> str:
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 8])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [8, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                                                "two", [a, b], [y]), opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)


def _one_line_exit_2(argv, capsys) -> str:
    assert ansor_main(argv) == 2
    cap = capsys.readouterr()
    err = cap.err
    assert err.count("\n") == 1 and err.startswith("ansor: ") and "Traceback" not in err, err
    assert not cap.out, cap.out
    return err


@pytest.mark.parametrize("command", ["tasks", "run", "tune"])
def test_a_dynamic_batch_is_one_line_naming_the_flags(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _tiny_dynamic(tmp_path / "tiny.onnx")
    err = _one_line_exit_2(["network", command, path], capsys)
    assert err == (f"ansor: {path}: input 'input' has a dynamic dimension 0 ('batch'); give it with "
                   f"--shape input=1x3x16x16 or --batch 1\n")
    assert "shape=" not in err  # the command line's words, not the Python call's


def _tasks(argv, capsys) -> str:
    assert ansor_main(["network", "tasks", *argv]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_shape_and_batch_size_the_model(tmp_path, capsys):
    path = _tiny_dynamic(tmp_path / "tiny.onnx")
    for argv in (["--shape", "input=2x3x16x16"], ["--shape", "input=2,3,16,16"], ["--shape", "2x3x16x16"],
                 ["--batch", "2"], ["--batch", "7", "--shape", "input=2x3x16x16"]):  # --shape wins
        out = _tasks([path, *argv], capsys)
        assert "conv2d+relu 2x14x14x4" in out and "dense+identity 2x5" in out, (argv, out)
    assert "conv2d+relu 3x14x14x4" in _tasks([path, "--batch", "3"], capsys)


def test_batch_of_a_zoo_network(capsys):
    assert "dense+add 12x768" in _tasks(["bert-base-layer", "--seq-len", "4", "--batch", "3"], capsys)  # 3 x 4 rows


@pytest.mark.parametrize("argv, words", [
    (["--shape", "inpt=1x3x16x16"], "--shape names unknown input(s) inpt; inputs: input"),
    (["--shape", "input=0x3x16x16"], "--shape input=0x3x16x16: dimension '0' is not an integer in [1, 2147483647]"),
    (["--shape", "input=-1x3x16x16"], "dimension '-1' is not an integer in [1, 2147483647]"),
    (["--shape", "input=1.5x3x16x16"], "dimension '1.5' is not an integer in [1, 2147483647]"),
    (["--shape", "input=ax3x16x16"], "dimension 'a' is not an integer in [1, 2147483647]"),
    (["--shape", "input=\u00b2x3x16x16"], "dimension '\u00b2' is not an integer in"),
    (["--shape", "input="], "dimension '' is not an integer in [1, 2147483647]"),
    (["--shape", "input=99999999999x3x16x16"], "dimension '99999999999' is not an integer in [1, 2147483647]"),
    (["--shape", "=1x3x16x16"], "the input name before '=' is empty"),
    (["--shape", "input=1x3x16"], "--shape gives 1x3x16 for input input, which the model declares as "
                                  "['batch', 3, 16, 16] (rank 3, the model's is 4)"),
    (["--shape", "input=1x4x16x16"], "a static dimension differs"),
    (["--shape", "input=1x3x16x16", "--shape", "input=2x3x16x16"], "input 'input' is given twice"),
    (["--shape", "1x3x16x16", "--shape", "input=2x3x16x16"], "give NAME=DIMS when --shape is repeated"),
    (["--image-size", "32"], "--image-size applies to zoo networks, not to an ONNX file: give the "
                             "input's shape with --shape"),
    (["--seq-len", "32"], "--seq-len applies to zoo networks"),
])
def test_bad_shape_values_are_one_line(argv, words, tmp_path, capsys):
    path = _tiny_dynamic(tmp_path / "tiny.onnx")
    assert words in _one_line_exit_2(["network", "tasks", path, *argv], capsys)


def test_shapes_of_a_two_input_model(tmp_path, capsys):
    path = _two_inputs(tmp_path / "two.onnx")
    err = _one_line_exit_2(["network", "tasks", path, "--shape", "3x8"], capsys)
    assert "--shape without NAME= needs a model with one input; this one has 2 (a, b)" in err
    assert "matmul 3x2" in _tasks([path, "--batch", "3"], capsys)  # b's static first dimension is kept
    assert "matmul 5x2" in _tasks([path, "--shape", "a=5x8"], capsys)
    err = _one_line_exit_2(["network", "tasks", path], capsys)
    assert "input 'a' has a dynamic dimension 0 ('n'); give it with --shape a=1x8 or --batch 1" in err


def test_batch_against_a_fixed_batch(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])]),
                              opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "fixed.onnx")
    onnx.save(model, path)
    err = _one_line_exit_2(["network", "tasks", path, "--batch", "4"], capsys)
    assert "--batch 4: no input has a dynamic first dimension, and input x's is 1: the model's batch is fixed" in err
    assert ansor_main(["network", "tasks", path, "--batch", "1"]) == 0  # what the model says: fine


def test_a_huge_shape_is_refused_before_tuning(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _tiny_dynamic(tmp_path / "tiny.onnx")
    err = _one_line_exit_2(["network", "tune", path, "--shape", "input=2147483647x3x16x16", "--trials", "1"],
                           capsys)
    assert "graph tiny: tensor" in err and "2147483647" in err and "of memory available" in err
    assert not (tmp_path / "tiny.json").exists()  # nothing tuned, no log


def test_shape_is_for_onnx_files(capsys):
    err = _one_line_exit_2(["network", "tasks", "mlp", "--shape", "data=1x8"], capsys)
    assert "--shape applies to .onnx files" in err


def test_help_describes_shape_and_batch(capsys):
    for command in ("tasks", "run", "tune"):
        with pytest.raises(SystemExit):
            ansor_main(["network", command, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "--shape NAME=DIMS" in out and "--batch N" in out and "NAME=1x3x224x224" in out
        assert "give the input's shape with --shape instead" in out  # --image-size's help


@pytest.mark.slow
def test_tune_a_dynamic_batch_model_with_shape(tmp_path, monkeypatch, capsys):
    """The whole tuning run on the sized model: its tasks have batch 2, its records are written."""
    monkeypatch.chdir(tmp_path)
    path = _tiny_dynamic(tmp_path / "tiny.onnx")
    log = tmp_path / "tiny.json"
    assert ansor_main(["network", "tune", path, "--shape", "input=2x3x16x16", "--trials", "2",
                       "--per-round", "1", "--population", "16", "--cost-model", "random",
                       "--rounds", "0", "--log", str(log), "-q"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "measured latency of the compiled network" in out
    assert log.is_file() and log.read_text().count("\n") >= 1


def _half_model(path) -> str:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float16), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", 4, 6, 6])
    model = helper.make_model(helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"]),
                                                 helper.make_node("Relu", ["c"], ["y"])], "half", [x], [y], [w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)


def test_run_a_float16_model_with_a_dynamic_batch(tmp_path, capsys):
    """``network run`` feeds a half-precision model float16 arrays (through the module's
    boundary) and checks it against the numpy reference."""
    path = _half_model(tmp_path / "half.onnx")
    assert ansor_main(["network", "run", path, "--batch", "2", "--rounds", "0"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("max error against the numpy reference"))
    assert float(line.rsplit(" ", 1)[1]) < 1e-3, line  # both round the same float32 values to float16


@pytest.mark.slow
def test_compare_a_float16_model_with_its_peers(tmp_path, capsys):
    """The peers' fresh processes size the model with the same --batch, feed onnxruntime float16
    and PyTorch float32 (the graph's own dtype): every row has a latency."""
    path = _half_model(tmp_path / "half.onnx")
    assert ansor_main(["network", "run", path, "--batch", "2", "--rounds", "1"]) == 0, capsys.readouterr().err
    rows = {ln.split("|")[1].strip(): ln.split("|")[2].strip() for ln in capsys.readouterr().out.splitlines()
            if ln.startswith("| ")}
    for system in ("ansor", "onnxruntime", "torch"):
        assert float(rows[system]) > 0, rows
