"""Weight layout rewrite, measured: one log compiled with ``layout_rewrite`` on and off, end to end,
and per task the best schedule's kernel with its weight pack inside (copied on every call) and
outside (the weight packed once, as ``compile_network`` does by default).

End to end: both modules are compiled in this process, checked against the graph reference, then
timed alternately (``NetworkModule.benchmark``, ``--rounds`` rounds), median over rounds. Per
task: every task whose best record packs a constant input; both kernels get the same random
inputs (the weight packed exactly for the rewritten one) and are timed alternately
(``Kernel.benchmark``), median over rounds. The CPU (LLVM's name) and thread count are printed.

Usage:
  python benchmarks/layout_rewrite.py MODEL --log LOG [--image-size N] [--seq-len N]
      [--rounds 5] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import llvmlite.binding as llvm  # noqa: E402
import numpy as np  # noqa: E402

import ansor  # noqa: E402
from ansor.bench.network_compare import load_graph  # noqa: E402
from ansor.graph import run as reference_run  # noqa: E402
from ansor.graph.tasks import extract_tasks  # noqa: E402
from ansor.records import best_record  # noqa: E402
from compute.reference import random_inputs  # noqa: E402
from compute.tensor import ComputeOp  # noqa: E402
from measure.runtime import num_threads  # noqa: E402
from sketch.layout_rewrite import pack_arguments, rewritable_packs  # noqa: E402


def end_to_end(graph, log: str, rounds: int) -> dict:
    libs = {on: ansor.compile_network(graph, log, verbose=False, layout_rewrite=on) for on in (True, False)}
    rng = np.random.default_rng(0)
    x = {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in graph.inputs.items()}
    ref = reference_run(graph, x)
    errors = {}
    for on, lib in libs.items():
        out = lib.run(x)
        errors[on] = max(float(np.abs(out[k] - ref[k]).max() / (np.abs(ref[k]).max() or 1.0)) for k in ref)
    times: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            times[on].append(libs[on].benchmark(repeat=3, min_repeat_ms=100, warmup_ms=100)["mean"])
    packed_kernels = sum(1 for s in libs[True]._steps if s.kernel.packed_args)
    return {"rewrite_ms": 1e3 * statistics.median(times[True]),
            "no_rewrite_ms": 1e3 * statistics.median(times[False]),
            "rounds_rewrite_ms": [1e3 * t for t in times[True]],
            "rounds_no_rewrite_ms": [1e3 * t for t in times[False]],
            "rel_error": {"rewrite": errors[True], "no_rewrite": errors[False]},
            "kernel_calls_reading_packed_weights": packed_kernels, "kernel_calls": len(libs[True]._steps)}


def per_task(graph, log: str, rounds: int) -> list[dict]:
    tasks, weights = extract_tasks(graph)
    rows = []
    for ti, (t, w) in enumerate(zip(tasks, weights)):
        best = best_record(log, t)
        if best is None:
            continue
        state = best[0].state
        packs = rewritable_packs(state, t.constant_inputs)
        if not packs:
            continue
        inside = ansor.build(state)
        outside = ansor.build(state, layout_rewrite_inputs=t.constant_inputs)
        dag = t.compute_dag
        ins = random_inputs(dag, seed=0)
        outs = [np.zeros(x.shape, x.dtype) for x in dag.tensors if isinstance(x.op, ComputeOp)]
        args_in = ins + outs
        args_out = pack_arguments(ins, outside.packed_args) + [o.copy() for o in outs]
        inside(*args_in)
        outside(*args_out)
        same = all(np.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in zip(args_in[len(ins):], args_out[len(ins):]))
        t_in, t_out = [], []
        for r in range(rounds):
            order = ((inside, args_in, t_in), (outside, args_out, t_out))
            for k, args, acc in (order if r % 2 == 0 else order[::-1]):
                acc.append(k.benchmark(*args, repeat=3, min_repeat_ms=30, warmup_ms=50))
        sid, p = next(iter(packs.items()))
        rows.append({"task": ti, "desc": t.desc, "weight": w,
                     "pack_at": state.stages[sid].compute_at, "block": p.block,
                     "weight_shape": list(p.src_shape), "packed_shape": list(p.packed_shape),
                     "inside_ms": 1e3 * statistics.median(t_in), "outside_ms": 1e3 * statistics.median(t_out),
                     "same_outputs": same})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--log", required=True)
    ap.add_argument("--image-size", type=int, default=None)
    ap.add_argument("--seq-len", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    opts = {k: v for k, v in (("image_size", args.image_size), ("seq_len", args.seq_len)) if v is not None}
    graph = load_graph(args.model, opts)
    cpu = llvm.get_host_cpu_name()
    print(f"{args.model} {opts or ''} on {cpu}, {num_threads()} thread(s), log {args.log}")
    tasks = per_task(graph, args.log, args.rounds)
    print("| task | subgraph | weight | pack at | block | pack inside (ms) | pack outside (ms) | speed-up |")
    for r in tasks:
        print(f"| {r['task']} | {r['desc']} | {r['weight']} | {r['pack_at']} | {r['block']} | "
              f"{r['inside_ms']:.3f} | {r['outside_ms']:.3f} | {r['inside_ms'] / r['outside_ms']:.2f}x |"
              + ("" if r["same_outputs"] else " OUTPUTS DIFFER"))
    e2e = end_to_end(graph, args.log, args.rounds)
    print(f"end to end (median of {args.rounds} alternating rounds): layout rewrite on "
          f"{e2e['rewrite_ms']:.3f} ms, off {e2e['no_rewrite_ms']:.3f} ms "
          f"({e2e['no_rewrite_ms'] / e2e['rewrite_ms']:.2f}x); {e2e['kernel_calls_reading_packed_weights']} "
          f"of {e2e['kernel_calls']} kernel calls read packed weights; relative errors {e2e['rel_error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "options": opts, "cpu": cpu, "threads": num_threads(),
                       "log": args.log, "rounds": args.rounds, "tasks": tasks, "end_to_end": e2e}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
