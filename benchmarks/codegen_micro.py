"""Micro-benchmarks of the LLVM backend: compile time of a tiled GEMM as Ansor would generate it,
and the fork/join overhead of a parallel loop. Not a test; run ``python benchmarks/codegen_micro.py``.

Reports medians: codegen / parse / O3 / object emission times, the IR size, GEMM throughput,
and for the parallel loop the per-call time with 1 and 2 threads against the serial kernel.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["ANSOR_CACHE_DIR"] = "off"  # this times the compiler: every compile must run LLVM

from compute import expr as E  # noqa: E402
from compute import loop_ir as L  # noqa: E402
from measure.kernel import build_func, compile_object  # noqa: E402


def tiled_gemm(M: int = 512, N: int = 512, K: int = 512, ti: int = 4, tj: int = 32, tk: int = 4) -> L.PrimFunc:
    """C = A @ B: fused parallel outer tile loop, local accumulator tile (cache_write), reduction
    split with an unrolled inner part, unrolled rows and vectorized columns."""
    A = L.Buffer("A", (M, K), "float32")
    B = L.Buffer("B", (K, N), "float32")
    C = L.Buffer("C", (M, N), "float32")
    acc = L.Buffer("C.local", (ti, tj), "float32", scope="local")
    nj = N // tj
    f, ii, ji, ko, ki = (E.var(n) for n in ("io.jo.fused", "ii", "ji", "ko", "ki"))
    io, jo = E.binary("floordiv", f, nj), E.binary("floormod", f, nj)
    row, col = io * ti + ii, jo * tj + ji
    k = ko * tk + ki
    init = L.For(ii, ti, "unrolled", L.For(ji, tj, "vectorized", L.Store(acc, (ii, ji), E.const(0.0))))
    update = L.For(ko, K // tk, "serial", L.For(ki, tk, "unrolled", L.For(ii, ti, "unrolled", L.For(
        ji, tj, "vectorized",
        L.Store(acc, (ii, ji), acc.load(ii, ji) + A.load(row, k) * B.load(k, col))))))
    write = L.For(ii, ti, "unrolled", L.For(ji, tj, "vectorized", L.Store(C, (row, col), acc.load(ii, ji))))
    body = L.For(f, (M // ti) * nj, "parallel", L.Allocate(acc, L.seq(init, update, write)))
    return L.PrimFunc("tiled_gemm", (A, B, C), body)


def bench_compile(reps: int = 7) -> None:
    func = tiled_gemm()
    compile_object(func)  # warm the target machine and pass builder
    rows = [compile_object(func) for _ in range(reps)]
    ir_lines = len(rows[0].llvm_ir.splitlines())
    print(f"tiled GEMM 512^3 (tile 4x32, k-unroll 4): {ir_lines} IR lines, median of {reps}:")
    for key in ("codegen", "parse", "optimize", "emit"):
        print(f"  {key:9s} {statistics.median(r.timings[key] for r in rows) * 1e3:7.2f} ms")
    print(f"  total     {statistics.median(r.compile_seconds for r in rows) * 1e3:7.2f} ms")
    k = build_func(func)
    a = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((512, 512)).astype(np.float32)
    c = np.zeros((512, 512), np.float32)
    k(a, b, c)
    err = np.abs(c - a @ b).max()
    for nt in (1, 2):
        k.num_threads = nt
        t = k.benchmark(a, b, c, repeat=5)
        print(f"  run {nt} thread(s): {t * 1e3:.3f} ms = {2 * 512 ** 3 / t / 1e9:.1f} GFLOP/s (max err {err:.1e})")


def elementwise(n_outer: int, n_inner: int, kind: str) -> L.PrimFunc:
    X = L.Buffer("X", (n_outer, n_inner), "float32")
    Y = L.Buffer("Y", (n_outer, n_inner), "float32")
    o, v = E.var("o"), E.var("v")
    body = L.For(o, n_outer, kind, L.For(v, n_inner, "vectorized",
                                         L.Store(Y, (o, v), E.call("tanh", X.load(o, v)) * 1.5 + X.load(o, v))))
    return L.PrimFunc(f"ew_{kind}", (X, Y), body)


def bench_parallel() -> None:
    outer, inner = 512, 64  # 32768 tanh: ~10 us single-threaded
    serial = build_func(elementwise(outer, inner, "serial"))
    par = build_func(elementwise(outer, inner, "parallel"))
    x = np.random.default_rng(0).standard_normal((outer, inner)).astype(np.float32)
    y = np.zeros_like(x)
    ts = serial.benchmark(x, y, repeat=7, min_repeat_ms=100)
    print(f"parallel loop overhead ({outer}x{inner} tanh elementwise):")
    print(f"  serial kernel             {ts * 1e6:8.2f} us")
    for nt in (1, 2):
        par.num_threads = nt
        tp = par.benchmark(x, y, repeat=7, min_repeat_ms=100)
        print(f"  parallel, {nt} thread(s)     {tp * 1e6:8.2f} us  (overhead vs ideal "
              f"{(tp - ts / nt) * 1e6:+.2f} us)")
    tiny = build_func(elementwise(2, 16, "parallel"))
    xt, yt = np.ones((2, 16), np.float32), np.zeros((2, 16), np.float32)
    tiny.num_threads = 2
    print(f"  empty-ish 2-thread region {tiny.benchmark(xt, yt, repeat=7, min_repeat_ms=100) * 1e6:8.2f} us "
          "(fork/join + ctypes call)")
    tiny.num_threads = 1
    print(f"  same, 1 thread            {tiny.benchmark(xt, yt, repeat=7, min_repeat_ms=100) * 1e6:8.2f} us")


if __name__ == "__main__":
    t0 = time.perf_counter()
    bench_compile()
    bench_parallel()
    print(f"(benchmark wall time {time.perf_counter() - t0:.1f} s)")
