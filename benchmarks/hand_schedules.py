"""Hand-written schedules, expressed in transform steps, against numpy and PyTorch.

These are the proof that the code generator reaches the speed the search aims for: GEMM 1024^3,
conv2d NHWC 1x56x56x64 -> 64 (3x3, pad 1) and the same conv + bias + relu, float32.

Method (``ansor.bench.timing``, shared with the suite, ``benchmarks/suite.py``): every system is
timed in a *fresh process*, systems alternate over several rounds, each result is checked against
a reference before it is timed, and we report the median over rounds. Each timing here is the
median of 7 repeats of >= 100 ms on warm inputs.

    python benchmarks/hand_schedules.py              # 5 rounds, 2 threads, table + JSON
    python benchmarks/hand_schedules.py --rounds 3 --threads 1
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ansor.bench.timing import cpu_name, emit_result, run_fresh, time_callable  # noqa: E402

WORKLOADS = ("gemm", "conv2d", "conv2d_bias_relu")


# The schedules live in the package (ansor.hand_schedules) so the CLI's default job shows them too.
from ansor.hand_schedules import (conv2d_bias_relu_schedule, conv2d_schedule,  # noqa: E402
                                  gemm_schedule)

SCHEDULES = {"gemm": gemm_schedule, "conv2d": conv2d_schedule,
             "conv2d_bias_relu": conv2d_bias_relu_schedule}


# ---- one measurement, in a fresh process -----------------------------------------------------------

def _time(fn) -> float:
    return time_callable(fn, repeat=7, min_repeat_ms=100.0, warmup_s=0.6)["seconds"]


def worker(system: str, workload: str) -> dict:
    import numpy as np

    rng = np.random.default_rng(0)
    if workload == "gemm":
        a = rng.uniform(-1, 1, (1024, 1024)).astype("float32")
        b = rng.uniform(-1, 1, (1024, 1024)).astype("float32")
        inputs, flops, ref = [a, b], 2 * 1024 ** 3, None
    else:
        x = rng.uniform(-1, 1, (1, 56, 56, 64)).astype("float32")
        w = rng.uniform(-1, 1, (3, 3, 64, 64)).astype("float32")
        inputs, flops = [x, w], 2 * 56 * 56 * 64 * 576
        if workload == "conv2d_bias_relu":
            inputs.append(rng.uniform(-1, 1, (64,)).astype("float32"))
            flops += 2 * 56 * 56 * 64
    if system == "ours":
        import ansor
        from compute import reference

        dag, state = SCHEDULES[workload]()
        t0 = time.perf_counter()
        kernel = ansor.build(state)
        build_s = time.perf_counter() - t0
        out = np.empty(dag.tensors[-1].shape, "float32")
        kernel(*inputs, out)
        expected = reference.evaluate(dag, inputs)[0]
        if not np.allclose(out, expected, rtol=1e-4, atol=1e-3):
            return {"error": "wrong result"}
        sec = _time(lambda: kernel(*inputs, out))
        return {"seconds": sec, "gflops": flops / sec / 1e9, "build_seconds": build_s,
                "threads": kernel.num_threads}
    if system == "numpy":
        if workload != "gemm":
            return {"skipped": "numpy has no convolution"}
        a, b = inputs
        sec = _time(lambda: a @ b)
        return {"seconds": sec, "gflops": flops / sec / 1e9}
    if system == "torch":
        try:
            import torch
        except ImportError:
            return {"skipped": "torch not installed"}
        torch.set_num_threads(int(os.environ["ANSOR_NUM_THREADS"]))
        with torch.no_grad():
            if workload == "gemm":
                ta, tb = (torch.from_numpy(v) for v in inputs)
                fn = lambda: ta @ tb  # noqa: E731
                expected = inputs[0] @ inputs[1]
            else:
                tx = torch.from_numpy(inputs[0]).permute(0, 3, 1, 2)  # NHWC data = channels_last NCHW
                tw = torch.from_numpy(inputs[1]).permute(3, 2, 0, 1).contiguous(
                    memory_format=torch.channels_last)
                tb = torch.from_numpy(inputs[2]) if len(inputs) > 2 else None
                if tb is None:
                    fn = lambda: torch.nn.functional.conv2d(tx, tw, padding=1)  # noqa: E731
                else:
                    fn = lambda: torch.relu(torch.nn.functional.conv2d(tx, tw, tb, padding=1))  # noqa: E731
                expected = None
            got = fn()
            if expected is not None and not np.allclose(got.numpy(), expected, rtol=1e-3, atol=1e-3):
                return {"error": "wrong result"}
            sec = _time(fn)
        return {"seconds": sec, "gflops": flops / sec / 1e9, "version": torch.__version__}
    raise ValueError(system)


def _run_worker(system: str, workload: str, threads: int) -> dict:
    return run_fresh([__file__, "--worker", system, workload], threads)


def compile_time(rounds: int = 5) -> float:
    """Median seconds to lower + optimise (O3) + emit object code for the GEMM schedule."""
    from measure.kernel import compile_object
    from sketch.lower import lower

    dag, s = gemm_schedule()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        compile_object(lower(s, "gemm"))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=2, metavar=("SYSTEM", "WORKLOAD"), help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "hand_schedules.json"))
    ns = ap.parse_args()
    if ns.worker:
        emit_result(worker(*ns.worker))
        return 0

    systems = ("ours", "numpy", "torch")
    raw: dict = {w: {s: [] for s in systems} for w in WORKLOADS}
    raw["gemm"]["ours_1thread"] = []
    for r in range(ns.rounds):
        for w in WORKLOADS:
            for s in systems:
                raw[w][s].append(_run_worker(s, w, ns.threads))
        raw["gemm"]["ours_1thread"].append(_run_worker("ours", "gemm", 1))
        print(f"round {r + 1}/{ns.rounds} done", file=sys.stderr, flush=True)

    def med(results: list) -> float | None:
        vals = [x["gflops"] for x in results if "gflops" in x]
        return statistics.median(vals) if len(vals) == len(results) and vals else None

    summary = {}
    for w in WORKLOADS:
        summary[w] = {s: med(raw[w][s]) for s in raw[w]}
    ctime = compile_time()
    import llvmlite
    import numpy

    report = {
        "date": time.strftime("%Y-%m-%d"), "machine": platform.machine(), "cpu": cpu_name(),
        "threads": ns.threads, "rounds": ns.rounds, "numpy": numpy.__version__,
        "llvmlite": llvmlite.__version__, "gemm_compile_seconds_median": ctime,
        "summary_gflops": summary, "raw": raw,
    }
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps(report, indent=1))

    print(f"\nHand schedules vs peers, {ns.threads} threads, median of {ns.rounds} rounds "
          f"(fresh process per measurement), {report['cpu']}, {report['date']}\n")
    print("| workload | ours GFLOPS | numpy GFLOPS | PyTorch GFLOPS | ours / best peer |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for w in WORKLOADS:
        o, n, t = summary[w]["ours"], summary[w]["numpy"], summary[w]["torch"]
        peers = [x for x in (n, t) if x]
        ratio = f"{o / max(peers):.2f}" if o and peers else "-"
        f = lambda x: f"{x:.1f}" if x else "-"  # noqa: E731
        print(f"| {w} | {f(o)} | {f(n)} | {f(t)} | {ratio} |")
    g1, g2 = summary["gemm"]["ours_1thread"], summary["gemm"]["ours"]
    if g1 and g2:
        print(f"\nGEMM 1 -> {ns.threads} threads: {g1:.1f} -> {g2:.1f} GFLOPS, speed-up {g2 / g1:.2f}x")
    print(f"GEMM schedule compile time (lower + O3 + object code), median: {ctime * 1e3:.0f} ms")
    print(f"JSON: {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
