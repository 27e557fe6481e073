"""The pre-trained cost model: pre-training on several tasks with whole tasks held out, the model
file's provenance (checked as untrusted input), the default model tuning starts from, the CPU
mismatch note, ``ansor costmodel pretrain|info`` and ``SearchTask.best_guess``.

Records are synthetic (a feature-visible made-up cost law, nothing measured) so the tests are fast
and their figures are exact: the law is the same on every task, so a model trained on some tasks
must rank a held-out one well."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import ansor
from ansor.cli import main as cli_main
from ansor.tuning import default_cost_model
from compute.errors import InputError
from cost_model import LGBModel
from cost_model import pretrained as P
from cost_model.pretrain import held_out, pretrain, split_patterns, task_name
from cost_model.provenance import check_provenance
from measure.measure import MeasureInput
from measure.record import RecordToFile
from measure.target import host_cpu_name
from tests.cost_model.test_lgbm_model import _results, _states, synthetic_cost

TASKS = (("matmul", (64, 64, 64)), ("matmul", (48, 80, 32)), ("dense", (32, 64, 48)),
         ("batch_matmul", (2, 32, 32, 16)))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    path = tmp_path_factory.mktemp("pre") / "records.json"
    write = RecordToFile(path)
    for i, (wl, args) in enumerate(TASKS):
        task = ansor.SearchTask(func=wl, args=args)
        states = _states(task, 120, seed=i)
        write([MeasureInput(task, s) for s in states], _results(states))
    return path


@pytest.fixture(scope="module")
def model_file(records, tmp_path_factory):
    res = pretrain([records], ["dense"], seed=0)
    out = tmp_path_factory.mktemp("model") / "pre.json"
    res.model.save(out, provenance=res.provenance(cpu="Test CPU", num_cores=2, vector_lanes=16,
                                                  dataset_seconds=12.5, ansor_py="0.1.0"))
    return out


def test_pretrain_holds_whole_tasks_out_and_ranks_them(records):
    res = pretrain([records], ["dense"], seed=0)
    assert res.trained_tasks == sorted(["matmul(64, 64, 64)", "matmul(48, 80, 32)",
                                        "batch_matmul(2, 32, 32, 16)"])
    assert [r.desc for r in res.heldout_rows] == ["dense(32, 64, 48)"]
    row = res.heldout_rows[0]
    assert row.train == 0 and row.test >= 60
    assert row.pairwise >= 0.8, row  # the law carries over to a task never seen
    assert row.pairwise_random < 0.65
    prov = res.provenance()
    assert prov["llvm_cpu"] == host_cpu_name() and prov["tasks"] == 3
    assert prov["heldout_tasks"] == ["dense(32, 64, 48)"] and prov["heldout_pairwise"] >= 0.8


def test_hold_out_patterns():
    assert split_patterns("softmax, matmul(100, *),dense") == ["softmax", "matmul(100, *)", "dense"]
    assert held_out("matmul(100, 300, 200)", ["matmul(100, *)"])
    assert not held_out("matmul(256, 256, 256)", ["matmul(100, *)"])
    assert held_out("dense(1, 2, 3)", ["dense"]) and not held_out("dense_bias_relu(1, 2, 3)", ["dense"])
    assert task_name({"dag": {}}, "abcdef0123456789") == "dag:abcdef012345"


def test_pretrain_refuses_when_everything_is_held_out(records):
    with pytest.raises(ValueError, match="no task left to train on: 4 task"):
        pretrain([records], ["matmul", "dense", "batch_matmul"])


def test_provenance_round_trips_and_the_model_predicts_the_same(model_file, records):
    m = LGBModel.load(model_file)
    assert m.provenance["cpu"] == "Test CPU" and m.provenance["dataset_seconds"] == 12.5
    task = ansor.SearchTask(func="dense", args=(32, 64, 48))
    states = _states(task, 40, seed=7)
    again = tmp = model_file.parent / "again.json"
    m.save(tmp)  # the provenance is kept when a loaded model is saved again
    m2 = LGBModel.load(again)
    assert m2.provenance == m.provenance
    assert np.allclose(m.predict(task, states), m2.predict(task, states))


@pytest.mark.parametrize("prov, why", [
    ({"cpu": "x\n\x1b[31m"}, "provenance.cpu: must be printable"),
    ({"cpu": "x" * 400}, "at most 300"),
    ({"exec": "import os"}, "unknown provenance field 'exec'"),
    ({"tasks": -1}, "provenance.tasks: must be a non-negative integer"),
    ({"tasks": True}, "provenance.tasks"),
    ({"heldout_pairwise": float("nan")}, "must be a finite number"),
    ({"task_names": "matmul"}, "must be a list"),
    ({"task_names": ["ok", 3]}, r"task_names\[1\]"),
    ([], "'provenance' must be an object"),
])
def test_hostile_provenance_is_refused_naming_the_field(model_file, tmp_path, prov, why):
    doc = json.loads(model_file.read_text())
    doc["provenance"] = prov
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=why):
        LGBModel.load(bad)
    with pytest.raises(ValueError, match=why):
        check_provenance(prov, "f")


def test_a_model_file_with_broken_boosters_is_refused(model_file, tmp_path):
    doc = json.loads(model_file.read_text())
    for boosters, why in (([], "non-empty list"), (["not a model"], "not a LightGBM model text")):
        doc["boosters"] = boosters
        bad = tmp_path / "b.json"
        bad.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match=why):
            LGBModel.load(bad)


def test_default_model_starts_from_the_pretrained_one(model_file, monkeypatch):
    monkeypatch.setenv(P.ENV, str(model_file))
    m = default_cost_model(0)
    assert isinstance(m, LGBModel) and m.base_booster is not None and m.booster is None
    assert m.pretrained_from == str(model_file)
    # Loaded once per process: a second model shares the (read-only) trees.
    assert default_cost_model(1).base_booster is m.base_booster
    task = ansor.SearchTask(func="dense", args=(32, 64, 48))
    states = _states(task, 60, seed=3)
    true = np.array([-synthetic_cost(s) for s in states])
    pred = m.predict(task, states)
    order = np.sign(true[:, None] - true[None, :]) * np.sign(pred[:, None] - pred[None, :])
    assert (order > 0).sum() / max(1, (order != 0).sum()) >= 0.8  # ranks before any measurement
    monkeypatch.setenv(P.ENV, "none")
    assert default_cost_model(0).base_booster is None
    assert default_cost_model(0, pretrained=False).base_booster is None


def test_a_named_model_that_does_not_load_is_an_error_the_shipped_one_a_warning(tmp_path, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    monkeypatch.setenv(P.ENV, str(bad))
    # An InputError (the command line prints it as one line, exit 2) naming the variable.
    with pytest.raises(InputError, match=r"pre-trained cost model \(ANSOR_PRETRAINED_MODEL\): "
                       ".*not a saved ansor-py cost model"):
        default_cost_model(0)
    monkeypatch.delenv(P.ENV)
    monkeypatch.setattr(P, "SHIPPED", bad)
    with pytest.warns(UserWarning, match="shipped pre-trained cost model does not load"):
        assert P.load_pretrained(0) is None


def test_another_cpu_is_noted_once_and_the_model_still_used(model_file, caplog):
    P._warned.clear()
    with caplog.at_level(logging.WARNING, logger="ansor.cost_model"):
        m = P.load_pretrained(0, host_cpu="znver99", path=model_file)
        P.load_pretrained(0, host_cpu="znver99", path=model_file)
    assert m is not None and m.base_booster is not None
    notes = [r for r in caplog.records if "trained on" in r.getMessage()]
    assert len(notes) == 1 and "this host is znver99: using it anyway" in notes[0].getMessage()


def test_cli_pretrain_and_info(records, tmp_path, capsys, monkeypatch):
    out = tmp_path / "m.json"
    assert cli_main(["costmodel", "pretrain", str(records), "-o", str(out), "--holdout",
                     "batch_matmul,dense(32, *)", "--dataset-seconds", "60"]) == 0
    text = capsys.readouterr().out
    assert "trained on 240 programs of 2 task(s)" in text
    assert "| dense(32, 64, 48) | 0 |" in text and "| batch_matmul(2, 32, 32, 16) | 0 |" in text
    assert "mean over held-out tasks: pairwise accuracy" in text
    assert cli_main(["costmodel", "info", str(out)]) == 0
    info = capsys.readouterr().out
    assert f"llvm_cpu: {host_cpu_name()}" in info and "tasks: 2 " in info
    assert "dataset_seconds: 60.0" in info and "heldout_tasks: dense(32, 64, 48), batch_matmul" in info
    monkeypatch.setenv(P.ENV, "none")
    assert cli_main(["costmodel", "info"]) == 1
    assert "no pre-trained model" in capsys.readouterr().err
    assert cli_main(["costmodel", "pretrain", str(records), "-o", str(out), "--holdout",
                     "matmul,dense,batch_matmul"]) == 1
    assert "no task left to train on" in capsys.readouterr().err


def test_best_guess_is_the_models_pick_without_measuring(model_file, monkeypatch):
    from ansor import search_task
    from sketch.search_policy import SearchParams

    monkeypatch.setenv(P.ENV, str(model_file))
    task = ansor.SearchTask(func="matmul", args=(64, 96, 32))
    params = SearchParams(population_size=64, num_generations=1)
    s = task.best_guess(search_params=params, seed=1)
    assert s.canonical_key() == task.best_guess(search_params=params, seed=1).canonical_key()
    a = np.random.default_rng(0).random((64, 32), dtype=np.float32)
    b = np.random.default_rng(1).random((32, 96), dtype=np.float32)
    c = np.zeros((64, 96), np.float32)
    ansor.build(s)(a, b, c)
    assert np.allclose(c, a @ b, rtol=1e-4)
    # without search_params the guess searches with GUESS_SEARCH (small here, to stay fast)
    import sketch.search_policy as sp

    seen = []

    class Spy(sp.SketchPolicy):
        def __init__(self, *a, **kw):
            seen.append(kw.get("params"))
            super().__init__(*a, **kw)

    monkeypatch.setattr(sp, "SketchPolicy", Spy)
    monkeypatch.setattr(search_task, "GUESS_SEARCH", params)
    assert task.best_guess(seed=1).canonical_key() == s.canonical_key()
    assert seen == [params]
    monkeypatch.setenv(P.ENV, "none")
    with pytest.raises(ValueError, match="the cost model is untrained"):
        task.best_guess(search_params=params)


def test_a_network_compiles_with_the_models_guesses(model_file, monkeypatch, capsys):
    from tests.ansor.graph.test_network_compile import _small
    from tests.util import assert_network_matches

    monkeypatch.setenv(P.ENV, str(model_file))
    g = _small()
    lib = ansor.compile_network(g, untuned="guess")
    assert "use the pre-trained model's zero-trial pick" in capsys.readouterr().err
    assert_network_matches(lib, g)
    with pytest.raises(ValueError, match="untuned must be one of rules, guess"):
        ansor.compile_network(g, untuned="best")
    monkeypatch.setenv(P.ENV, "none")
    with pytest.raises(ValueError, match="needs the pre-trained cost model"):
        ansor.compile_network(g, untuned="guess", verbose=False)
    assert cli_main(["network", "run", "resnet-18", "--image-size", "32", "--untuned", "guess",
                     "--rounds", "0"]) == 2
    assert "needs the pre-trained cost model" in capsys.readouterr().err
