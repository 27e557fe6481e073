"""One ComputeDAG: the class users get as ``ansor.ComputeDAG`` is the compute layer's, and every DAG,
wherever it is made (the compute layer, a record, a JSON description, a network's task extraction),
has the schedule entry points ``init_state`` / ``replay`` / ``lower``.

``compute`` cannot import ``sketch`` (the layering), so the schedule layer registers itself as the
DAG's schedule backend when imported; without it the entry points fail with a clear error.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np

import ansor
import compute
import compute.compute_dag
from compute import loop_ir as L
from compute.compute_dag import ComputeDAG
from ansor.graph import GraphBuilder
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordToFile
from sketch.loop_state import State

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _gemm_tensors(n: int = 16) -> list:
    A = ansor.te.placeholder((n, n), name="A")
    B = ansor.te.placeholder((n, n), name="B")
    k = ansor.te.reduce_axis((0, n), name="k")
    C = ansor.te.compute((n, n), lambda i, j: ansor.te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def _check_schedulable(dag: object) -> None:
    assert type(dag) is ComputeDAG
    s = dag.init_state()  # type: ignore[attr-defined]
    assert isinstance(s, State)
    s2 = s.split("C", 0, [4])
    again = dag.replay(s2.steps)  # type: ignore[attr-defined]
    assert again.steps == s2.steps
    assert isinstance(dag.lower(s2), L.PrimFunc)  # type: ignore[attr-defined]
    assert isinstance(dag.lower(), L.PrimFunc)  # type: ignore[attr-defined]


def test_one_class() -> None:
    assert ansor.ComputeDAG is compute.compute_dag.ComputeDAG
    assert compute.ComputeDAG is ansor.ComputeDAG


def test_dag_from_the_compute_layer_is_schedulable() -> None:
    _check_schedulable(compute.ComputeDAG(_gemm_tensors()))


def test_dag_from_json_is_schedulable() -> None:
    dag = ComputeDAG(_gemm_tensors())
    _check_schedulable(ComputeDAG.from_json(json.loads(json.dumps(dag.to_json()))))


def test_dag_of_a_task_and_of_a_record_is_schedulable(tmp_path) -> None:
    task = ansor.SearchTask(tensors=_gemm_tensors())
    _check_schedulable(task.compute_dag)
    log = tmp_path / "r.json"
    state = task.compute_dag.init_state().split("C", 0, [4])
    RecordToFile(str(log))([MeasureInput(task, state)], [MeasureResult([1e-3], 0, "", 0.1, 0.0)])
    (inp, _), = list(ansor.load_records(log))
    _check_schedulable(inp.task.compute_dag)


def test_dag_of_a_network_task_is_schedulable() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 4))
    w = b.constant(np.ones((3, 3, 4, 4), np.float32), "w")
    tasks, _ = ansor.extract_tasks(b.build(b.relu(b.conv2d(x, w, padding=1))))
    assert tasks
    for t in tasks:
        dag = t.compute_dag
        assert type(dag) is ComputeDAG
        assert isinstance(dag.init_state(), State)


def test_without_the_schedule_layer_the_entry_points_say_what_is_missing() -> None:
    # A fresh process that imports the compute layer alone: building a DAG works, asking it for a
    # schedule names the missing layer instead of failing deep inside.
    code = textwrap.dedent("""
        import sys
        from compute import te
        from compute.compute_dag import ComputeDAG
        A = te.placeholder((4,), name="A")
        B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
        dag = ComputeDAG([A, B])
        assert "sketch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("sketch"))
        print(dag)
        try:
            dag.init_state()
        except RuntimeError as e:
            print("ERR", e)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "B(i) = " in out.stdout
    assert "ERR ComputeDAG.init_state needs the schedule layer" in out.stdout
    assert "import sketch" in out.stdout
