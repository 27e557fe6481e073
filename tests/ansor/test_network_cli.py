"""``ansor network list / tasks / run`` (issue 16 item 5), through ``ansor.network_cli.main``."""
import pytest

from ansor.network_cli import main


def test_list_and_tasks(capsys):
    assert main(["list"]) == 0
    assert "resnet-50" in capsys.readouterr().out
    assert main(["tasks", "resnet-18", "--image-size", "32"]) == 0
    out = capsys.readouterr().out
    assert "| ID | subgraph" in out and "18 tasks, 23 subgraphs" in out


def test_run_checks_against_the_reference(capsys):
    assert main(["run", "bert-base-layer", "--seq-len", "4"]) == 0
    out = capsys.readouterr().out
    assert "max error against the numpy reference" in out and "ms per inference" in out


def test_unknown_model_is_named():
    with pytest.raises(SystemExit, match="unknown model 'nope'"):
        main(["tasks", "nope"])
