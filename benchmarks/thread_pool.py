"""The kernels' thread pool (``measure/thread_pool.py``): per-call overhead, work split, and what
its idle threads cost the rest of the process.

    python benchmarks/thread_pool.py overhead     # an almost empty 2-thread kernel: us per call
    python benchmarks/thread_pool.py split        # untuned matmul and conv: static split vs dynamic chunks
    python benchmarks/thread_pool.py interleave   # an untuned conv interleaved with numpy's matmul
    python benchmarks/thread_pool.py kernels      # the untuned kernels of ``split`` as they are

``overhead``, ``kernels`` and ``interleave`` use nothing the pool added, so they also time
another checkout: ``PYTHONPATH=/path/to/checkout python benchmarks/thread_pool.py overhead``
(``PYTHONPATH`` comes before this script's own tree), e.g. one still running libgomp.
``split`` runs every setting in a fresh process (the pool is compiled once per process), the
settings alternating over ``--rounds``; ``CHUNKS_PER_THREAD = 1`` is the static split (one
ceil(extent / threads) chunk per thread). Threads: ``ANSOR_NUM_THREADS`` (default every CPU).
Figures from a shared machine are indicative only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout given there wins


def _timed(kernel, args, repeat: int = 15, min_repeat_ms: float = 100) -> float:
    """Median seconds per call, in native code (no Python per call)."""
    from measure import timer

    t = timer.Timer(kernel.address, kernel.arg_pointers(*args))
    return timer.time_calls(t, repeat=repeat, min_repeat_ms=min_repeat_ms, warmup_s=0.3).median


def overhead() -> dict:
    """``Out = A + B`` over 64 floats, 4 parallel rows of 16 vectorized lanes, on 1 and 2 threads."""
    import numpy as np

    from compute import expr as E
    from compute import loop_ir as L
    from measure.kernel import build_func

    rows, lanes = 4, 16
    a, b, out = (L.Buffer(n, (rows, lanes), "float32") for n in ("A", "B", "Out"))
    i, j = E.var("i"), E.var("j")
    body = L.For(i, rows, "parallel", L.For(j, lanes, "vectorized", L.Store(out, (i, j), a.load(i, j) + b.load(i, j))))
    k = build_func(L.PrimFunc("add64", (a, b, out), body))
    args = [np.ones((rows, lanes), np.float32) for _ in range(3)]
    res = {}
    for nt in (1, 2):
        k.num_threads = nt
        res[f"us_per_call_{nt}_threads"] = _timed(k, args) * 1e6
    import measure

    res["checkout"] = str(Path(measure.__file__).resolve().parent.parent)
    return res


def _untuned(name: str):
    import numpy as np

    import ansor
    from ansor.untuned import untuned_schedule
    from compute import reference
    from compute.ops import get_workload
    from compute.tensor import ComputeOp

    dag = ansor.ComputeDAG(get_workload(name).make())
    state, how = untuned_schedule(dag)
    k = ansor.build(state)
    it = iter(reference.random_inputs(dag, seed=0))
    args = [np.zeros(t.shape, t.dtype) if isinstance(t.op, ComputeOp) else next(it) for t in dag.tensors]
    return k, args, how


WORKLOADS = ("matmul", "conv2d_nhwc", "conv2d_bias_relu", "dense")


def split_one(chunks: int | None) -> dict:
    if chunks is not None:
        from measure import thread_pool

        thread_pool.CHUNKS_PER_THREAD = chunks  # before the first kernel compiles the pool
    out = {}
    for name in WORKLOADS:
        k, args, _ = _untuned(name)
        out[name] = _timed(k, args, repeat=9, min_repeat_ms=200)
    return out


def split(rounds: int) -> dict:
    per: dict[int, dict[str, list[float]]] = {1: {}, 4: {}}
    for _ in range(rounds):
        for chunks in per:
            r = subprocess.run([sys.executable, __file__, "split-one", str(chunks)], capture_output=True,
                               text=True, check=True)
            for name, sec in json.loads(r.stdout.splitlines()[-1]).items():
                per[chunks].setdefault(name, []).append(sec)
    return {name: {"static_ms": statistics.median(per[1][name]) * 1e3,
                   "dynamic4_ms": statistics.median(per[4][name]) * 1e3} for name in WORKLOADS}


def interleave(n: int) -> dict:
    """Seconds per call of the conv alone, of numpy's n x n matmul alone, and of the pair."""
    import numpy as np

    from measure import timer

    k, args, _ = _untuned("conv2d_nhwc")
    ptrs = k.arg_pointers(*args)
    fn = k._fn
    x = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)

    def conv():
        fn(*ptrs)

    def mm():
        x @ x

    def pair():
        fn(*ptrs)
        x @ x

    res = {}
    for label, f in (("conv_ms", conv), ("numpy_matmul_ms", mm), ("pair_ms", pair)):
        t = timer.time_calls(timer.python_calls(f), repeat=9, min_repeat_ms=200, warmup_s=0.3)
        res[label] = t.median * 1e3
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("overhead", "split", "interleave", "kernels", "split-one"))
    ap.add_argument("arg", nargs="?", type=int, help="split-one: chunks per thread (internal)")
    ap.add_argument("--rounds", type=int, default=3, help="split: alternating rounds of fresh processes")
    ap.add_argument("--n", type=int, default=600, help="interleave: numpy matmul size")
    ns = ap.parse_args()
    if ns.mode == "overhead":
        res = overhead()
    elif ns.mode == "split":
        res = split(ns.rounds)
    elif ns.mode == "split-one":
        res = split_one(ns.arg or 4)
    elif ns.mode == "kernels":
        res = {name: sec * 1e3 for name, sec in split_one(None).items()}
    else:
        res = interleave(ns.n)
    res_threads = os.environ.get("ANSOR_NUM_THREADS", "every CPU")
    if ns.mode != "split-one":
        print(f"# threads: {res_threads}", file=sys.stderr)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
