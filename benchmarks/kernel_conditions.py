"""Each task's kernel timed alone (warm, cold, network mode) against its time inside the running network.

Issue 44: the tuner times a candidate in a warm loop (the same buffers call after call), but in a
network every kernel reads weights and activations the kernels before it evicted, so the task
scheduler's objective (the estimated latency, sum over tasks of weight x best cost) sat 14-71%
below the measured network. For a network and a tuning log (none: the untuned schedules), this
takes each task's schedule the compiled network uses (the log's best, ``choose_schedules``) and
reports per task:

* ``weight``: the task's occurrences in the network;
* ``warm`` / ``cold`` / ``network`` / ``handoff``: the kernel timed by the runner
  (``LocalRunner(cache="warm"|"cold"|"network"|"handoff")``, ``measure.runner``: the same buffers
  every call; every call on arguments no cache holds; the constants rotated over the task's
  network footprint, the activations and the output one warm set; as network, the activations
  written again before each call);
* ``in network``: the kernel's calls timed inside the running network (``NetworkModule.profile``:
  the clock read between consecutive kernel calls, median over the inferences), summed over the
  task's occurrences, and per occurrence;

and the totals: the estimate from warm, cold and network-mode costs (each sum of weight x cost), the
sum of the in-network steps (tasks' and the rest: layout transforms, element-wise groups) and the
measured network latency (``NetworkModule.benchmark``). The network's outputs are checked against
the graph reference before anything is timed. Every group runs NHWC (a layout choice recorded
beside a ``--layout-tuning`` log is not applied), so that each task's kernel is the one timed alone.

Usage (a quiet machine: every figure is a timing):
  python benchmarks/kernel_conditions.py --network mobilenet-v2 \\
      --log benchmarks/published/2026-11-26-znver4-layout-modes-2/mobilenet-v2-best_records-b.json
  python benchmarks/kernel_conditions.py --network resnet-18 --no-layout-rewrite \\
      --log benchmarks/published/2026-11-26-znver4-layout-modes/best_records-a.json [--json OUT]

A log tuned without weight layout rewrite (``network tune --no-layout-rewrite``: the ``*-a``
logs of the layout-modes runs) needs ``--no-layout-rewrite``, or its records match no task (the
table then says how many tasks had a record).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

NETWORKS = ["mobilenet-v2", "resnet-18", "resnet-50", "bert-base-layer"]
MODES = ("warm", "cold", "network", "handoff")  # the runner's timing modes (``measure.runner``)


def _graph(ns: argparse.Namespace) -> Any:
    import ansor

    opts: dict[str, int] = {}
    if ns.image_size is not None:
        opts["image_size"] = ns.image_size
    if ns.seq_len is not None:
        opts["seq_len"] = ns.seq_len
    return ansor.networks.get(ns.network, batch=ns.batch, **opts)


def _check_outputs(lib: Any, g: Any) -> float:
    """The largest error of the compiled network's outputs against the graph reference,
    relative to each output's largest magnitude; raises if it is beyond float32 noise."""
    import numpy as np

    from ansor.graph import run

    rng = np.random.default_rng(0)
    x = {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in g.inputs.items()}
    out, ref = lib.run(x), run(g, x)
    worst = 0.0
    for k, r in ref.items():
        scale = float(np.abs(r).max()) or 1.0
        worst = max(worst, float(np.abs(out[k] - r).max()) / scale)
    if worst > 1e-3:
        raise SystemExit(f"kernel_conditions: the compiled network differs from the reference "
                         f"(relative error {worst:.2e}): no figure is taken")
    return worst


def _time_tasks(tasks: list, states: list, ns: argparse.Namespace) -> dict[str, list[float | None]]:
    """Per mode, each task's seconds per call (None: it failed, said on stderr): the median over
    ``ns.rounds`` rounds of the medians of its repeats. The modes alternate task by task (one
    worker each), so that all see the machine in the same state."""
    from measure.builder import LocalBuilder
    from measure.measure import MeasureInput
    from measure.runner import LocalRunner

    inputs = [MeasureInput(t, s) for t, s in zip(tasks, states)]
    with LocalBuilder(timeout=120) as builder:
        built = builder.build(inputs)
    modes = MODES
    samples: dict[str, list[list[float]]] = {m: [[] for _ in tasks] for m in modes}
    failed: dict[str, list[str]] = {m: [""] * len(tasks) for m in modes}
    runners = {m: LocalRunner(cache=m, timeout=120, number=ns.number, repeat=ns.repeat,
                              min_repeat_ms=ns.min_repeat_ms, warmup_ms=300, check_correctness=True)
               for m in modes}
    try:
        for _ in range(ns.rounds):
            for i, (inp, b) in enumerate(zip(inputs, built)):
                for m in modes:
                    r = runners[m].run([inp], [b])[0]
                    if r.ok:
                        samples[m][i].append(statistics.median(r.costs))
                    else:
                        failed[m][i] = r.error_msg[:200]
    finally:
        for r in runners.values():
            r.close()
    out: dict[str, list[float | None]] = {}
    for m in modes:
        for t, why in zip(tasks, failed[m]):
            if why:
                print(f"kernel_conditions: {t.desc} ({m}): {why}", file=sys.stderr)
        out[m] = [statistics.median(v) if v and not why else None for v, why in zip(samples[m], failed[m])]
    return out


def measure(ns: argparse.Namespace) -> dict:
    """Every figure of one network (see the module docstring), as a JSON-able dict."""
    from ansor.bench.timing import machine_info
    from ansor.graph.executor import link, plan_as_compiled
    from ansor.graph.plan import plan_network
    from ansor.graph.schedules import choose_schedules
    from ansor.records import best_records
    from measure.runtime import num_threads

    g = _graph(ns)
    plan = plan_network(g, layout_rewrite=not ns.no_layout_rewrite)
    if not ns.nhwc:
        plan = plan_as_compiled(plan, ns.log, verbose=True)
    tasks, weights = list(plan.tasks), list(plan.weights)
    recorded = best_records(ns.log, tasks) if ns.log else [None] * len(tasks)
    schedules = choose_schedules(plan, ns.log, verbose=False)
    first = {}  # task index -> the state of its first occurrence (the one the network runs)
    for i, ti in plan.task_of.items():
        first.setdefault(ti, schedules[i])
    states = [first[ti] for ti in range(len(tasks))]
    print(f"# {ns.network}: {len(tasks)} task(s), {sum(r is not None for r in recorded)} with a "
          f"record in {ns.log or '(no log: untuned schedules)'}; timing each alone ...",
          file=sys.stderr, flush=True)
    alone = _time_tasks(tasks, states, ns)
    print("# compiling and profiling the network ...", file=sys.stderr, flush=True)
    lib = link(plan, schedules)
    error = _check_outputs(lib, g)
    benches, profiles = [], []
    for _ in range(ns.rounds):  # alternating, as the kernels alone: the median of each
        benches.append(lib.benchmark(repeat=ns.repeat, min_repeat_ms=ns.min_repeat_ms * 2))
        profiles.append(lib.profile(min_repeat_ms=ns.min_repeat_ms * 2))
    bench = {k: statistics.median(b[k] for b in benches) for k in ("mean", "overhead")}
    prof = [{**steps[0], "seconds": statistics.median(p["seconds"] for p in steps)}
            for steps in zip(*profiles)]
    in_net: dict[str, float] = {}
    for p in prof:
        if p["task"]:
            in_net[p["task"]] = in_net.get(p["task"], 0.0) + p["seconds"]
    rows = []
    for ti, (t, w) in enumerate(zip(tasks, weights)):
        rec = recorded[ti]
        rows.append({"task": t.desc, "workload_key": t.workload_key, "weight": w,
                     "recorded": None if rec is None else {"seconds": rec[1].mean_cost, "cache": rec[1].cache},
                     **{m: alone[m][ti] for m in MODES}, "in_network": in_net.get(t.workload_key)})

    def estimate(mode: str) -> float | None:
        costs = [r[mode] for r in rows]
        return None if any(c is None for c in costs) else sum(r["weight"] * c for r, c in zip(rows, costs))

    return {"machine": machine_info(), "threads": num_threads(), "network": ns.network, "rounds": ns.rounds,
            "log": ns.log, "layout_rewrite": not ns.no_layout_rewrite, "as_compiled": not ns.nhwc, "tasks": rows,
            "steps": prof, "output_error": error,
            "totals": {**{f"estimate_{m}": estimate(m) for m in MODES},
                       "estimate_recorded": None if any(r["recorded"] is None for r in rows)
                       else sum(r["weight"] * r["recorded"]["seconds"] for r in rows),
                       "in_network_tasks": sum(in_net.values()),
                       "in_network_steps": sum(p["seconds"] for p in prof),
                       "network": bench["mean"], "executor_overhead": bench["overhead"]}}


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.3f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}x"


def markdown(rep: dict) -> str:
    m = rep["machine"]
    lines = [f"# {rep['network']}: kernels alone (warm, cold, network mode) and in the network",
             "", f"{m['cpu']} ({m['llvm_cpu']}), {rep['threads']} thread(s), {m['date']}; log "
             f"{rep['log'] or '(none: untuned schedules)'}; layout rewrite {'on' if rep['layout_rewrite'] else 'off'}; "
             + ("pairs and layouts as compiled from the log" if rep.get("as_compiled") else "every group NHWC, no pair"),
             "", "| # | task | weight | log (ms) | warm (ms) | cold (ms) | network mode (ms) | handoff (ms) | "
             "in network (ms, all) | per occurrence (ms) | in network / warm | in network / cold | "
             "in network / network mode | in network / handoff |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for i, r in enumerate(rep["tasks"]):
        per = None if r["in_network"] is None else r["in_network"] / r["weight"]
        rec = "-" if r["recorded"] is None else f"{_ms(r['recorded']['seconds'])} {r['recorded']['cache']}"
        net, ho = r.get("network"), r.get("handoff")  # reports written before a mode have none
        lines.append(f"| {i} | {r['task'][:60]} | {r['weight']} | {rec} | {_ms(r['warm'])} | {_ms(r['cold'])} "
                     f"| {_ms(net)} | {_ms(ho)} | {_ms(r['in_network'])} | {_ms(per)} | {_ratio(per, r['warm'])} "
                     f"| {_ratio(per, r['cold'])} | {_ratio(per, net)} | {_ratio(per, ho)} |")
    t = rep["totals"]
    lines += ["", "| total | ms | network / it |", "| --- | ---: | ---: |"]
    for key, what in (("estimate_warm", "estimate from warm costs (sum of weight x warm)"),
                      ("estimate_cold", "estimate from cold costs (sum of weight x cold)"),
                      ("estimate_network", "estimate from network-mode costs (sum of weight x network mode)"),
                      ("estimate_handoff", "estimate from handoff-mode costs (sum of weight x handoff)"),
                      ("estimate_recorded", "estimate from the log's records (sum of weight x record)"),
                      ("in_network_tasks", "tasks' kernels in the network (profile)"),
                      ("in_network_steps", "every step in the network (profile)"),
                      ("network", "measured network latency (benchmark)")):
        lines.append(f"| {what} | {_ms(t.get(key))} | {_ratio(t['network'], t.get(key))} |")
    rest = sorted((p for p in rep.get("steps", []) if not p["task"]), key=lambda p: -p["seconds"])
    if rest:  # the steps no task costs: layout transforms, reshapes, element-wise groups
        lines += ["", f"Steps the estimate does not cost: {len(rest)}, {_ms(sum(p['seconds'] for p in rest))} ms "
                  "in the network (the largest 12):", "", "| step | kind | in network (ms) |", "| --- | --- | ---: |"]
        for p in rest[:12]:
            lines.append(f"| {p['name'][:60]} | {'layout transform' if p['transform'] else 'no reduction'} "
                         f"| {_ms(p['seconds'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", choices=NETWORKS, default="mobilenet-v2")
    ap.add_argument("--log", default=None, help="tuning records (default: none, the untuned schedules)")
    ap.add_argument("--image-size", type=int, default=None, help="CNNs (default 224)")
    ap.add_argument("--seq-len", type=int, default=None, help="bert-base-layer (default 128)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--no-layout-rewrite", action="store_true",
                    help="tasks and network without weight layout rewrite (a log tuned so)")
    ap.add_argument("--nhwc", action="store_true",
                    help="every group NHWC and no fused pair (default: as compile_network builds it from the log)")
    ap.add_argument("--threads", type=int, default=None, help="ANSOR_NUM_THREADS (default: as set)")
    ap.add_argument("--number", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--min-repeat-ms", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of timing every task alone, the modes alternating (median)")
    ap.add_argument("--json", default=None, help="write every figure here")
    ns = ap.parse_args(argv)
    if ns.log is not None and not os.path.isfile(ns.log):
        ap.error(f"--log {ns.log}: no such file")
    if ns.threads is not None:
        os.environ["ANSOR_NUM_THREADS"] = str(ns.threads)  # before any kernel loads
    rep = measure(ns)
    from ansor.bench.report import emit  # noqa: PLC0415 - lazy, as the script's other imports

    emit(rep, markdown(rep), ns.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
