"""The machine's float32 FMA ceiling: the GFLOPS no kernel can beat, to put tuned figures in scale.

A loop of 24 independent vector FMA chains (widest vector the target has, registers only, no
memory traffic) is compiled for the host CPU through our LLVM target and run on 1 and on N
threads at once (ctypes releases the GIL). FLOPs per iteration: 24 chains x lanes x 2.

Usage: ``python benchmarks/peak_flops.py [--threads N] [--seconds 1.0]``; prints JSON.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import llvmlite.binding as llvm  # noqa: E402

from measure import target  # noqa: E402

CHAINS = 24


def _ir(lanes: int) -> str:
    v = f"<{lanes} x float>"
    lines = [f"declare {v} @llvm.fma.v{lanes}f32({v}, {v}, {v})",
             "define void @peak(i64 %n, ptr %x, ptr %out) {",
             "entry:",
             f"  %a = load {v}, ptr %x, align 4",
             "  br label %loop",
             "loop:",
             "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    for c in range(CHAINS):
        lines.append(f"  %acc{c} = phi {v} [%a, %entry], [%nxt{c}, %loop]")
    for c in range(CHAINS):
        lines.append(f"  %nxt{c} = call {v} @llvm.fma.v{lanes}f32({v} %acc{c}, {v} %a, {v} %a)")
    lines += ["  %i1 = add i64 %i, 1", "  %c = icmp ult i64 %i1, %n",
              "  br i1 %c, label %loop, label %exit", "exit:"]
    s = "%nxt0"
    for c in range(1, CHAINS):
        lines.append(f"  %s{c} = fadd {v} {s}, %nxt{c}")
        s = f"%s{c}"
    lines += [f"  store {v} {s}, ptr %out, align 4", "  ret void", "}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=None, help="default: ANSOR_NUM_THREADS / all")
    ap.add_argument("--seconds", type=float, default=1.0, help="length of one timed run")
    ap.add_argument("--repeats", type=int, default=5)
    ns = ap.parse_args(argv)
    from measure.runtime import num_threads

    threads = ns.threads or num_threads()
    lanes = target.vector_bits() // 32
    mod = llvm.parse_assembly(_ir(lanes))
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, target.target_machine())
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)(
        engine.get_function_address("peak"))
    x = (ctypes.c_float * lanes)(*([1e-7] * lanes))
    outs = [(ctypes.c_float * lanes)() for _ in range(threads)]
    flop_per_iter = CHAINS * lanes * 2

    def run(n: int, k: int) -> None:
        fn(n, ctypes.addressof(x), ctypes.addressof(outs[k]))

    t0 = time.perf_counter()
    run(10_000_000, 0)  # warm-up and calibration
    n = int(10_000_000 * ns.seconds / max(time.perf_counter() - t0, 1e-3))
    result = {"cpu": target.host_cpu_name(), "lanes": lanes, "chains": CHAINS}
    for nt in sorted({1, threads}):
        rates = []
        for _ in range(ns.repeats):
            ts = [threading.Thread(target=run, args=(n, k)) for k in range(nt)]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            rates.append(nt * n * flop_per_iter / (time.perf_counter() - t0) / 1e9)
        result[f"gflops_{nt}_threads"] = statistics.median(rates)
        result[f"gflops_{nt}_threads_runs"] = rates
        print(f"{nt} thread(s): peak float32 FMA {statistics.median(rates):.0f} GFLOPS "
              f"(runs {', '.join(f'{r:.0f}' for r in rates)})", flush=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
