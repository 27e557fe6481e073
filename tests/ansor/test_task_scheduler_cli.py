"""``ansor network tune`` (issue 17): arguments and errors, without measuring anything."""
import pytest

from ansor.cli import main as ansor_main


def test_tune_is_listed(capsys):
    with pytest.raises(SystemExit):
        ansor_main(["network", "tune", "--help"])
    out = capsys.readouterr().out
    for flag in ("--trials", "--log", "--strategy", "--tasks", "--min-share", "--per-round", "--seed"):
        assert flag in out


def test_a_filter_matching_nothing_is_named(tmp_path):
    with pytest.raises(SystemExit, match="ansor network tune: the task filter .*'nothing-like-this'"
                                         ".* excludes all 8 tasks"):
        ansor_main(["network", "tune", "bert-base-layer", "--seq-len", "4", "--trials", "8",
                    "--log", str(tmp_path / "l.json"), "--tasks", "nothing-like-this"])


def test_bad_values_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        ansor_main(["network", "tune", "bert-base-layer", "--trials", "-1", "--log", "x"])
    assert "--trials" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ansor_main(["network", "tune", "bert-base-layer", "--trials", "8", "--log", "x",
                    "--strategy", "greedy"])
    assert "invalid choice: 'greedy'" in capsys.readouterr().err
    # a log that cannot be appended to is refused before anything is measured
    with pytest.raises(SystemExit, match=f"ansor network tune: .*{tmp_path}"):
        ansor_main(["network", "tune", "bert-base-layer", "--seq-len", "4", "--trials", "8",
                    "--log", str(tmp_path)])
