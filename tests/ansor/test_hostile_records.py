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
