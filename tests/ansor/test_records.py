"""Tuning records end to end: SearchTask, load/best/distill/apply_best, and ``ansor records``.

Records written here hold random valid schedules of several workloads (registered library ones,
a user-registered one and a tensors-based one that carries its DAG); loading must give back the
same states and results, skip every kind of bad line with a warning naming it, never execute
anything from the file, and find the best schedule such that it builds and computes correctly.
"""
from __future__ import annotations

import builtins
import json
import os
import pickle
import random
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ansor
from ansor.cli import main
from ansor.records import (NoRecordError, RecordToFile, RecordWarning, best_record, distill,
                           load_records, summarize, verify_best)
from ansor.search_task import SearchTask
from compute import reference, te
from compute.ops import workloads as W
from compute.workload_registry import register_workload
from measure.measure import MAX_FLOAT, MeasureErrorNo, MeasureInput, MeasureResult
from measure.record import encode_record
from measure.target import toolchain_key
from tests.sketch.random_schedules import BASE_STEP_KINDS, random_state
from tests.util import assert_matches_reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _scaled_softmax(M: int, N: int) -> list:
    a = te.placeholder((M, N), "float32", "X")
    s = te.compute((M, N), lambda i, j: a[i, j] * 0.5, "S")
    k = te.reduce_axis((0, N), "k")
    mx = te.compute((M,), lambda i: te.max(s[i, k], axis=k), "mx")
    return [a, te.compute((M, N), lambda i, j: te.exp(s[i, j] - mx[i]), "E")]


register_workload(_scaled_softmax, "test_records_scaled_softmax")


def _custom_tensors() -> list:
    """A computation that is not a registered workload: its records must carry the DAG."""
    a = te.placeholder((6, 10), "float32", "P")
    b = te.placeholder((10,), "float32", "Q")
    k = te.reduce_axis((0, 10), "k")
    return [a, b, te.compute((6,), lambda i: te.sum(a[i, k] * b[k] + 1.0, axis=k), "R")]


@pytest.fixture(scope="module")
def tasks() -> list[SearchTask]:
    return [SearchTask(func="matmul", args=(17, 7, 9)),
            SearchTask(func=W.conv2d_bias_relu, args=(1, 7, 7, 3, 4, 3, 3, 1, 1)),
            SearchTask(func=_scaled_softmax, args=[5, 9]),
            SearchTask(tensors=_custom_tensors(), desc="custom reduce")]


def _random_records(tasks, n_per_task: int, seed: int = 0):
    rng = random.Random(seed)
    inputs, results = [], []
    for task in tasks:
        for k in range(n_per_task):
            state = random_state(task.compute_dag.init_state(), rng, rng.randint(0, 12), BASE_STEP_KINDS)
            if rng.random() < 0.2:
                res = MeasureResult((MAX_FLOAT,), MeasureErrorNo.COMPILE_HOST, "llvm said no",
                                    0.3, 1.7e9 + k)
            else:
                res = MeasureResult(tuple(rng.uniform(1e-5, 1e-3) for _ in range(3)), 0, "",
                                    rng.uniform(0.1, 2), 1.7e9 + k)
            inputs.append(MeasureInput(task, state))
            results.append(res)
    return inputs, results


@pytest.fixture(scope="module")
def log(tmp_path_factory, tasks):
    path = tmp_path_factory.mktemp("records") / "log.json"
    inputs, results = _random_records(tasks, 12)
    cb = RecordToFile(path)
    for k in range(0, len(inputs), 10):
        cb(inputs[k:k + 10], results[k:k + 10])
    return path, inputs, results


# ---- SearchTask ------------------------------------------------------------------------------

def test_search_task_from_function_name_and_tensors():
    a = SearchTask(func=W.matmul, args=(17, 7, 9))
    b = SearchTask(func="matmul", args=[17, 7, 9])
    c = SearchTask(tensors=W.matmul(17, 7, 9))
    assert a.workload_key == b.workload_key == c.workload_key == a.compute_dag.workload_key
    assert isinstance(a.compute_dag, ansor.ComputeDAG)
    assert a.desc == "matmul(17, 7, 9)" and a.args == (17, 7, 9)
    assert a.flop_count == 2 * 17 * 7 * 9
    assert c.desc == "matmul[17x7](A[17x9], B[9x7])"
    assert SearchTask(func="add", args=[[7, 17], [17]]).desc == "add((7, 17), (17,))"
    assert SearchTask(tensors=ansor.ComputeDAG(W.relu(3, 4)), desc="mine").desc == "mine"
    assert "matmul(17, 7, 9)" in repr(a)


def test_search_task_errors():
    with pytest.raises(ValueError, match="either func"):
        SearchTask()
    with pytest.raises(ValueError, match="not both"):
        SearchTask(func="matmul", args=(1, 2, 3), tensors=_custom_tensors())
    with pytest.raises(ValueError, match="not registered"):
        SearchTask(func=_custom_tensors)
    with pytest.raises(KeyError, match="no workload is registered as 'nope'"):
        SearchTask(func="nope", args=(1,))
    with pytest.raises(TypeError, match="signature"):
        SearchTask(func="matmul", args=(1, 2))
    with pytest.raises(TypeError, match="ints, floats"):
        SearchTask(func="matmul", args=(1, 2, object()))
    with pytest.raises(ValueError, match="takes no args"):
        SearchTask(tensors=_custom_tensors(), args=(1,))


def test_search_task_json_round_trip(tasks):
    for task in tasks:
        d = json.loads(json.dumps(task.to_json()))
        back = SearchTask.from_json(d)
        assert back.workload_key == task.workload_key and back.desc == task.desc
    assert tasks[0].to_json() == {"workload": "matmul", "args": [17, 7, 9]}
    assert set(tasks[3].to_json()) == {"dag", "desc"}
    with pytest.raises(ValueError, match="neither"):
        SearchTask.from_json({"something": 1})


# ---- load_records --------------------------------------------------------------------------------

def test_round_trip_of_random_valid_states(log, tasks):
    path, inputs, results = log
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = list(load_records(path))
    assert len(loaded) == len(inputs)
    for (inp, res), want_inp, want_res in zip(loaded, inputs, results):
        assert inp.state.canonical_key() == want_inp.state.canonical_key()
        assert inp.task.workload_key == want_inp.task.workload_key
        assert inp.task.desc == want_inp.task.desc
        assert inp.state.dag is inp.task.compute_dag
        assert str(inp.state) == str(want_inp.state)
        assert res == want_res
    # Thousands of records share a task: it is rebuilt once per workload.
    assert len({id(inp.task) for inp, _ in loaded}) == len(tasks)


def test_records_are_self_contained_in_a_fresh_process(log):
    """A new interpreter that registers nothing but the library (and the one user workload the
    log names) recreates every schedule, the tensors-based one from its serialised DAG."""
    path, inputs, _ = log
    script = textwrap.dedent("""
        import sys, warnings
        warnings.simplefilter("error")
        from compute.workload_registry import register_workload
        from tests.ansor.test_records import _scaled_softmax  # registers the user workload
        from ansor.records import load_records
        for inp, res in load_records(sys.argv[1]):
            print(inp.state.canonical_key())
    """)
    out = subprocess.run([sys.executable, "-c", script, str(path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [i.state.canonical_key() for i in inputs]


def _good_line(task, state, cost=1e-3) -> str:
    return encode_record(MeasureInput(task, state), MeasureResult((cost,), 0, "", 0.1, 5.0))


def _write(path, lines, newline_at_end=True):
    with open(path, "w") as f:
        f.write("\n".join(lines) + ("\n" if newline_at_end else ""))


def test_bad_lines_are_skipped_with_warnings_naming_them(tmp_path, tasks):
    t = tasks[0]
    s = t.compute_dag.init_state().split("matmul", "j", [7])
    good = _good_line(t, s)
    obj = json.loads(good)
    unknown_tag = dict(obj, input=dict(obj["input"], steps=[["QQ", 2, 0]]))
    no_replay = dict(obj, input=dict(obj["input"], steps=[["SP", 9, 0, 17, [4], True]]))
    unregistered = dict(obj, input=dict(obj["input"], task={"workload": "not_here", "args": [1]}))
    wrong_key = dict(obj, input=dict(obj["input"], workload_key="0" * 32))
    path = tmp_path / "log.json"
    _write(path, [good, "{corrupt", json.dumps(unknown_tag), good, json.dumps(no_replay),
                  "\x00\x00\x00", json.dumps(unregistered), json.dumps(unregistered),
                  json.dumps(wrong_key), good, good[:100]], newline_at_end=False)
    with pytest.warns(RecordWarning) as caught:
        loaded = list(load_records(path))
    assert len(loaded) == 3 and all(i.state.canonical_key() == s.canonical_key() for i, _ in loaded)
    msgs = [str(w.message) for w in caught]
    expect = {2: "not JSON", 3: "unknown step", 5: "do not replay", 6: "not JSON",
              7: "'not_here'", 9: "definition changed", 11: "truncated last line"}
    for lineno, what in expect.items():
        assert any(m.startswith(f"{path}:{lineno}: ") and what in m for m in msgs), (lineno, msgs)
    # The second record of the unregistered workload is skipped without a second warning.
    assert not any(m.startswith(f"{path}:8: ") for m in msgs)
    assert any("1 more record line(s) skipped" in m for m in msgs)


def test_loading_never_executes_code_from_the_file(tmp_path, tasks, monkeypatch):
    t = tasks[0]
    good = _good_line(t, t.compute_dag.init_state())
    obj = json.loads(good)
    marker = tmp_path / "pwned"
    code = f"__import__('os').system('touch {marker}')"
    payload = pickle.dumps(os.system)
    evil = [
        dict(obj, input=dict(obj["input"], task={"workload": code, "args": [code]})),
        dict(obj, input=dict(obj["input"], task={"workload": "matmul", "args": [code, 7, 9]})),
        dict(obj, input=dict(obj["input"], task={"dag": code, "desc": code})),
        dict(obj, input=dict(obj["input"], task={"dag": {"version": 1, "ops": [
            {"kind": "compute", "shape": [2], "reduce_axes": [], "tag": "",
             "body": ["call", code, ["c", "float32", 1.0]], "axis_names": [code]}], "args": [0]}})),
        dict(obj, input=dict(obj["input"], steps=[["PR", 2, 0, code], ["CHW", 2, code]])),
        dict(obj, result=dict(obj["result"], error_msg=code)),
        dict(obj, input=dict(obj["input"], task={"__reduce__": payload.hex()})),
    ]
    path = tmp_path / "log.json"
    with open(path, "wb") as f:
        for e in evil:
            f.write(json.dumps(e).encode() + b"\n")
        f.write(payload + b"\n")
        f.write(good.encode() + b"\n")
    with warnings.catch_warnings():  # warm up: the loader's modules are imported before the trap
        warnings.simplefilter("ignore")
        list(load_records(path))

    def forbidden(*a, **k):
        raise AssertionError("the loader tried to execute code")

    for mod, name in [(builtins, "eval"), (builtins, "exec"), (builtins, "compile"),
                      (pickle, "loads"), (pickle, "load"), (os, "system")]:
        monkeypatch.setattr(mod, name, forbidden)
    with pytest.warns(RecordWarning):
        loaded = list(load_records(path))
    monkeypatch.undo()
    assert not marker.exists()
    # The error message with code in it is data: that record (steps valid) loads, as does `good`.
    assert [r.error_msg for _, r in loaded] == [code, ""]


# ---- best_record / apply_best -------------------------------------------------------------------

def test_best_record_is_the_minimum_valid_mean_cost(log, tasks):
    path, inputs, results = log
    for task in tasks:
        cands = [(r.mean_cost, k) for k, (i, r) in enumerate(zip(inputs, results))
                 if i.task is task and r.ok]
        want_cost, want_k = min(cands)
        inp, res = best_record(path, task)
        assert res == results[want_k] and inp.task is task
        assert inp.state.canonical_key() == inputs[want_k].state.canonical_key()
        by_key = best_record(path, task.workload_key)
        assert by_key[1] == res and by_key[0].task.desc == task.desc
    assert best_record(path, "f" * 32) is None
    assert best_record(path, tasks[0], target_key="another-machine") is None
    assert best_record(path, tasks[0], target_key=toolchain_key()) is not None


def test_best_record_ignores_failures_and_prefers_the_earliest_tie(tmp_path, tasks):
    t = tasks[0]
    s0 = t.compute_dag.init_state()
    s1, s2 = s0.split("matmul", "i", [2]), s0.split("matmul", "i", [3])
    cb = RecordToFile(tmp_path / "log.json")
    cb([MeasureInput(t, s0), MeasureInput(t, s1), MeasureInput(t, s2), MeasureInput(t, s0)],
       [MeasureResult((1e-9,), MeasureErrorNo.RUN_TIMEOUT, "slow"),
        MeasureResult((2e-3, 5e-3), 0), MeasureResult((3e-3,), 0), MeasureResult((), 0)])
    inp, res = best_record(tmp_path / "log.json", t)
    assert inp.state.canonical_key() == s2.canonical_key()
    cb([MeasureInput(t, s1)], [MeasureResult((3e-3,), 0)])
    assert best_record(tmp_path / "log.json", t)[0].state.canonical_key() == s2.canonical_key()


def test_apply_best_returns_a_state_that_builds_and_is_correct(log, tasks):
    path, inputs, results = log
    for task in (tasks[1], tasks[3]):
        state = task.apply_best(path)
        _, want = min((r.mean_cost, k) for k, (i, r) in enumerate(zip(inputs, results))
                      if i.task is task and r.ok)
        assert state.canonical_key() == inputs[want].state.canonical_key()
        assert str(state) == str(inputs[want].state)
        assert state.dag is task.compute_dag
        kernel = ansor.build(state)
        arrays = reference.random_inputs(task.compute_dag, seed=1)
        assert_matches_reference(kernel, task.compute_dag, arrays, rtol=1e-3, atol=1e-4)


def test_apply_best_without_a_record_explains_what_the_log_holds(log, tmp_path, tasks):
    path, _, _ = log
    with pytest.raises(NoRecordError, match=r"no valid record of matmul\(17, 7, 8\).*same "
                                            r"workload with other arguments: matmul\(17, 7, 9\)"):
        SearchTask(func="matmul", args=(17, 7, 8)).apply_best(path)
    with pytest.raises(NoRecordError,
                       match=r"relu\(3, 4\).*48 record\(s\) of other workloads: matmul"):
        SearchTask(func="relu", args=(3, 4)).apply_best(path)
    t = tasks[0]
    RecordToFile(tmp_path / "bad.json")([MeasureInput(t, t.compute_dag.init_state())],
                                        [MeasureResult((MAX_FLOAT,), MeasureErrorNo.WRONG_ANSWER)])
    with pytest.raises(NoRecordError, match="all 1 record.*WRONG_ANSWER x1"):
        t.apply_best(tmp_path / "bad.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(LookupError, match="holds no records"):
        t.apply_best(tmp_path / "empty.json")
    with pytest.raises(FileNotFoundError):
        t.apply_best(tmp_path / "missing.json")


# ---- distill / summarize ------------------------------------------------------------------------

def _by_workload(path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for inp, res in load_records(path):
        out.setdefault(inp.task.desc, []).append(res.mean_cost)
    return out


@pytest.mark.parametrize("top_k", [1, 3, 100])
def test_distill_keeps_the_best_k_valid_per_workload(log, tmp_path, tasks, top_k):
    path, inputs, results = log
    out = tmp_path / "best.json"
    n = distill(path, out, top_k=top_k).written
    got = _by_workload(out)
    assert n == sum(len(v) for v in got.values())
    assert list(got) == [t.desc for t in tasks]  # order of first appearance
    for task in tasks:
        # per schedule, its costs in log order; the best top_k schedules by median, all lines
        pools: dict[str, list[float]] = {}
        for i, r in zip(inputs, results):
            if i.task is task and r.ok:
                pools.setdefault(i.state.canonical_key(), []).append(r.mean_cost)
        ranked = sorted(pools.values(), key=lambda c: float(np.median(c)))  # stable: log order on ties
        assert got[task.desc] == [c for costs in ranked[:top_k] for c in costs]
    # Deterministic output, and distilling again changes nothing.
    distill(path, tmp_path / "again.json", top_k=top_k)
    distill(out, tmp_path / "twice.json", top_k=top_k)
    assert out.read_bytes() == (tmp_path / "again.json").read_bytes() == \
        (tmp_path / "twice.json").read_bytes()


def test_distill_in_place_and_argument_checks(log, tmp_path):
    path, _, _ = log
    copy = tmp_path / "copy.json"
    copy.write_bytes(path.read_bytes())
    assert distill(copy, in_place=True).written == 4
    assert len(copy.read_text().splitlines()) == 4
    # No temporary left behind; the original is kept.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.json", "copy.json.bak"]
    with pytest.raises(ValueError, match="positive integer"):
        distill(path, tmp_path / "x.json", top_k=0)


def test_summarize(log, tasks):
    path, inputs, results = log
    rows = summarize(path)
    assert [r.desc for r in rows] == [t.desc for t in tasks]
    for row, task in zip(rows, tasks):
        mine = [r for i, r in zip(inputs, results) if i.task is task]
        assert row.n_records == len(mine) and row.n_valid == sum(r.ok for r in mine)
        assert row.best_cost == min(r.mean_cost for r in mine)
        assert row.gflops == pytest.approx(task.flop_count / row.best_cost / 1e9)
        assert row.n_targets == 1


# ---- CLI -----------------------------------------------------------------------------------------

def test_cli_show(log, capsys, tasks):
    path, _, _ = log
    assert main(["records", "show", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: 4 workload(s), 48 record(s)"
    assert out[1].split() == ["workload", "records", "valid", "best", "ms", "GFLOPS"]
    rows = summarize(path)
    for line, row in zip(out[2:], rows):
        assert line.startswith(row.desc)
        assert line.split()[-4:-2] == [str(row.n_records), str(row.n_valid)]
        assert f"{row.best_cost * 1e3:.4f}" in line


def test_cli_distill(log, tmp_path, capsys):
    path, _, _ = log
    out = tmp_path / "d.json"
    assert main(["records", "distill", str(path), "-o", str(out), "--top-k", "2"]) == 0
    assert "wrote 8 record(s)" in capsys.readouterr().out
    assert len(list(load_records(out))) == 8


def test_cli_errors(tmp_path, capsys):
    assert main(["records", "show", str(tmp_path / "missing.json")]) == 2
    assert "no record file" in capsys.readouterr().err
    assert main(["records"]) == 2
    with pytest.raises(SystemExit):
        main(["records", "distill", str(tmp_path / "x.json")])  # -o is required


def test_cli_distill_and_verify_argument_errors(log, tmp_path, capsys):
    path, _, _ = log
    with pytest.raises(SystemExit) as info:  # argparse's usage error, as for any bad argument
        main(["records", "distill", str(path), "-o", str(tmp_path / "d.json"), "--top-k", "0"])
    assert info.value.code == 2
    assert "argument --top-k: must be an integer >= 1" in capsys.readouterr().err
    assert main(["records", "verify", str(path), "--import", "no_such_module_xyz"]) == 2
    assert "no_such_module_xyz" in capsys.readouterr().err


def test_cli_verify_reports_records_it_cannot_rebuild(tmp_path, capsys, tasks):
    t = tasks[0]
    obj = json.loads(_good_line(t, t.compute_dag.init_state()))
    obj["input"]["task"] = {"workload": "registered_elsewhere", "args": [3]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(obj) + "\n")
    with pytest.warns(RecordWarning, match="'registered_elsewhere' is not registered"):
        assert main(["records", "verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "registered_elsewhere(3)" in out and "FAILED" in out and "cannot rebuild" in out


def test_cli_verify_remeasures_in_a_fresh_process(tmp_path, capsys, tasks):
    t = tasks[0]
    state = t.compute_dag.init_state().split("matmul", "j", [7]).vectorize("matmul", "j.1")
    path = tmp_path / "log.json"
    custom = tasks[3]
    RecordToFile(path)(
        [MeasureInput(t, state), MeasureInput(custom, custom.compute_dag.init_state())],
        [MeasureResult((2e-6,), 0), MeasureResult((1e-6,), 0)])
    assert main(["records", "verify", str(path), "--number", "2", "--repeat", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["workload", "recorded", "re-measured", "ratio"]
    assert out[1].startswith("matmul(17, 7, 9)") and out[1].endswith("x")
    assert out[2].startswith("custom reduce") and "FAILED" not in out[2]
    rows = verify_best(path, number=1, repeat=1, min_repeat_ms=1)
    assert all(r.measured is not None and r.measured > 0 and r.ratio > 0 for r in rows)
