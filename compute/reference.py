"""The numpy reference evaluator: the oracle every compiled schedule is checked against.

Each compute is evaluated once over a broadcast grid (one numpy dimension per spatial axis, then one
per reduce axis), and the reduce dimensions are then folded away. To bound memory the grid is cut
into chunks of at most ``CHUNK_ELEMS`` points, first along the outermost reduce axes, then along the
outermost spatial axes.

Arithmetic follows the C-like machine semantics of the LLVM backend: every operation rounds in its
expression's dtype, integers wrap, float->int casts truncate. Two places deliberately deviate to be
*more* accurate than the code under test: math intrinsics are computed in float64 and rounded once,
and float32 sums accumulate in float64. The oracle must not share the errors of what it checks.

Padding computes read out of bounds in the branch a select does not take. Every load is therefore
done with clipped indices and carries a boolean "out of bounds" mask; selects and reduction `where`
clauses drop the masks of the positions they discard, and a mask that reaches a stored value is an
``IndexError``: the user's index expression is wrong.

This module is the public oracle over whole DAGs, with checked inputs; the evaluation engine, one
compute at a time, is ``compute.evaluator``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .compute_dag import ComputeDAG
from .evaluator import CHUNK_ELEMS, erf, evaluate_ops, random_arrays
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor

__all__ = ["CHUNK_ELEMS", "erf", "evaluate", "evaluate_all", "random_inputs"]  # erf: the engine's

# ---- public API ---------------------------------------------------------------------------------


def evaluate(dag_or_tensors: ComputeDAG | Sequence[Tensor], inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray],
             chunk_elems: int | None = None) -> list[np.ndarray]:
    """Values of the compute tensors among the DAG's arguments, in argument order."""
    dag = _as_dag(dag_or_tensors)
    values = evaluate_all(dag, inputs, chunk_elems)
    return [values[t.op] for t in dag.tensors if isinstance(t.op, ComputeOp)]


def evaluate_all(dag: ComputeDAG | Sequence[Tensor], inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray],
                 chunk_elems: int | None = None) -> dict[Operation, np.ndarray]:
    """The value of every operation of the DAG (placeholders map to their validated inputs)."""
    dag = _as_dag(dag)
    values: dict[Operation, np.ndarray] = dict(_check_inputs(dag, inputs))
    limit = CHUNK_ELEMS if chunk_elems is None else max(1, int(chunk_elems))
    return evaluate_ops(dag.ops, values, limit)


def random_inputs(dag: ComputeDAG | Sequence[Tensor], seed: int = 0) -> list[np.ndarray]:
    """Random arrays for the placeholder arguments, in argument order.

    Floats are uniform in [-1, 1); integers are small so that sums and products of a few of them
    neither overflow nor hide index bugs behind repeated values.
    """
    return random_arrays(_as_dag(dag).tensors, seed)


# ---- inputs -------------------------------------------------------------------------------------

def _as_dag(d: ComputeDAG | Sequence[Tensor] | Tensor) -> ComputeDAG:
    return d if isinstance(d, ComputeDAG) else ComputeDAG(d)  # type: ignore[arg-type]


def _check_inputs(dag: ComputeDAG, inputs: object) -> dict[Operation, np.ndarray]:
    phs = [t for t in dag.tensors if isinstance(t.op, PlaceholderOp)]
    if isinstance(inputs, Mapping):
        by_name: dict[str, Tensor] = {}
        for t in phs:
            if t.name in by_name:
                raise ValueError(f"two input placeholders are named {t.name!r}; pass the inputs as a "
                                 "list in argument order instead of a dict")
            by_name[t.name] = t
        unknown = [k for k in inputs if k not in by_name]
        if unknown:
            raise ValueError(f"unknown input name(s) {unknown}; the inputs are {list(by_name)}")
        missing = [n for n in by_name if n not in inputs]
        if missing:
            raise ValueError(f"missing input(s) {missing}; the inputs are {list(by_name)}")
        arrays = [inputs[t.name] for t in phs]
    else:
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
            raise TypeError(f"inputs must be a list of arrays (one per input placeholder: "
                            f"{[t.name for t in phs]}) or a dict name -> array, got {type(inputs).__name__}")
        arrays = list(inputs)
        if len(arrays) != len(phs):
            raise ValueError(f"expected {len(phs)} input array(s) for {[t.name for t in phs]}, "
                             f"got {len(arrays)}")
    out: dict[Operation, np.ndarray] = {}
    for t, a in zip(phs, arrays):
        arr = a if isinstance(a, np.ndarray) else np.asarray(a)
        if arr.dtype != np.dtype(t.dtype):
            raise TypeError(f"input {t.name!r} is a {t.dtype} placeholder but got a {arr.dtype} array; "
                            f"convert it explicitly (e.g. .astype(np.{t.dtype}))")
        if tuple(arr.shape) != tuple(t.shape):
            raise ValueError(f"input {t.name!r} has shape {list(t.shape)} but got an array of shape "
                             f"{list(arr.shape)}")
        out[t.op] = arr
    return out
