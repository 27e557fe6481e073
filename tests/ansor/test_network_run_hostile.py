"""``ansor network run|tasks`` on bad input (issue 40 items 9 and 10): a NaN output fails the
correctness gate (exit 1, a line saying so), and a bad ``--log``, ``--image-size`` or model name
is one ``ansor: ...`` line with exit status 2, never a traceback."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import ansor.cli
from ansor import networks
from ansor.cli.network import compare_outputs
from compute.errors import InputError

from .graph.onnx_util import make_model, rand
from .graph.test_hostile_onnx import _huge_input_model, _huge_pad_model


@pytest.fixture
def relu_onnx(tmp_path):
    path = tmp_path / "relu.onnx"
    path.write_bytes(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2, 3)}).SerializeToString())
    return str(path)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_compare_outputs_does_not_let_nan_through():
    ref = {"y": np.array([1.0, 2.0, 3.0], np.float32)}
    assert compare_outputs({"y": ref["y"] + 1e-6}, ref)[1:] == ([], [])
    worst, problems, warnings = compare_outputs({"y": np.array([1.0, np.nan, np.inf], np.float32)}, ref)
    assert problems == ["output y: 2 of 3 value(s) are NaN or inf where the numpy reference is finite"]
    assert worst == 0.0 and warnings == []  # the finite values agree; the NaN is the failure
    same_inf = {"y": np.array([np.inf, 1.0, np.nan], np.float32)}
    assert compare_outputs(dict(same_inf), same_inf)[1:] == ([], [
        "output y: 2 of 3 value(s) are NaN or inf in the numpy reference too (the network overflows); "
        "the error covers only finite values"])
    assert compare_outputs({"y": np.array([1.0, 1.0, np.nan], np.float32)}, same_inf)[1] == [
        "output y: 1 value(s) are finite or differ where the numpy reference is NaN or inf"]


def test_network_run_fails_on_a_nan_output(relu_onnx, monkeypatch, capsys):
    # The compiled module stands in for a kernel that produced NaN (a 1,000-layer residual chain
    # printed "max error: nan" and exited 0: NaN > 1e-3 is False).
    class NanModule:
        num_kernels, num_layout_transforms = 1, 0

        def run(self, x):
            return {"y": np.full((2, 3), np.nan, np.float32)}

        def benchmark(self):
            return {"mean": 1e-3, "overhead": 1e-6, "overhead_share": 1e-3}

    monkeypatch.setattr("ansor.graph.executor.compile_network", lambda *a, **k: NanModule())
    assert ansor.cli.main(["network", "run", relu_onnx, "--rounds", "0"]) == 1
    assert _one_line(capsys) == ("ansor network run: output y: 6 of 6 value(s) are NaN or inf where the "
                                 "numpy reference is finite")


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_network_run_bad_log_is_one_line(relu_onnx, tmp_path, capsys, kind):
    log = tmp_path / "nope.json" if kind == "missing" else tmp_path
    assert ansor.cli.main(["network", "run", relu_onnx, "--log", str(log), "--rounds", "0"]) == 2
    want = ("no such file (tuning records to take schedules from)" if kind == "missing"
            else "is a directory, not a file of tuning records")
    assert _one_line(capsys) == f"ansor: --log {log}: {want}"


@pytest.mark.parametrize("cmd", ["tasks", "run"])
def test_image_size_too_small_names_the_smallest_that_works(capsys, cmd):
    assert ansor.cli.main(["network", cmd, "resnet-18", "--image-size", "1"]) == 2
    assert "the smallest that works is 32), got 1" in _one_line(capsys)
    with pytest.raises(InputError, match=r"image_size must be a multiple of 32 .* got 100; try 96"):
        networks.get("mobilenet-v2", image_size=100)


def test_unknown_model_is_exit_2(capsys):
    assert ansor.cli.main(["network", "tasks", "no-such-net"]) == 2
    assert _one_line(capsys).startswith("ansor: unknown model 'no-such-net': not a zoo name")


# A model whose run needs more memory than there is: one line naming the tensor, before compiling.
@pytest.mark.parametrize("build", [_huge_input_model, _huge_pad_model])
def test_cli_network_run_refuses_huge_plan_in_one_line(tmp_path, capsys, monkeypatch, build):
    monkeypatch.setenv("ANSOR_MAX_MEMORY", "8G")
    path = tmp_path / "huge.onnx"
    path.write_bytes(build().SerializeToString())
    assert ansor.cli.main(["network", "run", str(path), "--rounds", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ansor: graph test: tensor ") and "8.0 GiB" in err, err


def test_image_size_beyond_any_tensor_names_the_input(capsys):
    with pytest.raises(SystemExit) as info:  # the option's own bound comes first
        ansor.cli.main(["network", "tasks", "resnet-18", "--image-size", str(1 << 30)])
    assert info.value.code == 2
    assert "argument --image-size: must be at most" in capsys.readouterr().err
    from ansor import networks  # the Python API has no option bound: the graph's own check

    with pytest.raises(InputError, match=r"graph input 'data': shape \[1, 1073741824, 1073741824, 3\] has "):
        networks.get("resnet-18", image_size=1 << 30)
