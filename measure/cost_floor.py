"""The physical floor of a measured cost: below it a "measurement" is not one.

A record's cost is read from a file, and the lowest cost wins everywhere (best record, resume,
distill, verify, the cost model's targets): a line claiming 1e-300 s would win them all and be
shown as a 300-digit GFLOPS. No CPU runs a kernel faster than its arithmetic and its output
writes allow, so ``cost_floor`` bounds the time of a computation from below by what the fastest
conceivable CPU could do, with a margin:

* arithmetic: ``flop`` operations at ``MAX_CORES`` cores (or this host's, if more) x
  ``OPS_PER_CYCLE`` (two 512-bit FMA units on int8 dot products: 2 x 64 x 2 = 256, four times
  what fp32 allows) x ``MAX_CLOCK_HZ``;
* memory: every output element is written once, at ``STORE_BYTES_PER_CYCLE`` per core per cycle
  (two 64-byte stores);
* any call: one clock cycle.

Each bound is divided by ``MARGIN`` again. The floor is far below anything real (the fastest
record in the published logs runs at 0.52 TFLOPS, 6000x under the bound for 512 cores) and is
independent of the machine that measured the record, which a record does not name in cores.
"""
from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Sequence

from compute import dtype as dt
from compute.tensor import ComputeOp

from .target import logical_cpus

if TYPE_CHECKING:
    from compute.compute_dag import ComputeDAG

MAX_CORES = 512          # two sockets of today's largest CPUs hold 384
OPS_PER_CYCLE = 256      # per core: 2 FMA units x 64 int8 lanes x 2 operations
STORE_BYTES_PER_CYCLE = 128
MAX_CLOCK_HZ = 6.5e9
MARGIN = 4.0


def _cores() -> int:
    return max(MAX_CORES, logical_cpus())


def cost_floor(flop: float | None, out_bytes: float | None = None) -> float:
    """The least time (seconds) any CPU could take for a computation of ``flop`` operations that
    writes ``out_bytes`` of output (either unknown: None); see the module docstring."""
    cycles = 1.0
    cores = _cores()
    if flop is not None and math.isfinite(flop) and flop > 0:
        cycles = max(cycles, flop / (cores * OPS_PER_CYCLE))
    if out_bytes is not None and math.isfinite(out_bytes) and out_bytes > 0:
        cycles = max(cycles, out_bytes / (cores * STORE_BYTES_PER_CYCLE))
    return cycles / MAX_CLOCK_HZ / MARGIN


def implausible_cost(costs: Sequence[float], flop: float | None,
                     out_bytes: float | None = None) -> str | None:
    """Why one of a successful measurement's ``costs`` cannot be real (below ``cost_floor``),
    or None. The message names the cost, the floor and what the floor comes from."""
    floor = cost_floor(flop, out_bytes)
    for i, c in enumerate(costs):
        if c < floor:
            what = [f"{flop:.4g} operations" if flop else "",
                    f"{out_bytes:.4g} bytes of output" if out_bytes else ""]
            basis = " and ".join(w for w in what if w) or "one clock cycle"
            return (f"result.costs[{i}] is {c:.3g} s, below the physical floor of {floor:.3g} s "
                    f"for {basis} on any CPU: not a measurement")
    return None


# (flop, output bytes) per DAG, computed once: readers check every record line against its DAG.
_BASIS: "weakref.WeakKeyDictionary[ComputeDAG, tuple[float, float]]" = weakref.WeakKeyDictionary()


def dag_cost_floor(dag: "ComputeDAG") -> tuple[float, float]:
    """``(flop, out_bytes)`` of a computation, for ``cost_floor``: its operation count and the
    bytes of its outputs (the arguments that are computed). Cached per DAG."""
    basis = _BASIS.get(dag)
    if basis is None:
        out = sum(dt.nbytes(t.dtype) * math.prod(int(n) for n in t.shape)
                  for t in dag.tensors if isinstance(t.op, ComputeOp))
        basis = _BASIS[dag] = (float(dag.flop_count), float(out))
    return basis


def implausible_for_dag(costs: Sequence[float], dag: "ComputeDAG") -> str | None:
    """``implausible_cost`` of a successful measurement of ``dag`` (its own flops and output)."""
    return implausible_cost(costs, *dag_cost_floor(dag))
