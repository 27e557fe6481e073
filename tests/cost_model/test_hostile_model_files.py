"""Hostile cost-model files (issue 40): each made from the shipped pre-trained model by editing one
field of its LightGBM text or of the JSON around it, each refused with one message naming the
problem, through ``LGBModel.load`` and through the command line; never a crash.

Before ``cost_model.model_file`` LightGBM parsed these as given: an index out of range segfaulted
the tuner (exit 139), a cycle hung it in ``predict``, a short array aborted it (134) and
``num_tree_per_iteration=0`` killed it with SIGFPE (136). So every load here runs in a
subprocess: a regression kills that process, not pytest. The edited files recompute
``tree_sizes``, as a careful attacker would, so LightGBM reaches the edited field.
"""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import ansor
from cost_model import LGBModel, LGBParams
from cost_model.feature import NUM_FEATURES
from cost_model.model_file import (MAX_BOOSTERS, MAX_DEPTH_SUM, MAX_FILE_BYTES, MAX_LEAVES, MAX_TREES,
                                   rebuild_model_text)
from cost_model.pretrained import SHIPPED
from measure.measure import MeasureErrorNo, MeasureInput, MeasureResult
from tests.cost_model.test_lgbm_model import _results, _states

ROOT = Path(__file__).resolve().parents[2]
DOC = json.loads(SHIPPED.read_text())
TEXT = DOC["boosters"][0]
T0 = r"boosters\[0\], Tree=0: "


def _field(text: str, key: str, edit: Callable[[list[str]], str], tree: int = 0) -> str:
    """``text`` with the ``key=`` line of tree ``tree`` replaced by ``edit(its tokens)``, and
    ``tree_sizes`` recomputed."""
    start = text.index(f"Tree={tree}\n")
    end = text.index("\n\n", start)
    m = re.search(rf"^{key}=(.*)$", text[start:end], re.M)
    assert m, key
    a, b = start + m.start(1), start + m.end(1)
    return _sized(text[:a] + edit(m.group(1).split(" ")) + text[b:])


def _at(i: int, value: object) -> Callable[[list[str]], str]:
    return lambda toks: " ".join(toks[:i] + [str(value)] + toks[i + 1:])


def _all(value: object) -> Callable[[list[str]], str]:
    return lambda toks: " ".join([str(value)] * len(toks))


def _header(text: str, key: str, value: str) -> str:
    out, n = re.subn(rf"^{key}=.*$", f"{key}={value}", text, count=1, flags=re.M)
    assert n == 1, key
    return out


def _sized(text: str) -> str:
    p, e = text.index("Tree=0\n"), text.index("end of trees")
    starts = [m.start() for m in re.finditer(r"^Tree=\d+\n", text[p:e], re.M)] + [e - p]
    return _header(text, "tree_sizes", " ".join(str(b - a) for a, b in zip(starts, starts[1:])))


def _tree_line(text: str, after: str, line: str) -> str:
    """A line added to tree 0 after its ``after=`` line."""
    i = text.index("\n", text.index(f"\n{after}=", text.index("Tree=0\n")) + 1)
    return _sized(text[:i + 1] + line + "\n" + text[i + 1:])


def _one_leaf_trees(n: int) -> str:
    head = TEXT[:TEXT.index("Tree=0\n")]
    tree = "num_leaves=1\nnum_cat=0\nleaf_value=0.5\nis_linear=0\nshrinkage=1\n\n\n"
    return _sized(head + "".join(f"Tree={i}\n{tree}" for i in range(n)) + "end of trees\n")


def _chains(trees: int, leaves: int) -> str:
    """Trees of ``leaves`` leaves, each a chain (node j: leaf j on the left, node j+1 on the right):
    a valid tree whose depth, leaves - 1, every prediction walks."""
    head = TEXT[:TEXT.index("Tree=0\n")]
    right = " ".join(map(str, range(1, leaves - 1))) + f" {-leaves}"
    tree = (f"num_leaves={leaves}\nnum_cat=0\nsplit_feature={' '.join(['0'] * (leaves - 1))}\n"
            f"threshold={' '.join(['0'] * (leaves - 1))}\n"
            f"left_child={' '.join(str(-j - 1) for j in range(leaves - 1))}\nright_child={right}\n"
            f"leaf_value={' '.join(['0'] * leaves)}\nis_linear=0\nshrinkage=1\n\n\n")
    return _sized(head + "".join(f"Tree={i}\n{tree}" for i in range(trees)) + "end of trees\n")


# name -> (the booster text, what the error names)
TEXT_CASES: dict[str, tuple[str, str]] = {
    "split_feature_huge": (_field(TEXT, "split_feature", _all(10 ** 9)),
                           T0 + r"split_feature\[0\] = 1000000000 is not a feature \(the schema has 164"),
    "split_feature_164": (_field(TEXT, "split_feature", _at(3, 164)), T0 + r"split_feature\[3\] = 164"),
    "split_feature_negative": (_field(TEXT, "split_feature", _at(0, -5)), T0 + r"split_feature\[0\] = -5"),
    "child_not_a_node": (_field(TEXT, "left_child", _all(10 ** 9)),
                         T0 + r"left_child\[0\] = 1000000000 is not a node \(the tree has 30"),
    "child_not_a_leaf": (_field(TEXT, "right_child", _at(6, -32)),
                         T0 + r"right_child\[6\] = -32 is leaf 31, not one of the tree's 31 leaves"),
    "child_leaf_huge": (_field(TEXT, "left_child", _all(-10 ** 9)), T0 + r"left_child\[0\] = -1000000000"),
    "cycle_to_root": (_field(_field(TEXT, "left_child", _at(0, 0)), "right_child", _at(0, 0)),
                      T0 + r"left_child\[0\] = 0 reaches node 0 a second time \(a cycle"),
    "cycle_deep": (_field(TEXT, "left_child", _at(12, 0)), T0 + r"left_child\[12\] = 0 reaches node 0"),
    "shared_subtree": (_field(TEXT, "right_child", _at(0, 1)), T0 + r"right_child\[0\] = 1 reaches node 1"),
    "short_split_feature": (_field(TEXT, "split_feature", lambda t: " ".join(t[:5])),
                            T0 + r"split_feature \(num_leaves=31\) has 5 entries, expected 30"),
    "short_left_child": (_field(TEXT, "left_child", lambda t: " ".join(t[:5])), T0 + r"left_child .*5 entries"),
    "short_threshold": (_field(TEXT, "threshold", lambda t: " ".join(t[:5])), T0 + r"threshold .*5 entries"),
    "short_decision_type": (_field(TEXT, "decision_type", lambda t: " ".join(t[:5])),
                            T0 + r"decision_type .*5 entries"),
    "short_leaf_value": (_field(TEXT, "leaf_value", lambda t: " ".join(t[:5])),
                         T0 + r"leaf_value \(num_leaves=31\) has 5 entries, expected 31"),
    "num_leaves_huge": (_field(TEXT, "num_leaves", lambda t: "2000000000"),
                        T0 + r"num_leaves=2000000000, expected 1 to 131072"),
    "num_leaves_negative": (_field(TEXT, "num_leaves", lambda t: "-3"), T0 + r"num_leaves=-3"),
    "num_leaves_more": (_field(TEXT, "num_leaves", lambda t: "40"), T0 + r"split_feature \(num_leaves=40\)"),
    "nan_threshold": (_field(TEXT, "threshold", _at(0, "nan")), T0 + r"threshold .*no nan or inf"),
    "inf_leaf_value": (_field(TEXT, "leaf_value", _at(0, "inf")), T0 + r"leaf_value .*no nan or inf"),
    "overflowing_leaf_value": (_field(TEXT, "leaf_value", _at(0, "1e999")),
                               T0 + r"leaf_value \(num_leaves=31\) holds a number too large"),
    "int_beyond_32_bits": (_field(TEXT, "leaf_count", _at(0, 9999999999)), T0 + r"leaf_count .*beyond 32 bits"),
    "categorical_decision": (_field(TEXT, "decision_type", _at(0, 1)),
                             T0 + r"decision_type\[0\] = 1 is a categorical split"),
    "decision_type_bits": (_field(TEXT, "decision_type", _at(2, 14)),
                           T0 + r"decision_type\[2\] = 14 is not a numerical decision type"),
    "categorical_tables": (_tree_line(_field(_field(TEXT, "decision_type", _all(1)), "num_cat", lambda t: "1"),
                                      "num_cat", "cat_boundaries=0 1\ncat_threshold=4294967295"),
                           T0 + r"field 'cat_boundaries' is not one an ansor-py model has"),
    "num_cat": (_field(TEXT, "num_cat", lambda t: "2"), T0 + r"num_cat='2': categorical splits are refused"),
    "linear_tree": (_field(TEXT, "is_linear", lambda t: "1"), T0 + r"is_linear='1': linear trees"),
    "line_without_equals": (_tree_line(TEXT, "num_leaves", "garbage"), T0 + r"line 'garbage' is not key=value"),
    "duplicate_field": (_tree_line(TEXT, "num_leaves", "num_leaves=3"), T0 + r"'num_leaves' given twice"),
    "max_feature_idx_beyond_schema": (_header(TEXT, "max_feature_idx", "99999"),
                                      r"boosters\[0\]: header max_feature_idx='99999', expected 163"),
    "num_tree_per_iteration_0": (_header(TEXT, "num_tree_per_iteration", "0"),
                                 r"header num_tree_per_iteration='0', expected 1"),
    "num_class_3": (_header(TEXT, "num_class", "3"), r"header num_class='3', expected 1"),
    "objective": (TEXT.replace("\nfeature_names=", "\nobjective=multiclass num_class:3\nfeature_names=", 1),
                  r"header field 'objective' is not one an ansor-py model has"),
    "feature_names_count": (_header(TEXT, "feature_names", "a b c"), r"header feature_names are not the 164"),
    "feature_infos": (_header(TEXT, "feature_infos", "x " * 164), r"header feature_infos must be 164"),
    "truncated_mid_tree": (TEXT[:TEXT.index("Tree=3\n") + 200], r"Tree=3: no leaf_value"),
    "truncated_between_trees": (TEXT[:TEXT.index("Tree=3\n")],
                                r"truncated or damaged: the end of the text after 3 tree\(s\)"),
    "tree_numbering": (_sized(TEXT.replace("Tree=1\n", "Tree=7\n", 1)), r"'Tree=7' where 'Tree=1' belongs"),
    "not_a_model": ("hello", r"not a LightGBM model text \(first line 'hello'"),
    "nul_byte": (TEXT.replace("num_leaves=31", "num_leaves=31\0", 1), r"non-ASCII, CR or NUL"),
    "too_many_trees": (_one_leaf_trees(MAX_TREES + 1), rf"more than {MAX_TREES} trees"),
    "deep_chains": (_chains(4, MAX_LEAVES),  # valid trees, but each prediction would walk 524,284 nodes
                    rf"the depths of the trees up to Tree=3 add up to 524284, more than {MAX_DEPTH_SUM}"),
}

# name -> (the file's bytes, what the error names): the JSON around the texts
_P = dict(DOC["params"])
FILE_CASES: dict[str, tuple[bytes, str]] = {
    "not_json": (b"{not json", r"not a saved cost model \(not JSON"),
    "not_utf8": (b"\xff\xfe{}", r"not JSON"),
    "deeply_nested_json": (b"[" * 200_000, r"not JSON"),
    "boosters_not_a_list": (json.dumps({**DOC, "boosters": "tree"}).encode(), r"'boosters' must be a non-empty"),
    "too_many_boosters": (json.dumps({**DOC, "boosters": [TEXT] * (MAX_BOOSTERS + 1)}).encode(),
                          rf"at most {MAX_BOOSTERS} LightGBM model texts"),
    "params_string": (json.dumps({**DOC, "params": {**_P, "num_boost_round": "200"}}).encode(),
                      r"params.num_boost_round must be an integer, not a str"),
    "params_billion_rounds": (json.dumps({**DOC, "params": {**_P, "num_boost_round": 10 ** 9}}).encode(),
                              r"params: LGBParams: num_boost_round 1 to 10000"),
    "params_nan": (json.dumps({**DOC, "params": {**_P, "learning_rate": float("nan")}}).encode(),
                   r"params: LGBParams: .*learning_rate"),
    "params_negative": (json.dumps({**DOC, "params": {**_P, "min_data_in_leaf": -1}}).encode(),
                        r"LGBParams.min_data_in_leaf must be in \[0, 2\*\*31\)"),
    "feature_names": (json.dumps({**DOC, "feature_names": DOC["feature_names"][::-1]}).encode(),
                      r"'feature_names' are not the 164 features"),
}

# Wrong tree_sizes crashed LightGBM (it seeks to each tree by them); they are recomputed now, so
# these load and predict exactly as the shipped model does.
HARMLESS = {
    "tree_sizes_off": _header(TEXT, "tree_sizes", " ".join(str(int(s) + 7) for s in re.search(
        r"^tree_sizes=(.*)$", TEXT, re.M).group(1).split())),
    "tree_sizes_huge": _header(TEXT, "tree_sizes", " ".join(["99999999"] * 200)),
}

_LOADER = """
import sys
import numpy as np
from cost_model import LGBModel
from cost_model.feature import NUM_FEATURES
rows = np.random.default_rng(0).uniform(0, 30, (300, NUM_FEATURES))
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[-1][:-5]
    try:
        m = LGBModel.load(path)
    except ValueError as e:
        print(name, type(e).__name__, str(e).replace("\\n", " "), sep="\\t", flush=True)
        continue
    print(name, "loaded", repr(float(m.base_booster.predict(rows).sum())), sep="\\t", flush=True)
"""


def _write(path: Path, booster: str) -> Path:
    path.write_text(json.dumps({**DOC, "boosters": [booster]}))
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile")
    files = {"clean": _write(d / "clean.json", TEXT)}
    for name, (text, _) in TEXT_CASES.items():
        files[name] = _write(d / f"{name}.json", text)
    for name, text in HARMLESS.items():
        files[name] = _write(d / f"{name}.json", text)
    for name, (raw, _) in FILE_CASES.items():
        (d / f"{name}.json").write_bytes(raw)
        files[name] = d / f"{name}.json"
    big = d / "huge_file.json"  # sparse: its size is refused before anything is read
    with open(big, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    files["huge_file"] = big
    return files


@pytest.fixture(scope="module")
def loaded(corpus) -> dict[str, list[str]]:
    """Every corpus file through ``LGBModel.load`` in one subprocess: name -> [outcome, detail]
    (a crash of the loader leaves the files after the one that crashed it without an entry)."""
    proc = subprocess.run([sys.executable, "-c", _LOADER, *map(str, corpus.values())], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300)
    out = {line.split("\t")[0]: line.split("\t")[1:] for line in proc.stdout.splitlines()}
    out["<exit>"] = [str(proc.returncode), proc.stderr[-1000:]]
    return out


def _outcome(loaded: dict[str, list[str]], name: str) -> list[str]:
    assert name in loaded, f"the loader died (exit {loaded['<exit>'][0]}) at or before {name}: " \
                           f"{loaded['<exit>'][1]}"
    return loaded[name]


@pytest.mark.parametrize("name", [*TEXT_CASES, *FILE_CASES, "huge_file"])
def test_a_hostile_model_file_is_refused_naming_the_problem(name, corpus, loaded):
    why = {**{k: w for k, (_, w) in TEXT_CASES.items()}, **{k: w for k, (_, w) in FILE_CASES.items()},
           "huge_file": rf"{MAX_FILE_BYTES >> 20} MiB; a cost-model file may be at most"}[name]
    outcome, detail = _outcome(loaded, name)
    assert outcome == "CostModelFileError", detail
    assert detail.startswith(str(corpus[name]) + ": "), detail  # the file first
    assert re.search(why, detail), detail


@pytest.mark.parametrize("name", list(HARMLESS))
def test_wrong_tree_sizes_are_recomputed_not_trusted(name, loaded):
    assert _outcome(loaded, name) == _outcome(loaded, "clean") and loaded["clean"][0] == "loaded"


def _ansor(args: list[str], tmp_path: Path, model: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ANSOR_DEBUG", None)
    if model is not None:
        env["ANSOR_PRETRAINED_MODEL"] = str(model)
    # The error must come before anything is measured: a hang (the old cycle case) times out.
    return subprocess.run([sys.executable, "-m", "ansor.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def _one_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


TUNE = ["tune", "matmul", "--args", "8,8,8", "--trials", "1", "--per-round", "1", "--log", "t.json"]


@pytest.mark.parametrize("name", ["split_feature_huge", "cycle_to_root", "short_leaf_value",
                                  "num_tree_per_iteration_0"])
def test_tune_with_a_hostile_cost_model_exits_2_with_one_line(name, corpus, tmp_path):
    proc = _ansor([*TUNE, "--cost-model", str(corpus[name])], tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])  # was 139, a hang, 134, 136
    line = _one_line(proc)
    assert line.startswith(f"ansor tune: {corpus[name]}: boosters[0]"), line
    why = TEXT_CASES[name][1] if name in TEXT_CASES else None
    assert why is None or re.search(why, line), line
    assert not (tmp_path / "t.json").exists()  # refused before tuning


def test_a_hostile_pretrained_model_stops_tune_and_network_tune(corpus, tmp_path):
    bad = corpus["split_feature_huge"]
    proc = _ansor(TUNE, tmp_path, model=bad)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])  # was 139
    assert _one_line(proc).startswith(f"ansor: pre-trained cost model (ANSOR_PRETRAINED_MODEL): {bad}: "
                                      "boosters[0], Tree=0: split_feature[0] = 1000000000 is not a feature")
    bad = corpus["cycle_to_root"]
    proc = _ansor(["network", "tune", "bert-base-layer", "--seq-len", "4", "--trials", "2",
                   "--per-round", "1", "--rounds", "0", "--log", "n.json"], tmp_path, model=bad)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])  # was a hang
    line = _one_line(proc)
    assert re.match(rf"ansor: pre-trained cost model \(ANSOR_PRETRAINED_MODEL\): {bad}: "
                    r"boosters\[0\], Tree=0: left_child\[0\] = 0 reaches node 0", line), line


def test_costmodel_info_refuses_a_hostile_model_file(corpus, tmp_path):
    bad = corpus["split_feature_huge"]
    proc = _ansor(["costmodel", "info", str(bad)], tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:])  # was 0: info on the trees
    assert _one_line(proc).startswith(f"ansor costmodel info: {bad}: boosters[0], Tree=0: split_feature[0]")


def test_a_missing_pretrained_model_is_one_line(tmp_path):
    proc = _ansor(TUNE, tmp_path, model=tmp_path / "nothing.json")
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert _one_line(proc) == (f"ansor: pre-trained cost model (ANSOR_PRETRAINED_MODEL): "
                               f"{tmp_path / 'nothing.json'}: No such file or directory")


def test_the_shipped_and_freshly_trained_models_pass_unchanged(tmp_path):
    """The checks refuse nothing LightGBM writes: the shipped model's trees are passed on byte for
    byte (same predictions as LightGBM on the original text), and a fresh model, including
    LightGBM's one-leaf trees (equal costs: nothing to split), saves and loads."""
    import lightgbm as lgb

    end = TEXT.index("end of trees")
    assert rebuild_model_text(TEXT, "shipped")[:end] == TEXT[:end]
    rows = np.random.default_rng(1).uniform(0, 30, (400, NUM_FEATURES))
    assert np.array_equal(LGBModel.load(SHIPPED).base_booster.predict(rows, raw_score=True),
                          lgb.Booster(model_str=TEXT).predict(rows, raw_score=True))
    task = ansor.SearchTask(func="matmul", args=(64, 64, 64))
    states = _states(task, 40)
    flat = [MeasureResult((1e-3,), int(MeasureErrorNo.NO_ERROR)) for _ in states]
    for name, results in (("trees", _results(states)), ("one_leaf", flat)):
        m = LGBModel(LGBParams(num_boost_round=5), seed=0)
        m.update([MeasureInput(task, s) for s in states], results)
        m.save(tmp_path / f"{name}.json")
        if name == "one_leaf":
            assert "num_leaves=1\n" in json.loads((tmp_path / "one_leaf.json").read_text())["boosters"][0]
        again = LGBModel.load(tmp_path / f"{name}.json")
        assert np.allclose(again.predict(task, states), m.predict(task, states))


def test_stored_params_lightgbm_cannot_train_with_do_not_stop_tuning(tmp_path, caplog):
    """Valid parameters can still leave LightGBM nothing to split on (here min_data_in_leaf above
    the rows); the tuner's update logs it and keeps the loaded trees instead of an internal error."""
    path = tmp_path / "m.json"
    path.write_text(json.dumps({**DOC, "params": {**_P, "min_data_in_leaf": 10 ** 6, "min_train_samples": 1}}))
    m = LGBModel.load(path)
    task = ansor.SearchTask(func="matmul", args=(64, 64, 64))
    states = _states(task, 20)
    before = m.predict(task, states)
    with caplog.at_level(logging.WARNING, logger="ansor.cost_model"):
        m.update([MeasureInput(task, s) for s in states], _results(states))
    assert m.booster is None and "LightGBM cannot train on these 20 programs" in caplog.text
    assert np.array_equal(m.predict(task, states), before)
