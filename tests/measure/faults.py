"""Misbehaving candidates and worker jobs for the measurement tests.

Everything here must be importable in a fresh worker interpreter (jobs and build functions travel
by reference), so it lives in a module rather than in the test files. Faulty candidates are real
programs: the crash is compiled code dereferencing a wild address, the hang is a loop nest of 2^60
iterations, the wrong answer is a float->int32 cast out of range (the backend saturates, the
reference follows x86 and gives INT_MIN). Only the compile failure and the build hang need a
``build_func`` hook, keyed on the name of the DAG's compute.
"""
from __future__ import annotations

import os
import resource
import signal
import time
import types
from typing import Any

import ansor
from ansor import te
from measure.builder import default_build_func
from measure.measure import MeasureInput

# ---- tasks --------------------------------------------------------------------------------------


def task(dag: ansor.ComputeDAG) -> types.SimpleNamespace:
    return types.SimpleNamespace(compute_dag=dag, workload_key=dag.workload_key)


def initial(dag: ansor.ComputeDAG) -> MeasureInput:
    return MeasureInput(task(dag), dag.init_state())


def add_dag(n: int = 64, name: str = "C") -> ansor.ComputeDAG:
    """C = A + B on n floats. Different ``n`` give different workload keys (names do not count)."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    return ansor.ComputeDAG([A, B, te.compute((n,), lambda i: A[i] + B[i], name=name)])


def gemm_dag(n: int = 64) -> ansor.ComputeDAG:
    from compute.ops import workloads as W

    return ansor.ComputeDAG(W.matmul(n, n, n))


def gemm_tiled(n: int = 64, ti: int = 8, tj: int = 16):
    """A reasonable GEMM schedule: tiles, parallel outer loop, vectorised inner loop."""
    dag = gemm_dag(n)
    s = dag.init_state().cache_write("matmul")
    CL, C = "matmul.local", "matmul"
    s = s.split(C, "i", [ti]).split(C, "j", [tj]).reorder(C, ["i.0", "j.0", "i.1", "j.1"])
    s = s.fuse(C, ["i.0", "j.0"]).parallel(C, 0)
    s = s.compute_at(CL, C, 0)
    s = s.vectorize(C, "j.1")
    s = s.reorder(CL, ["k", "i", "j"]).vectorize(CL, "j")
    return dag, s


def segfault_dag(n: int = 32) -> ansor.ComputeDAG:
    """Reads A at a data-dependent index terabytes past its end: the compiled code faults."""
    A = te.placeholder((n,), name="A")
    X = te.placeholder((n,), name="X", dtype="int32")
    far = te.compute((n,), lambda i: A[(te.cast(X[i], "int64") + 9) * 1000000000000], name="wild")
    return ansor.ComputeDAG([A, X, far])


def forever_dag() -> ansor.ComputeDAG:
    """A sum over 2^30 x 2^30 terms: runs for years."""
    A = te.placeholder((4,), name="A")
    k1 = te.reduce_axis((0, 1 << 30), name="k1")
    k2 = te.reduce_axis((0, 1 << 30), name="k2")
    return ansor.ComputeDAG([A, te.compute((1,), lambda i: te.sum(A[(k1 + k2) % 4], axis=[k1, k2]),
                                           name="forever")])


def wrong_answer_dag(n: int = 48) -> ansor.ComputeDAG:
    """int32(A * 1e10) for A in [-1, 1): out of int32 range, where backend and reference differ."""
    A = te.placeholder((n,), name="A")
    return ansor.ComputeDAG([A, te.compute((n,), lambda i: te.cast(A[i] * 1e10, "int32"), name="cast")])


def nested_parallel(n: int = 64) -> MeasureInput:
    """A state whose steps apply but that does not lower: a parallel loop of the accumulator stage
    inside the output's parallel loop."""
    dag, s = gemm_tiled(n)
    s = s.parallel("matmul.local", "i")
    return MeasureInput(task(dag), s)


# ---- build functions (``"tests.measure.faults:<name>"``) ---------------------------------------

def _has_compute(state: Any, name: str) -> bool:
    return any(op.name == name for op in state.dag.ops)


def faulty_build(state: Any, name: str) -> Any:
    """The default build, except for DAGs with a compute named ``compile_fails`` (raises, as a
    code generator bug would), ``build_hangs`` (sleeps far past any builder timeout) or
    ``build_crashes`` (the compiler process dies)."""
    if _has_compute(state, "compile_fails"):
        raise RuntimeError("injected code generation failure")
    if _has_compute(state, "build_hangs"):
        time.sleep(3600)
    if _has_compute(state, "build_crashes"):
        crash()
    return default_build_func(state, name)


# ---- worker pool jobs ---------------------------------------------------------------------------

def square(x: int) -> int:
    return x * x


def sleep_then(seconds: float, value: Any) -> Any:
    time.sleep(seconds)
    return value


def fail(message: str) -> None:
    raise ValueError(message)


def crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def worker_facts() -> dict:
    return {"pid": os.getpid(), "sigint_ignored": signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
            "rlimit_as": resource.getrlimit(resource.RLIMIT_AS)}


def allocate(nbytes: int) -> int:
    return len(bytearray(nbytes))


def failing_initializer() -> None:
    raise RuntimeError("initializer refuses")


def unpicklable() -> Any:
    return lambda: None


def slow_initializer() -> None:
    time.sleep(0.5)


def thread_count() -> int:
    from measure import runtime

    return runtime.num_threads()


def crash_or_square(x: int, do_crash: bool) -> int:
    if do_crash:
        crash()
    return x * x
