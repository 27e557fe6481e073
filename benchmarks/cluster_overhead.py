"""Dask cluster path against the local path: build throughput and per-candidate overhead.

The batch is the one ``measure_overhead.py`` uses: 64 tilings of a float32 GEMM 128^3, kernels on
one thread (``ANSOR_NUM_THREADS=1``), every figure the median of ``--runs`` batches after a warm-up
batch (sandboxes started, workload inputs set up):

* build throughput (candidates/s): ``LocalBuilder(n_parallel=1)`` and ``(n_parallel=2)`` against
  ``DaskBuilder`` on a ``LocalCluster`` of 1 and of 2 worker processes (1 thread each), all on
  this machine;
* per-candidate build overhead of the Dask path: (Dask 1 worker - local 1 process) batch time / 64;
* per-candidate measurement overhead: a runner timing each kernel once (number=1, repeat=1,
  min_repeat_ms=0, no warm-up); the batch's wall time minus the kernels' own recorded times,
  / 64, for ``LocalRunner`` and for ``DaskRunner`` on one measuring worker;
* the same for the whole ``measure_batch`` (build, then measure), local 1 process against Dask
  1 worker.

    python benchmarks/cluster_overhead.py             # prints a summary and JSON,
    python benchmarks/cluster_overhead.py --runs 7    # writes results/cluster_overhead.json

Run it on an otherwise quiet machine; the load averages before and after are in the report.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

os.environ["ANSOR_NUM_THREADS"] = "1"  # before any worker process starts: they inherit it

FAST = dict(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _check_built(built) -> None:
    bad = [b for b in built if b.error_no]
    if bad:
        raise RuntimeError(f"{len(bad)} candidates failed to build: {bad[0].error_msg}")


def _runner_overhead(runner, inputs, built, runs: int) -> dict:
    runner.run(inputs, built)  # warm-up: the sandbox and the workload's inputs
    rows = []
    for _ in range(runs):
        t0 = time.perf_counter()
        res = runner.run(inputs, built)
        wall = time.perf_counter() - t0
        bad = [r for r in res if not r.ok]
        if bad:
            raise RuntimeError(f"{len(bad)} candidates failed to run: {bad[0]}")
        kernel = sum(r.costs[0] for r in res)
        rows.append((wall - kernel) / len(inputs))
    return {"per_candidate_ms": [x * 1e3 for x in rows], "median_ms": statistics.median(rows) * 1e3}


def _cluster(n_workers: int):
    from distributed import LocalCluster

    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                        host="127.0.0.1", dashboard_address="127.0.0.1:0",
                        resources={"measure": 1} if n_workers == 1 else None)


def run(runs: int) -> dict:
    from measure_overhead import gemm_candidates

    from measure.builder import LocalBuilder
    from measure.dask_builder import DaskBuilder
    from measure.dask_runner import DaskRunner
    from measure.local import measure_batch
    from measure.runner import LocalRunner
    from measure.target import host_cpu_name

    inputs = gemm_candidates()
    n = len(inputs)
    out: dict = {"cpu": host_cpu_name(), "cores": os.cpu_count(), "candidates": n,
                 "workload": "GEMM 128^3 float32, 64 tilings", "kernel_threads": 1, "runs": runs,
                 "load_before": _load()}

    build_s: dict[str, list[float]] = {}
    for par in (1, 2):
        with LocalBuilder(n_parallel=par) as b:
            _check_built(b.build(inputs))  # warm-up
            build_s[f"local_{par}_process"] = _timed(lambda: b.build(inputs), runs)
    for workers in (1, 2):
        with _cluster(workers) as cl, DaskBuilder(cl.scheduler_address) as b:
            _check_built(b.build(inputs))
            build_s[f"dask_{workers}_worker"] = _timed(lambda: b.build(inputs), runs)
    out["build_seconds"] = build_s
    out["build_candidates_per_s"] = {k: n / statistics.median(v) for k, v in build_s.items()}
    out["dask_build_overhead_per_candidate_ms"] = (
        statistics.median(build_s["dask_1_worker"]) - statistics.median(build_s["local_1_process"])
    ) / n * 1e3

    with LocalBuilder(n_parallel=1) as b:
        built = b.build(inputs)
    _check_built(built)
    with LocalRunner(**FAST) as r:
        out["local_runner_overhead"] = _runner_overhead(r, inputs, built, runs)
    with _cluster(1) as cl, DaskRunner(cl.scheduler_address, **FAST) as r:
        out["dask_runner_overhead"] = _runner_overhead(r, inputs, built, runs)
    out["dask_measure_overhead_per_candidate_ms"] = (
        out["dask_runner_overhead"]["median_ms"] - out["local_runner_overhead"]["median_ms"])

    def batch(builder, runner) -> list[float]:
        measure_batch(inputs, builder, runner)  # warm-up
        return _timed(lambda: measure_batch(inputs, builder, runner), runs)

    with LocalBuilder(n_parallel=1) as b, LocalRunner(**FAST) as r:
        local = batch(b, r)
    with _cluster(1) as cl, DaskBuilder(cl.scheduler_address) as b, \
            DaskRunner(cl.scheduler_address, **FAST) as r:
        dask = batch(b, r)
    out["measure_batch_seconds"] = {"local_1_process": local, "dask_1_worker": dask}
    out["measure_batch_overhead_per_candidate_ms"] = (
        statistics.median(dask) - statistics.median(local)) / n * 1e3
    out["load_after"] = _load()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="timed batches per figure (median)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cluster_overhead.json"))
    ns = ap.parse_args()
    res = run(ns.runs)
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps(res, indent=1))
    tput = res["build_candidates_per_s"]
    print(f"CPU {res['cpu']} ({res['cores']} cores), load {res['load_before']} -> "
          f"{res['load_after']}; {res['candidates']} candidates, median of {ns.runs}")
    print("build throughput (candidates/s): " + ", ".join(f"{k} {v:.1f}" for k, v in tput.items()))
    print(f"Dask build overhead per candidate: {res['dask_build_overhead_per_candidate_ms']:.2f} ms")
    print(f"measurement overhead per candidate: local {res['local_runner_overhead']['median_ms']:.2f}"
          f" ms, Dask {res['dask_runner_overhead']['median_ms']:.2f} ms (+"
          f"{res['dask_measure_overhead_per_candidate_ms']:.2f} ms)")
    print(f"build + measure per candidate, Dask - local: "
          f"{res['measure_batch_overhead_per_candidate_ms']:.2f} ms")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
