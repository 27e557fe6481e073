"""The LightGBM pack-sum model: it learns a ranking, throttles retraining, saves and loads, learns
from record files and warms up another task; the evaluation measures; the CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ansor
from ansor.cli import main as cli_main
from compute.ops import workloads as W
from cost_model import LGBModel, LGBParams, RandomModel
from cost_model.evaluate import evaluate_task, pairwise_accuracy, topk_recall
from cost_model.feature import FEATURE_VERSION
from measure.measure import MeasureErrorNo, MeasureInput, MeasureResult
from measure.record import RecordToFile
from sketch.search_policy import SearchParams, SketchPolicy
from sketch.transform_steps import AnnotationStep, SplitStep


def _task(n=64, m=64, k=64):
    return ansor.SearchTask(func="matmul", args=(n, m, k))


def _states(task, n, seed=0):
    pol = SketchPolicy(task, RandomModel(seed), SearchParams(population_size=n, num_cores=2), seed=seed)
    return pol.sample_initial_population(n)


def synthetic_cost(state) -> float:
    """A made-up but feature-visible law: wide vectors and a parallel loop make programs fast."""
    vec = max([st.lengths[-1] for st in state.steps if isinstance(st, SplitStep)] or [1])
    par = any(isinstance(st, AnnotationStep) and st.annotation == "parallel" for st in state.steps)
    return 1e-3 / (min(vec, 16) * (2.0 if par else 1.0))


def _results(states):
    return [MeasureResult((synthetic_cost(s),), int(MeasureErrorNo.NO_ERROR)) for s in states]


def test_pairwise_and_topk_measures():
    true = np.array([1.0, 2.0, 3.0, 4.0])
    assert pairwise_accuracy(true, true) == 1.0
    assert pairwise_accuracy(-true, true) == 0.0
    assert pairwise_accuracy(np.zeros(4), true) == 0.5  # ties count half
    assert topk_recall(true, true, 0.25) == 1.0
    assert topk_recall(-true, true, 0.25) == 0.0


def test_learns_a_ranking_on_held_out_states():
    task = _task()
    states = _states(task, 400)
    assert len(states) >= 300
    samples = [(s, synthetic_cost(s)) for s in states]
    row = evaluate_task(samples, lambda: LGBModel(seed=0), task.workload_key, "matmul",
                        train_size=200, split="random")
    assert row.pairwise >= 0.85, row
    assert row.pairwise_random < 0.6


def test_untrained_model_scores_randomly_and_update_trains():
    task = _task()
    states = _states(task, 64)
    m = LGBModel(seed=3)
    a = m.predict(task, states)
    assert a.shape == (len(states),) and np.all((a >= 0) & (a <= 1))
    m.update([MeasureInput(task, s) for s in states], _results(states))
    assert m.num_trainings == 1 and m.booster is not None
    pred = m.predict(task, states)
    true = np.array([1.0 / synthetic_cost(s) for s in states])
    assert pairwise_accuracy(pred, true) > 0.8


def test_retraining_is_throttled():
    task = _task()
    states = _states(task, 120)
    m = LGBModel(seed=0)
    m.update([MeasureInput(task, s) for s in states[:100]], _results(states[:100]))
    assert m.num_trainings == 1
    m.update([MeasureInput(task, s) for s in states[100:110]], _results(states[100:110]))
    assert m.num_trainings == 1  # 10 new < 20% of 100
    m.update([MeasureInput(task, s) for s in states[110:120]], _results(states[110:120]))
    assert m.num_trainings == 2  # 20 new since the last training
    # the same programs again add nothing
    m.update([MeasureInput(task, s) for s in states[:50]], _results(states[:50]))
    assert m.num_samples() == 120


def test_failed_measurements_get_label_zero():
    task = _task()
    states = _states(task, 40)
    m = LGBModel(seed=0)
    res = _results(states)
    res[0] = MeasureResult((), int(MeasureErrorNo.RUN_TIMEOUT), "timeout")
    m.update([MeasureInput(task, s) for s in states], res)
    labels = m.data[task.workload_key].labels()
    assert labels[0] == 0.0 and labels.max() == pytest.approx(1.0)


def test_save_load_round_trip_and_errors(tmp_path):
    task = _task()
    states = _states(task, 80)
    m = LGBModel(seed=0)
    m.update([MeasureInput(task, s) for s in states], _results(states))
    path = tmp_path / "model.json"
    m.save(path)
    loaded = LGBModel.load(path)
    assert np.allclose(loaded.predict(task, states), m.predict(task, states))
    doc = json.loads(path.read_text())
    assert doc["feature_version"] == FEATURE_VERSION
    # trained further on new data, the loaded trees are kept and the sum is saved again
    more = _states(task, 60, seed=5)
    loaded.update([MeasureInput(task, s) for s in more], _results(more))
    loaded.save(tmp_path / "model2.json")
    assert len(json.loads((tmp_path / "model2.json").read_text())["boosters"]) == 2
    again = LGBModel.load(tmp_path / "model2.json")
    assert np.allclose(again.predict(task, more), loaded.predict(task, more))

    doc["feature_version"] = "old"
    (tmp_path / "old.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="features 'old'"):
        LGBModel.load(tmp_path / "old.json")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a saved cost model"):
        LGBModel.load(tmp_path / "junk.json")
    with pytest.raises(ValueError, match="not been trained"):
        LGBModel().save(tmp_path / "x.json")
    with pytest.raises(ValueError, match="feature_fraction"):
        LGBParams(feature_fraction=0)


def _write_log(path, task, states):
    rec = RecordToFile(path)
    rec([MeasureInput(task, s) for s in states], _results(states))


def test_update_from_file_warms_up_another_task(tmp_path):
    """A model trained on records of one GEMM ranks programs of another GEMM shape."""
    src, dst = _task(64, 64, 64), _task(96, 64, 128)
    log = tmp_path / "src.json"
    _write_log(log, src, _states(src, 300))
    m = LGBModel(seed=0)
    assert m.update_from_file(log) >= 250
    assert m.num_trainings == 1
    states = _states(dst, 200, seed=9)
    pred = m.predict(dst, states)
    true = np.array([1.0 / synthetic_cost(s) for s in states])
    assert pairwise_accuracy(pred, true) > 0.75


def test_update_from_file_skips_unknown_workloads(tmp_path):
    task = _task()
    log = tmp_path / "log.json"
    _write_log(log, task, _states(task, 20))
    line = json.loads(log.read_text().splitlines()[0])
    line["input"]["task"] = {"workload": "no_such_workload", "args": []}
    line["input"]["workload_key"] = "0" * 32
    with open(log, "a") as f:
        f.write(json.dumps(line) + "\n")
    m = LGBModel(seed=0)
    with pytest.warns(Warning, match="no_such_workload"):
        added = m.update_from_file(log)
    assert added == 20


def test_cli_costmodel_eval_and_train(tmp_path, capsys):
    task = _task()
    log = tmp_path / "log.json"
    _write_log(log, task, _states(task, 160))
    assert cli_main(["costmodel", "eval", str(log), "--train", "100"]) == 0
    out = capsys.readouterr().out
    assert "pairwise accuracy" in out and "| matmul | 100 |" in out
    assert cli_main(["costmodel", "eval", str(log), "--train", "1000"]) == 1
    assert "no task has more than" in capsys.readouterr().err
    model = tmp_path / "m.json"
    assert cli_main(["costmodel", "train", str(log), "-o", str(model)]) == 0
    assert LGBModel.load(model).predict(task, _states(task, 8)).shape == (8,)
    assert cli_main(["costmodel", "eval", str(tmp_path / "missing.json")]) == 2


def test_tune_uses_the_learned_model_by_default():
    from ansor.tuning import default_cost_model

    assert isinstance(default_cost_model(0), LGBModel)
