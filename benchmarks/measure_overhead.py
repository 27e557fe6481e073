"""Measurement pipeline benchmark: per-candidate overhead, builder throughput, and faithfulness.

* Overhead: a batch of 64 candidates (64 tilings of a 128^3 GEMM) through LocalRunner with
  number=1, repeat=1, min_repeat_ms=0, no warm-up. Overhead per candidate is the batch's wall time
  minus the kernels' own recorded run time, over 64: the process round trip, loading the object
  code, setting up the arguments, the timing harness. Median of 3 batches.
* Builder throughput: the same 64 candidates through LocalBuilder(n_parallel=2), candidates/s,
  median of 3 builds (workers already started).
* Faithfulness: the hand-written GEMM 1024^3 and conv2d schedules (hand_schedules.py) measured by a
  default LocalRunner, against an independent re-timing of the same compiled object with
  Kernel.benchmark in a fresh process; rounds alternate between the two. The goal is agreement
  within 10%.

    python benchmarks/measure_overhead.py            # prints JSON, writes results/measure_overhead.json
    python benchmarks/measure_overhead.py --rounds 5

Run it on an otherwise quiet machine (the load averages before and after are in the report).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def gemm_candidates(n: int = 128) -> list:
    """64 distinct schedules of an n^3 GEMM: output tile ti x tj, reduction split by tk."""
    import ansor
    from compute.ops import workloads as W
    from measure.measure import MeasureInput

    dag = ansor.ComputeDAG(W.matmul(n, n, n))
    task = types.SimpleNamespace(compute_dag=dag, workload_key=dag.workload_key)
    inputs = []
    for ti in (2, 4, 8, 16):
        for tj in (8, 16, 32, 64):
            for tk in (1, 4, 16, 128):
                CL, C = "matmul.local", "matmul"
                s = dag.init_state().cache_write(C)
                s = s.split(C, "i", [ti]).split(C, "j", [tj]).reorder(C, ["i.0", "j.0", "i.1", "j.1"])
                s = s.fuse(C, ["i.0", "j.0"]).parallel(C, 0)
                s = s.compute_at(CL, C, 0).vectorize(C, "j.1")
                s = s.split(CL, "k", [tk]).reorder(CL, ["k.0", "i", "k.1", "j"]).vectorize(CL, "j")
                inputs.append(MeasureInput(task, s))
    return inputs


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def overhead(batches: int = 3) -> dict:
    from measure.builder import LocalBuilder
    from measure.runner import LocalRunner

    inputs = gemm_candidates()
    with LocalBuilder(n_parallel=2) as builder:
        builder.pool.wait_ready()
        build_times = []
        for _ in range(batches):
            t0 = time.perf_counter()
            built = builder.build(inputs)
            build_times.append(time.perf_counter() - t0)
    failed = [b.error_msg for b in built if b.error_no]
    if failed:
        raise RuntimeError(f"{len(failed)} candidates failed to build: {failed[0]}")

    rows = []
    with LocalRunner(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0) as runner:
        runner.pool.wait_ready()
        runner.run(inputs[:4], built[:4])  # the workload's inputs are set up once per worker
        round_trips = []
        for _ in range(20):
            t0 = time.perf_counter()
            runner.pool.run(os.getpid, timeout=5)
            round_trips.append(time.perf_counter() - t0)
        for _ in range(batches):
            t0 = time.perf_counter()
            res = runner.run(inputs, built)
            wall = time.perf_counter() - t0
            bad = [r for r in res if not r.ok]
            if bad:
                raise RuntimeError(f"{len(bad)} candidates failed to run: {bad[0]}")
            kernel = sum(r.costs[0] for r in res)
            rows.append({"wall_s": wall, "kernel_s": kernel,
                         "overhead_per_candidate_ms": (wall - kernel) / len(inputs) * 1e3})
    med = sorted(rows, key=lambda r: r["overhead_per_candidate_ms"])[len(rows) // 2]
    return {
        "candidates": len(inputs),
        "workload": "GEMM 128^3 float32, 64 tilings",
        "runner": "number=1 repeat=1 min_repeat_ms=0 warmup_ms=0",
        "median_batch": med,
        "batches": rows,
        "empty_job_round_trip_ms_median": statistics.median(round_trips) * 1e3,
        "builder_n_parallel": 2,
        "builder_seconds": build_times,
        "builder_candidates_per_s_median": len(inputs) / statistics.median(build_times),
    }


def _retime_in_fresh_process(compiled) -> float:
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
        pickle.dump(compiled, f)
        path = f.name
    try:
        proc = subprocess.run([sys.executable, __file__, "--retime", path], capture_output=True,
                              text=True, timeout=600)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        raise RuntimeError(f"re-timing failed: {proc.stderr.strip()[-2000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["seconds"])


def faithfulness(rounds: int = 3) -> dict:
    from hand_schedules import conv2d_schedule, gemm_schedule

    from measure.builder import LocalBuilder
    from measure.measure import MeasureInput
    from measure.runner import LocalRunner

    out = {}
    with LocalBuilder(n_parallel=2) as builder, LocalRunner() as runner:
        for name, make in (("gemm_1024", gemm_schedule), ("conv2d_56x56x64", conv2d_schedule)):
            dag, state = make()
            task = types.SimpleNamespace(compute_dag=dag, workload_key=dag.workload_key)
            inputs = [MeasureInput(task, state)]
            built = builder.build(inputs)
            if built[0].error_no:
                raise RuntimeError(f"{name} failed to build: {built[0].error_msg}")
            runs, fresh = [], []
            for _ in range(rounds):
                res = runner.run(inputs, built)[0]
                if not res.ok:
                    raise RuntimeError(f"{name} failed to run: {res}")
                runs.append(res.mean_cost)
                fresh.append(_retime_in_fresh_process(built[0].compiled))
            r, f = statistics.median(runs), statistics.median(fresh)
            out[name] = {"runner_ms": r * 1e3, "fresh_process_benchmark_ms": f * 1e3,
                         "ratio_runner_over_fresh": r / f,
                         "runner_ms_per_round": [x * 1e3 for x in runs],
                         "fresh_ms_per_round": [x * 1e3 for x in fresh]}
    out["runner"] = "LocalRunner defaults: number=3 repeat=1 min_repeat_ms=100 warmup_ms=300"
    out["fresh_process"] = "Kernel.benchmark defaults: median of 5 repeats >= 50 ms, warmup 300 ms"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--retime", metavar="PICKLE", help=argparse.SUPPRESS)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "measure_overhead.json"))
    ns = ap.parse_args()
    if ns.retime:
        from measure.kernel import load

        with open(ns.retime, "rb") as f:
            kernel = load(pickle.load(f))
        print(json.dumps({"seconds": kernel.benchmark()}))
        return 0

    from measure import runtime

    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
                    "threads": runtime.num_threads(), "load_before": _load()}
    report["overhead"] = overhead(ns.batches)
    report["faithfulness"] = faithfulness(ns.rounds)
    report["load_after"] = _load()
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
