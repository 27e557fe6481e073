"""Hostile record files: names crafted to inject LLVM IR, or to break a reader, must not run code.

A record carries its computation as a serialised DAG whose tensor, axis and op names come from the
file. Before names were validated and kept out of the IR, a reduce-axis name holding a newline
ended an IR comment and added instructions and declarations of its own (here: a libc ``creat`` of
a marker file) to the kernel, which ``ansor records verify`` and ``load_records`` + ``ansor.build``
then compiled and ran. Every entry point that reads a record file is run on a corpus of such
records: each must skip the hostile line with a warning naming the file and line (or work safely),
and the marker file must never appear.

The exploit runs in subprocesses: a successful injection could take the test process with it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ansor
from ansor.cli import main
from ansor.records import RecordWarning, best_record, distill, load_records, summarize
from ansor.search_task import SearchTask
from compute import te
from measure.record import target_summary
from sketch.search_policy import SearchParams

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The DAG of every record below: C[i] = sum_k A[i, k], A of shape (4, 16), names filled in later.
_ROWSUM_BODY = ["red", "sum", ["load", 0, ["ax", 0], ["rax", 0]], [0], None]
# split k by 4, rfactor the inner part, vectorize the rfactored loop: it holds the reduction loop,
# so codegen emits it as a scalar loop and writes the loop's name into a comment.
_STEPS = [["SP", 1, 1, 16, [4], True], ["RF", 1, 2, 0], ["AN", 1, 0, "vectorize"]]


def _benign_rowsum() -> list:
    a = te.placeholder((4, 16), "float32", "A")
    k = te.reduce_axis((0, 16), "k")
    return [a, te.compute((4,), lambda i: te.sum(a[i, k], axis=k), "C")]


def _workload_key() -> str:
    """Names do not enter the workload key, so a renamed DAG has the benign one's key."""
    return ansor.ComputeDAG(_benign_rowsum()).workload_key


def ir_payload(marker: str) -> str:
    """A reduce-axis name that, written raw after a `;` in a function body, ends the comment,
    calls ``creat(marker)``, closes the function, declares what it used and opens a new function
    for the rest of the original body (defining every buffer name the rest may refer to)."""
    path = marker.encode()
    n = len(path) + 1
    allocas = "\n".join(f"  %buf{u}_1 = alloca float, i64 64, align 64" for u in range(8))
    return ("k\n"
            "  %pwn = call i32 @creat(ptr @pwn.path, i32 420)\n"
            "  ret void\n"
            "}\n"
            f'@pwn.path = private constant [{n} x i8] c"{marker}\\00"\n'
            "declare i32 @creat(ptr, i32)\n"
            "define void @pwn.rest(ptr %arg0, ptr %arg1) {\n"
            "entry:\n"
            f"{allocas}\n"
            ";")


def rowsum_record(reduce_name: str = "k", tensor_names: tuple[str, str] = ("A", "C"),
                  axis_name: str = "i", tag: str = "", attrs: dict | None = None,
                  desc: str | None = "C[4](A[4x16])", steps: list | None = None,
                  cost: float = 1e-6) -> str:
    """One record line of the row sum with the given names (and anything else) put in."""
    compute: dict = {"kind": "compute", "shape": [4], "reduce_axes": [[0, 16]],
                     "body": _ROWSUM_BODY, "tag": tag, "axis_names": [axis_name],
                     "reduce_axis_names": [reduce_name], "name": tensor_names[1]}
    if attrs is not None:
        compute["attrs"] = attrs
    dag = {"version": 1, "args": [0, 1],
           "ops": [{"kind": "placeholder", "shape": [4, 16], "dtype": "float32",
                    "name": tensor_names[0]}, compute]}
    task: dict = {"dag": dag}
    if desc is not None:
        task["desc"] = desc
    rec = {"v": 1, "input": {"workload_key": _workload_key(), "task": task, "flop": 64.0,
                             "target": target_summary(), "steps": _STEPS if steps is None else steps},
           "result": {"costs": [cost], "error_no": 0, "error_msg": "", "all_cost": 0.1,
                      "timestamp": 1.0}}
    return json.dumps(rec)


def _run(code: str, cwd: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def exploit_log(tmp_path):
    marker = str(tmp_path / "pwned")
    log = tmp_path / "hostile.json"
    log.write_text(rowsum_record(reduce_name=ir_payload(marker)) + "\n")
    return str(log), marker


def test_verify_does_not_run_code_from_a_record(exploit_log, tmp_path):
    log, marker = exploit_log
    p = _run(f"""
        import sys
        from ansor.cli import main
        sys.exit(main(["records", "verify", {log!r}, "--number", "1", "--repeat", "1"]))
        """, str(tmp_path))
    assert not os.path.exists(marker), "the record's injected IR ran"
    assert f"{log}:1:" in p.stderr, p.stderr + p.stdout
    assert "reduce_axis_names" in p.stderr


def test_load_and_build_does_not_run_code_from_a_record(exploit_log, tmp_path):
    log, marker = exploit_log
    p = _run(f"""
        import warnings
        import numpy as np
        import ansor
        from ansor.records import load_records
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            pairs = list(load_records({log!r}))
        for inp, _ in pairs:
            k = ansor.build(inp.state)
            k(np.ones((4, 16), np.float32), np.zeros(4, np.float32))
        print("LOADED", len(pairs))
        for x in w:
            print("WARN", x.message)
        """, str(tmp_path))
    assert not os.path.exists(marker), "the record's injected IR ran"
    assert p.returncode == 0, p.stderr
    assert "LOADED 0" in p.stdout
    assert f"WARN {log}:1: skipped record" in p.stdout and "reduce_axis_names" in p.stdout


# ---- the corpus: every reader survives every hostile line --------------------------------------

def _corpus(marker: str) -> list[tuple[str, str]]:
    """(record line, the field its warning must name); each would be the best record (1e-7 s)
    of the row sum if it were accepted."""
    fast = 1e-7
    return [
        (rowsum_record(reduce_name=ir_payload(marker), cost=fast), "reduce_axis_names[0]"),
        (rowsum_record(tensor_names=("A\ndeclare void @x()", "C"), cost=fast), "ops[0].name"),
        (rowsum_record(tensor_names=("A", 'C"quoted"'), cost=fast), "ops[1].name"),
        (rowsum_record(axis_name="i@x", cost=fast), "axis_names[0]"),
        (rowsum_record(reduce_name="k!0", cost=fast), "reduce_axis_names[0]"),
        (rowsum_record(reduce_name="{k}", cost=fast), "reduce_axis_names[0]"),
        (rowsum_record(tensor_names=("\u00c4", "C"), cost=fast), "ops[0].name"),
        (rowsum_record(reduce_name="k" * 129, cost=fast), "reduce_axis_names[0]"),
        (rowsum_record(tag="x\ny", cost=fast), "tag"),
        (rowsum_record(attrs={"a b": 1}, cost=fast), "attrs key"),
        (rowsum_record(attrs={"a": ["\n"]}, cost=fast), "attrs"),
        (rowsum_record(desc="\x1b[2J\x1b[31mowned", cost=fast), "desc"),
        (rowsum_record(steps=[["CHW", 1, "local\n@x"]] + _STEPS, cost=fast), "scope_name"),
        (json.dumps({"v": 1, "input": {"workload_key": _workload_key(),
                                       "task": {"workload": "__import__('os').system('true')",
                                                "args": []},
                                       "target": target_summary(), "steps": []},
                     "result": {"costs": [fast], "error_no": 0, "error_msg": "",
                                "all_cost": 0.1, "timestamp": 1.0}}), "workload"),
    ]


@pytest.fixture
def corpus_log(tmp_path):
    """The hostile lines, then one good record (benign names, same schedule) on the last line."""
    marker = str(tmp_path / "pwned")
    corpus = _corpus(marker)
    log = tmp_path / "corpus.json"
    log.write_text("".join(line + "\n" for line, _ in corpus) + rowsum_record() + "\n")
    return str(log), marker, corpus


def _check_warnings(caught, log: str, corpus) -> None:
    text = [str(w.message) for w in caught if issubclass(w.category, RecordWarning)]
    for lineno, (_, field) in enumerate(corpus, 1):
        hits = [t for t in text if t.startswith(f"{log}:{lineno}: skipped record")]
        assert hits and field in hits[0], (lineno, field, text)
    assert not any(t.startswith(f"{log}:{len(corpus) + 1}:") for t in text), text
    assert all("\n" not in t and "\x1b" not in t for t in text), text


def test_corpus_load_records_and_build(corpus_log):
    log, marker, corpus = corpus_log
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = list(load_records(log))
    _check_warnings(caught, log, corpus)
    assert len(pairs) == 1 and pairs[0][1].costs == (1e-6,)
    kern = ansor.build(pairs[0][0].state)
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    out = np.zeros(4, np.float32)
    kern(x, out)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert not os.path.exists(marker)


def test_corpus_apply_best_and_best_record(corpus_log):
    log, marker, corpus = corpus_log
    task = SearchTask(tensors=_benign_rowsum())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = task.apply_best(log)
    _check_warnings(caught, log, corpus)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecordWarning)
        best = best_record(log, task.workload_key)
    assert best is not None and best[1].costs == (1e-6,)
    assert str(state) == str(best[0].state)
    kern = ansor.build(state)
    x = np.ones((4, 16), np.float32)
    out = np.zeros(4, np.float32)
    kern(x, out)
    np.testing.assert_allclose(out, np.full(4, 16.0))
    assert not os.path.exists(marker)


def test_corpus_show_distill_and_summarize(corpus_log, tmp_path, capsys):
    log, marker, corpus = corpus_log
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["records", "show", log]) == 0
        rows = summarize(log)
        out = str(tmp_path / "distilled.json")
        report = distill(log, out)
        assert report.written == 1 and report.unreadable == len(corpus)
    _check_warnings([w for w in caught][: len(corpus)], log, corpus)
    shown = capsys.readouterr().out
    assert "C[4](A[4x16])" in shown and "\x1b" not in shown and "owned" not in shown
    assert [(r.n_records, r.best_cost) for r in rows] == [(1, 1e-6)]
    with open(out) as f:
        assert f.read() == rowsum_record() + "\n"
    assert not os.path.exists(marker)


def test_corpus_cost_model(corpus_log):
    from cost_model.lgbm_model import LGBModel

    log, marker, corpus = corpus_log
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert LGBModel().update_from_file(log) == 1
    _check_warnings(caught, log, corpus)
    assert not os.path.exists(marker)


def test_corpus_verify(corpus_log, capsys):
    log, marker, corpus = corpus_log
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = main(["records", "verify", log, "--number", "1", "--repeat", "1"])
    assert rc == 0
    _check_warnings(caught, log, corpus)
    out = capsys.readouterr().out
    assert "C[4](A[4x16])" in out and "FAILED" not in out
    assert not os.path.exists(marker)


def test_corpus_resume(corpus_log):
    log, marker, corpus = corpus_log
    n_before = len(open(log).readlines())
    task = SearchTask(tensors=_benign_rowsum())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ansor.LocalRunner(timeout=10, number=1, repeat=1, min_repeat_ms=0,
                               warmup_ms=0) as runner:
            res = task.tune(ansor.TuningOptions(
                num_measure_trials=2, num_measures_per_round=2, log_file=log, verbose=0, seed=0,
                runner=runner, search_params=SearchParams(population_size=16, num_generations=1,
                                                          init_min_population=4)))
    _check_warnings(caught, log, corpus)
    assert res.resumed_records == 1  # the good record only
    assert len(open(log).readlines()) > n_before
    assert not os.path.exists(marker)
