"""The machine's float32 FMA ceiling: the GFLOPS no kernel can beat, to put tuned figures in scale.

A loop of independent vector FMA chains (widest vector the target has, registers only, no
memory traffic) is compiled for the host CPU through our LLVM target and run on 1 and on N
threads at once (ctypes releases the GIL). FLOPs per iteration: chains x lanes x 2. The chains
must all live in registers: the count is the host's vector register file less 4 (24 of 32 zmm
with AVX-512, 12 of 16 ymm with AVX2; 24 chains in 16 registers spill and measured a third of the
ceiling on a Zen 3), which still covers FMA latency x throughput (4 x 2 on current x86 cores).
numpy's sgemm (a 2048^3 GEMM, OpenBLAS with the host's own kernel, same threads) is printed
beside it as the check: a ceiling below a known sgemm is a wrong ceiling.

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

from ansor.bench import timing  # noqa: E402
from measure import target  # noqa: E402

# Registers left for the loop's other values (the multiplicand, the counter's compare).
SPARE_REGISTERS = 4


def chains_for(num_vector_registers: int | None) -> int:
    """Independent accumulator chains that fit in the register file (8 at least: FMA latency 4 x
    2 FMA units)."""
    return max(8, (num_vector_registers or 16) - SPARE_REGISTERS)


def _ir(lanes: int, chains: int) -> str:
    v = f"<{lanes} x float>"
    lines = [f"declare {v} @llvm.fma.v{lanes}f32({v}, {v}, {v})",
             "define void @peak(i64 %n, ptr %x, ptr %out) {",
             "entry:",
             f"  %a = load {v}, ptr %x, align 4",
             "  br label %loop",
             "loop:",
             "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    for c in range(chains):
        lines.append(f"  %acc{c} = phi {v} [%a, %entry], [%nxt{c}, %loop]")
    for c in range(chains):
        lines.append(f"  %nxt{c} = call {v} @llvm.fma.v{lanes}f32({v} %acc{c}, {v} %a, {v} %a)")
    lines += ["  %i1 = add i64 %i, 1", "  %c = icmp ult i64 %i1, %n",
              "  br i1 %c, label %loop, label %exit", "exit:"]
    s = "%nxt0"
    for c in range(1, chains):
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
    chains = chains_for(target.host_hardware_params().num_vector_registers)
    mod = llvm.parse_assembly(_ir(lanes, chains))
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, target.target_machine())
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)(
        engine.get_function_address("peak"))
    x = (ctypes.c_float * lanes)(*([1e-7] * lanes))
    outs = [(ctypes.c_float * lanes)() for _ in range(threads)]
    flop_per_iter = chains * lanes * 2

    def run(n: int, k: int) -> None:
        fn(n, ctypes.addressof(x), ctypes.addressof(outs[k]))

    t0 = time.perf_counter()
    run(10_000_000, 0)  # warm-up and calibration
    n = int(10_000_000 * ns.seconds / max(time.perf_counter() - t0, 1e-3))
    result = {"cpu": target.host_cpu_name(), "lanes": lanes, "chains": chains}
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
    sgemm = timing.run_fresh(["-c", _SGEMM], threads, timeout=300, env=timing.worker_env())
    if "gflops" in sgemm:
        result["numpy_sgemm_gflops"] = sgemm["gflops"]
        result["numpy_blas"] = sgemm.get("blas")
        kernel = ", ".join(f"{b.get('internal_api')} {b.get('architecture')}" for b in sgemm.get("blas") or [])
        print(f"{threads} thread(s): numpy sgemm 2048^3 {sgemm['gflops']:.0f} GFLOPS ({kernel or 'BLAS unknown'})"
              + ("  <- above the ceiling: the ceiling is wrong" if sgemm["gflops"] > result[f"gflops_{threads}_threads"] else ""),
              flush=True)
    else:
        print(f"numpy sgemm: {sgemm.get('error')}", flush=True)
    print(json.dumps(result))
    return 0


# numpy's 2048^3 sgemm in a fresh process (timing.run_fresh: the given threads, OpenBLAS left to
# detect the CPU), best of 5 after a warm-up.
_SGEMM = """
import time, numpy as np
from ansor.bench.timing import emit_result, blas_kernels, time_callable
a = np.random.rand(2048, 2048).astype("float32"); b = np.random.rand(2048, 2048).astype("float32")
r = time_callable(lambda: a @ b, repeat=5, min_repeat_ms=100, warmup_s=0.5)
emit_result({"gflops": 2 * 2048 ** 3 / min(r["repeats"]) / 1e9, "blas": blas_kernels()})
"""


if __name__ == "__main__":
    sys.exit(main())
