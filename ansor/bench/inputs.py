"""What every system of the suite is given and checked against: the workload's parameters
(defaults filled in), its DAG, the same random inputs for every system, and the output check
against the numpy reference.
"""
from __future__ import annotations

import inspect
from typing import Any, Sequence

import numpy as np

from compute.compute_dag import ComputeDAG
from compute.reference import random_inputs
from compute.tensor import ComputeOp
from compute.workload_registry import get_workload_func, make_workload
from measure.buffers import aligned_copy, aligned_zeros

INPUT_SEED = 0


def bound_args(workload: str, args: Sequence[Any]) -> dict:
    """The workload function's parameters for ``args``, defaults filled in (for the peers)."""
    sig = inspect.signature(get_workload_func(workload))
    ba = sig.bind(*args)
    ba.apply_defaults()
    return dict(ba.arguments)


def make_dag(workload: str, args: Sequence[Any]) -> ComputeDAG:
    return ComputeDAG(make_workload(workload, tuple(args)))


def make_inputs(dag: ComputeDAG) -> list:
    """The same random inputs for every system (uniform in [-1, 1), fixed seed)."""
    return random_inputs(dag, seed=INPUT_SEED)


def kernel_arrays(dag: ComputeDAG) -> list:
    """A kernel's arguments in ``dag.tensors`` order: the random inputs, zeroed outputs (the
    last is the workload's output), each on a 64-byte boundary as the tuner measures them and a
    compiled network allocates them: a timing does not depend on where this process's allocator
    happened to put them (numpy guarantees 16 bytes)."""
    inputs = iter(make_inputs(dag))
    return [aligned_zeros(t.shape, t.dtype) if isinstance(t.op, ComputeOp) else aligned_copy(next(inputs))
            for t in dag.tensors]


def check_output(out: Any, ref: np.ndarray) -> str | None:
    """None if ``out`` matches the reference, else what is wrong."""
    out = np.asarray(out)
    if tuple(out.shape) != tuple(ref.shape):
        return f"wrong result: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
    if not np.allclose(out, ref, rtol=1e-3, atol=1e-3 * scale):
        err = float(np.max(np.abs(out.astype("float64") - ref)))
        return f"wrong result: max abs error {err:.3g} (reference max {scale:.3g})"
    return None
