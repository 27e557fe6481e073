"""The auto-scheduler against AutoTVM-style template tuners, at equal trial budgets.

For each operator, each seed and each method, one tuning run in a fresh process (sequentially:
two runs never compete for the cores), all with the same builder and runner settings. The best
GFLOPS after each measured trial is read back from the run's own record log - every number is a
measurement. Methods:

* ``ansor``: ``SearchTask(...).tune(TuningOptions(...))`` with its default cost model;
* ``grid``, ``random``, ``ga``, ``lgbm``: ``ansor.autotvm`` tuners on the template registered
  for the workload (GEMM: 3-level tiles + register tile; convolutions: row-parallel output tiles
  with a register tile), the model-based one being LightGBM with simulated annealing.

Operators: ``gemm`` (1024^3), ``conv2d_bias_relu`` (NHWC 1x56x56x64 -> 64, 3x3, pad 1, + bias +
relu), ``depthwise`` (NHWC 1x112x112x32, 3x3, pad 1) and, on request, ``conv2d`` (the same conv
without the epilogue); ``--small`` shrinks every shape for a quick end-to-end check.

    python benchmarks/compare_tuners.py --trials 500 --seeds 0 \\
        --ops gemm,conv2d_bias_relu,depthwise --out benchmarks/results/compare_tuners.json
    python benchmarks/compare_tuners.py --trials 16 --ops gemm --small --out /tmp/ct.json

Writes the JSON (per run: the curve of best GFLOPS after each trial, wall time, errors), a PNG
of the curves next to it when matplotlib is installed (``pip install -e '.[plot]'``), and prints
a Markdown table of the best GFLOPS at 64, 200 and 500 trials (the checkpoints up to
``--trials``), averaged over seeds.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METHODS = ("ansor", "grid", "random", "ga", "lgbm")
OPS = {
    "gemm": ("matmul", (1024, 1024, 1024), (128, 128, 128)),
    "conv2d_bias_relu": ("conv2d_bias_relu", (1, 56, 56, 64, 64, 3, 3, 1, 1),
                         (1, 14, 14, 16, 16, 3, 3, 1, 1)),
    "depthwise": ("depthwise_conv2d_nhwc", (1, 112, 112, 32, 3, 3, 1, 1),
                  (1, 28, 28, 16, 3, 3, 1, 1)),
    "conv2d": ("conv2d_nhwc", (1, 56, 56, 64, 64, 3, 3, 1, 1), (1, 14, 14, 16, 16, 3, 3, 1, 1)),
}
DEFAULT_OPS = ("gemm", "conv2d_bias_relu", "depthwise")
CHECKPOINTS = (64, 200, 500)


# ---- one run, in a fresh process -----------------------------------------------------------------

def curve_from_log(path: str, workload_key: str) -> list[float]:
    """Best GFLOPS after each record of ``workload_key`` in ``path``, in log (= measurement)
    order; failed measurements count as trials that do not improve the best."""
    from measure.record import iter_lines

    best, curve = 0.0, []
    if not os.path.exists(path):
        return curve
    for line in iter_lines(path):
        if line.workload_key != workload_key:
            continue
        if line.is_valid and line.flop:
            best = max(best, line.flop / line.result.mean_cost / 1e9)
        curve.append(best)
    return curve


def _measurers(ns: argparse.Namespace):
    from measure.builder import LocalBuilder
    from measure.runner import LocalRunner

    builder = LocalBuilder(timeout=ns.build_timeout)
    runner = LocalRunner(timeout=ns.run_timeout, number=ns.number, repeat=ns.repeat,
                         min_repeat_ms=ns.min_repeat_ms)
    return builder, runner


def run_one(method: str, op: str, seed: int, ns: argparse.Namespace, log: str) -> dict:
    """Tune ``op`` with ``method`` for ``ns.trials`` trials, logging to ``log`` (a fresh file)."""
    import ansor
    from ansor import autotvm

    workload, big, small = OPS[op]
    args = small if ns.small else big
    if os.path.exists(log):
        os.remove(log)  # a leftover log would be resumed, not re-measured
    builder, runner = _measurers(ns)
    t0 = time.monotonic()
    try:
        if method == "ansor":
            task = ansor.SearchTask(func=workload, args=args)
            res = task.tune(ansor.TuningOptions(
                num_measure_trials=ns.trials, num_measures_per_round=ns.batch, seed=seed,
                log_file=log, builder=builder, runner=runner, verbose=1))
            trials, errors, stop = res.trials, res.errors, res.stop_reason
        else:
            ttask = autotvm.create_task(workload, args, name=op)
            tuner = autotvm.TUNERS[method](ttask, seed=seed)
            res = tuner.tune(ns.trials, autotvm.measure_option(builder, runner), log_file=log,
                             batch_size=ns.batch, verbose=1)
            task = ttask.search_task
            trials, errors, stop = res.trials, res.errors, res.stop_reason
    finally:
        builder.close()
        runner.close()
    wall = time.monotonic() - t0
    curve = curve_from_log(log, task.workload_key)
    return {"method": method, "op": op, "seed": seed, "workload": workload, "args": list(args),
            "trials": trials, "errors": errors, "stop_reason": stop, "wall_seconds": wall,
            "best_gflops": curve[-1] if curve else 0.0, "curve": curve}


def _spawn(method: str, op: str, seed: int, ns: argparse.Namespace, log_dir: str) -> dict:
    log = os.path.join(log_dir, f"{op}-{method}-seed{seed}.json")
    out = os.path.join(log_dir, f"{op}-{method}-seed{seed}.result.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", method, op, str(seed),
           "--worker-log", log, "--worker-out", out, "--trials", str(ns.trials),
           "--batch", str(ns.batch), "--number", str(ns.number), "--repeat", str(ns.repeat),
           "--min-repeat-ms", str(ns.min_repeat_ms), "--build-timeout", str(ns.build_timeout),
           "--run-timeout", str(ns.run_timeout)] + (["--small"] if ns.small else [])
    print(f"\n=== {op} / {method} / seed {seed} ===", flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=str(ROOT))
    if proc.returncode != 0 or not os.path.exists(out):
        return {"method": method, "op": op, "seed": seed, "curve": [], "best_gflops": 0.0,
                "error": f"the run failed (exit code {proc.returncode})",
                "wall_seconds": time.monotonic() - t0}
    with open(out) as f:
        return json.load(f)


# ---- report ------------------------------------------------------------------------------------

def at(curve: list[float], n: int) -> float | None:
    """Best GFLOPS after ``n`` trials (a run that stopped earlier keeps its last best)."""
    if not curve:
        return None
    return curve[min(n, len(curve)) - 1]


def checkpoints(trials: int) -> list[int]:
    cps = [c for c in CHECKPOINTS if c <= trials]
    if not cps or cps[-1] != trials:
        cps.append(trials)
    return cps


def summarize(runs: list[dict], trials: int) -> dict:
    """op -> method -> checkpoint -> mean best GFLOPS over seeds (None if no run succeeded)."""
    out: dict = {}
    for r in runs:
        out.setdefault(r["op"], {}).setdefault(r["method"], []).append(r)
    table: dict = {}
    for op, by_method in out.items():
        table[op] = {}
        for method, rs in by_method.items():
            row = {}
            for c in checkpoints(trials):
                vals = [v for v in (at(r["curve"], c) for r in rs) if v is not None]
                row[str(c)] = statistics.mean(vals) if vals else None
            table[op][method] = row
    return table


def markdown(table: dict, trials: int, n_seeds: int) -> str:
    cps = checkpoints(trials)
    seeds = f", mean of {n_seeds} seeds" if n_seeds > 1 else ""
    lines = [f"Best GFLOPS after N measured trials{seeds}", "",
             "| op | method | " + " | ".join(f"{c} trials" for c in cps) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in cps) + " |"]
    for op, by_method in table.items():
        for method, row in by_method.items():
            cells = ["-" if row[str(c)] is None else f"{row[str(c)]:.1f}" for c in cps]
            lines.append(f"| {op} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: list[dict], path: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ops = list(dict.fromkeys(r["op"] for r in runs))
    fig, axes = plt.subplots(1, len(ops), figsize=(5 * len(ops), 4), squeeze=False)
    for ax, op in zip(axes[0], ops):
        methods = list(dict.fromkeys(r["method"] for r in runs if r["op"] == op))
        for m in methods:
            curves = [r["curve"] for r in runs if r["op"] == op and r["method"] == m and r["curve"]]
            if not curves:
                continue
            n = max(len(c) for c in curves)
            mean = [statistics.mean(at(c, k + 1) for c in curves) for k in range(n)]
            ax.plot(range(1, n + 1), mean, label=m)
        ax.set_title(op)
        ax.set_xlabel("measured trials")
        ax.set_ylabel("best GFLOPS")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _machine() -> dict:
    info = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.machine(),
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "ANSOR_NUM_THREADS": os.environ.get("ANSOR_NUM_THREADS")}
    try:
        from measure.record import target_summary

        info["target"] = target_summary()
    except Exception as err:  # noqa: BLE001 - informational only
        info["target"] = f"unavailable: {err}"
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=500, help="measured trials per run")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (one run per seed)")
    ap.add_argument("--ops", default=",".join(DEFAULT_OPS),
                    help=f"comma-separated, from {', '.join(OPS)}")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help=f"comma-separated, from {', '.join(METHODS)}")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "compare_tuners.json"))
    ap.add_argument("--small", action="store_true", help="small shapes (a quick check)")
    ap.add_argument("--batch", type=int, default=64, help="measurements per round / batch")
    ap.add_argument("--number", type=int, default=3, help="runner: calls per repeat (minimum)")
    ap.add_argument("--repeat", type=int, default=1, help="runner: repeats per measurement")
    ap.add_argument("--min-repeat-ms", type=float, default=100, help="runner: minimum repeat time")
    ap.add_argument("--build-timeout", type=float, default=15)
    ap.add_argument("--run-timeout", type=float, default=10)
    ap.add_argument("--log-dir", default=None, help="keep the runs' record logs here")
    ap.add_argument("--worker", nargs=3, metavar=("METHOD", "OP", "SEED"), help=argparse.SUPPRESS)
    ap.add_argument("--worker-log", help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.trials < 1 or ns.batch < 1:
        ap.error("--trials and --batch must be positive")

    if ns.worker:
        method, op, seed = ns.worker
        result = run_one(method, op, int(seed), ns, ns.worker_log)
        with open(ns.worker_out, "w") as f:
            json.dump(result, f)
        return 0

    ops = [o for o in ns.ops.split(",") if o]
    methods = [m for m in ns.methods.split(",") if m]
    bad = [o for o in ops if o not in OPS] + [m for m in methods if m not in METHODS]
    if bad:
        ap.error(f"unknown op(s)/method(s): {', '.join(bad)}; ops: {', '.join(OPS)}; methods: "
                 f"{', '.join(METHODS)}")
    try:
        seeds = [int(s) for s in ns.seeds.split(",") if s != ""]
    except ValueError:
        ap.error(f"--seeds must be comma-separated integers, got {ns.seeds!r}")
    log_dir = ns.log_dir or tempfile.mkdtemp(prefix="compare_tuners-")
    os.makedirs(log_dir, exist_ok=True)

    runs = []
    t0 = time.monotonic()
    for op in ops:
        for seed in seeds:
            for method in methods:
                runs.append(_spawn(method, op, seed, ns, log_dir))
    table = summarize(runs, ns.trials)
    report = {
        "meta": {**_machine(), "trials": ns.trials, "seeds": seeds, "ops": ops,
                 "methods": methods, "small": ns.small, "batch": ns.batch,
                 "runner": {"number": ns.number, "repeat": ns.repeat,
                            "min_repeat_ms": ns.min_repeat_ms, "timeout": ns.run_timeout},
                 "build_timeout": ns.build_timeout,
                 "shapes": {op: list(OPS[op][2] if ns.small else OPS[op][1]) for op in ops},
                 "wall_seconds": time.monotonic() - t0, "log_dir": log_dir if ns.log_dir else None},
        "best_gflops_at": table,
        "runs": runs,
    }
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    png = str(out.with_suffix(".png"))
    plotted = plot(runs, png)
    print()
    print(markdown(table, ns.trials, len(seeds)))
    failed = [r for r in runs if "error" in r]
    for r in failed:
        print(f"\n{r['op']} / {r['method']} / seed {r['seed']}: {r['error']}")
    print(f"\nwrote {out}" + (f" and {png}" if plotted else " (no plot: matplotlib not installed)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
