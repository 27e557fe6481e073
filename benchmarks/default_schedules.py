"""Build time and run time of every library workload under the *default* schedule, as JSON.

This is the "before" picture: every operation computed at root, loops in declaration order, no
tiling, no parallelism, no explicit vectorization. Schedules and the search are measured against it.

    python benchmarks/default_schedules.py                 # all workloads, default shapes
    python benchmarks/default_schedules.py matmul conv2d_nhwc --out results.json
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measure(name: str) -> dict:
    import numpy as np

    import ansor
    from compute import reference
    from compute.ops import get_workload
    from compute.tensor import ComputeOp

    spec = get_workload(name)
    dag = ansor.ComputeDAG(spec.make())
    t0 = time.perf_counter()
    kernel = ansor.build(dag)
    build_s = time.perf_counter() - t0
    inputs = reference.random_inputs(dag, seed=0)
    it = iter(inputs)
    args = [np.zeros(t.shape, t.dtype) if isinstance(t.op, ComputeOp) else next(it) for t in dag.tensors]
    t0 = time.perf_counter()
    kernel(*args)
    first = time.perf_counter() - t0
    # Slow default schedules (a naive 1024^3 GEMM takes ~1 s) get fewer repeats and no warm-up.
    if first > 0.2:
        sec = kernel.benchmark(*args, number=1, repeat=3, warmup_ms=0)
    else:
        sec = kernel.benchmark(*args, repeat=5, min_repeat_ms=50, warmup_ms=100)
    flops = dag.flop_count
    return {"workload": name, "args": list(spec.default_args), "build_seconds": round(build_s, 4),
            "run_seconds": sec, "flops": flops, "gflops": round(flops / sec / 1e9, 3) if flops else None,
            "threads": kernel.num_threads}


def main() -> int:
    from compute.ops import WORKLOADS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", help="names (default: all registered workloads)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "default_schedules.json"))
    ns = ap.parse_args()
    names = ns.workloads or list(WORKLOADS)
    import llvmlite

    rows = []
    for name in names:
        r = measure(name)
        rows.append(r)
        print(f"{name:<24} build {r['build_seconds'] * 1e3:7.1f} ms   run {r['run_seconds'] * 1e3:10.3f} ms"
              f"   {r['gflops'] if r['gflops'] is not None else '-':>8} GFLOPS", file=sys.stderr, flush=True)
    report = {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
              "llvmlite": llvmlite.__version__, "schedule": "default", "results": rows}
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
