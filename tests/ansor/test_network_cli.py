"""``ansor network list / tasks / run`` (issue 16 item 5), through ``ansor.cli.main``."""

from ansor.cli import main as ansor_main


def main(argv):
    return ansor_main(["network", *argv])


def test_list_and_tasks(capsys):
    assert main(["list"]) == 0
    assert "resnet-50" in capsys.readouterr().out
    assert main(["tasks", "resnet-18", "--image-size", "32"]) == 0
    out = capsys.readouterr().out
    assert "| ID | subgraph" in out and "18 tasks, 23 subgraphs" in out


def test_run_checks_against_the_reference(capsys):
    assert main(["run", "bert-base-layer", "--seq-len", "4", "--rounds", "0"]) == 0
    out = capsys.readouterr().out
    assert "max error against the numpy reference" in out and "ms per inference" in out
    assert "onnxruntime" not in out  # --rounds 0: no comparison


def test_run_times_the_peers_in_fresh_processes(capsys):
    # a zoo network: onnxruntime runs its ONNX export, PyTorch the eager module; each output
    # was checked against the reference inside its worker before it was timed
    assert main(["run", "resnet-18", "--image-size", "32", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    rows = {ln.split("|")[1].strip(): ln for ln in out.splitlines() if ln.startswith("| ")}
    for system in ("ansor", "onnxruntime", "torch"):
        assert system in rows, out
        ms = rows[system].split("|")[2].strip()
        assert float(ms) > 0, rows[system]
    assert rows["torch"].split("|")[3].strip().endswith("x")


def test_unknown_model_is_named(capsys):
    assert main(["tasks", "nope"]) == 2  # bad input: one line, exit 2 (was SystemExit, status 1)
    assert capsys.readouterr().err.startswith("ansor: unknown model 'nope'")
