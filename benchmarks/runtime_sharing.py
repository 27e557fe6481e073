"""Sharing the machine: what the kernels' parallel runtime costs beside other work (issue 44).

Kernels run their parallel loops through the project's runtime (libgomp's ``GOMP_parallel`` up
to now, whose threads spin for milliseconds after each region: they take the cores from
whatever runs next in the process, and suffer when another process wants a core). Three parts,
each one fresh process per source tree per round, the trees alternating (``--trees OLD NEW``:
this script's code on each tree's library, ``tree_runs.py``), figures the median over rounds:

* ``overhead``: seconds per call of an almost-empty kernel, a float32 add of N elements
  (``--sizes``) with its loop cut into one chunk per thread, run in parallel, beside the same
  kernel run serially (the difference is the runtime's fork and join), timed natively
  (``measure.timer.Timer`` + ``time_calls``); and a compiled network of many small kernels
  (``--overhead-network``, MobileNet-V2 at 64x64 untuned by default): seconds per inference
  (``lib.benchmark``) divided by its kernel calls.
* ``interleave``: a parallel kernel of a few tenths of a millisecond (``--kernel``, its
  rule-based untuned schedule) alone, a numpy float32 matmul alone (``--numpy-n``, 600), and the
  two one after the other in one loop; the same with a PyTorch matmul (``--torch-n``, 512;
  PyTorch on the same thread count). Reported: the pair's time over the sum of the two alone
  (1.0: no cost from sharing the process; issue 44 asks at most 1.2).
* ``niced``: a compiled network (``--niced-network``, untuned or from ``--log``) and onnxruntime
  on the same graph as ONNX, each timed quiet and while one busy process at nice 19 runs on the
  machine; each system's slowdown (median loaded / median quiet) and ours over onnxruntime's.
  onnxruntime runs in this tree's process (it does not depend on the tree), in the same
  alternation. Every output is checked against the graph reference before it is timed
  (``ansor.bench.network_compare``); the busy process is killed on every exit path.

Every system gets ``--threads`` threads (default ``ANSOR_NUM_THREADS``, else 2). Output: a
Markdown table on stdout, everything (each round too) in ``--json``. The defaults keep two trees
under about six minutes; ``--rounds``, ``--repeat`` and ``--min-repeat-ms`` lengthen it.

Usage:
  python benchmarks/runtime_sharing.py [--trees OLD NEW] [--parts overhead interleave niced]
      [--rounds 3] [--threads 2] [--log LOG] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:  # imported by path (a test) rather than run as a script
    sys.path.insert(0, HERE)
from tree_runs import TreeRunError, check_trees, run_in_tree, tree_commit  # noqa: E402

PARTS = ("overhead", "interleave", "niced")
ORT = "onnxruntime"
# The busy neighbour: nice 19 (as ``nice -n 19 python -c "while True: pass"``), and killed by the
# kernel if this process dies without its cleanup (PR_SET_PDEATHSIG = 1, Linux).
_BUSY = ("import ctypes, os, signal\n"
         "try:\n    ctypes.CDLL(None).prctl(1, signal.SIGKILL)\nexcept (OSError, AttributeError):\n    pass\n"
         "os.nice(19)\nwhile True:\n    pass\n")


# ---- workers: run in a fresh process on one tree's library ----------------------------------------

def _time(run: Callable[[int], float], timing: dict) -> float:
    from measure.timer import time_calls  # noqa: PLC0415 - the tree's, in the worker

    return time_calls(run, repeat=int(timing["repeat"]), min_repeat_ms=float(timing["min_repeat_ms"]),
                      warmup_s=float(timing["warmup_s"])).median


def _add_kernel(n: int, threads: int, parallel: bool) -> tuple[Any, list]:
    """A float32 ``C = A + B`` of ``n`` elements, its loop split into ``threads`` chunks (the
    outer loop parallel or not, the chunk vectorized), built and checked."""
    import numpy as np  # noqa: PLC0415

    import ansor  # noqa: PLC0415
    from ansor.bench.inputs import check_output  # noqa: PLC0415
    from compute.ops import workloads as W  # noqa: PLC0415
    from measure.buffers import aligned_copy, aligned_zeros  # noqa: PLC0415
    from sketch.loop_state import State  # noqa: PLC0415

    dag = ansor.ComputeDAG(W.add((n,), (n,)))
    out = len(dag.tensors) - 1  # the stage of the sum (placeholders first)
    s = State.initial(dag)
    s = s.split(out, 0, [-(-n // threads)])
    s = s.vectorize(out, 1)
    if parallel:
        s = s.parallel(out, 0)
    kernel = ansor.build(s)
    rng = np.random.default_rng(0)
    a, b = (aligned_copy(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
    c = aligned_zeros((n,), "float32")
    kernel(a, b, c)
    err = check_output(c, a.astype(np.float64) + b)
    if err:
        raise RuntimeError(f"add of {n}: {err}")
    return kernel, [a, b, c]


def overhead_worker(sizes: list, threads: int, network: str, options: dict, timing: dict) -> dict:
    """Seconds per call of the parallel and serial add of each size; the network's seconds per
    inference, kernel calls, their quotient, and the executor's own share (``lib.benchmark``:
    the same calls with a native no-op for each kernel)."""
    from ansor.bench.inputs import check_output  # noqa: PLC0415
    from ansor.bench.network_compare import load_graph  # noqa: PLC0415
    from ansor.graph import run as reference_run  # noqa: PLC0415
    from ansor.graph.executor import compile_network  # noqa: PLC0415
    from measure.timer import Timer  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415

    out: dict = {}
    for n in sizes:
        for mode in ("parallel", "serial"):
            kernel, arrays = _add_kernel(int(n), threads, mode == "parallel")
            out[f"add_{n}_{mode}_s"] = _time(Timer(kernel.address, kernel.arg_pointers(*arrays)), timing)
    graph = load_graph(network, options)
    lib = compile_network(graph, verbose=False)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in graph.inputs.items()}
    got, ref = lib.run(feeds), reference_run(graph, feeds)
    for name in graph.outputs:
        err = check_output(got[name], ref[name])
        if err:
            raise RuntimeError(f"network {network}, output {name}: {err}")
    b = lib.benchmark(repeat=int(timing["repeat"]), min_repeat_ms=float(timing["min_repeat_ms"]),
                      warmup_ms=1e3 * float(timing["warmup_s"]))
    out.update(network_inference_s=b["mean"], network_kernels=b["kernels"],
               network_per_kernel_s=b["mean"] / max(1, b["kernels"]), network_executor_s=b["overhead"])
    return out


def interleave_worker(workload: str, args: list, numpy_n: int, torch_n: int, threads: int,
                      timing: dict, log: str | None = None) -> dict:
    """Seconds per call of the kernel (its best record in ``log``, else untuned), each matmul,
    and each pair (kernel; matmul) in one loop."""
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415 - imported first: the process is the same for every figure

    import ansor  # noqa: PLC0415
    from ansor.bench.inputs import check_output, kernel_arrays, make_dag, make_inputs  # noqa: PLC0415
    from ansor.bench.timing import time_callable  # noqa: PLC0415
    from ansor.untuned import untuned_schedule  # noqa: PLC0415
    from compute import reference  # noqa: PLC0415

    torch.set_num_threads(threads)
    dag = make_dag(workload, args)
    state, how = untuned_schedule(dag)
    if log:
        from ansor.records import best_record  # noqa: PLC0415
        from ansor.search_task import SearchTask  # noqa: PLC0415

        best = best_record(log, SearchTask(func=workload, args=tuple(args)))
        if best is None:
            raise RuntimeError(f"no record of {workload}{tuple(args)} in {log}")
        state, how = best[0].state, "log"
        dag = state.dag
    kernel = ansor.build(state)
    arrays = kernel_arrays(dag)
    kernel(*arrays)
    err = check_output(arrays[-1], reference.evaluate(dag, make_inputs(dag))[-1])
    if err:
        raise RuntimeError(f"kernel {workload}{tuple(args)}: {err}")
    # A bare ctypes call on checked pointers, as the suite times ours (ansor.bench.workers).
    call = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(arrays)))(kernel.address)
    ptrs = kernel.arg_pointers(*arrays)

    def ours() -> None:
        call(*ptrs)

    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((numpy_n, numpy_n)).astype(np.float32) for _ in range(2))
    c = np.empty_like(a)
    ta, tb = (torch.from_numpy(rng.standard_normal((torch_n, torch_n)).astype(np.float32)) for _ in range(2))
    tc = torch.empty_like(ta)

    def np_mm() -> None:
        np.matmul(a, b, out=c)

    def torch_mm() -> None:
        torch.mm(ta, tb, out=tc)

    with torch.inference_mode():
        np_mm()
        torch_mm()
        for what, got, want in (("numpy", c, a.astype(np.float64) @ b),
                                ("torch", tc.numpy(), ta.numpy().astype(np.float64) @ tb.numpy())):
            err = check_output(got, want)
            if err:
                raise RuntimeError(f"{what} matmul: {err}")
        t = {k: time_callable(fn, **timing)["seconds"] for k, fn in (
            ("kernel_s", ours), ("numpy_s", np_mm), ("kernel_numpy_s", lambda: (ours(), np_mm())),
            ("torch_s", torch_mm), ("kernel_torch_s", lambda: (ours(), torch_mm())))}
    return {**t, "schedule": how, "kernel_threads": kernel.num_threads,
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__, "numpy": np.__version__}


def network_worker(job: dict) -> dict:
    """One system of ``ansor.bench.network_compare`` (the tree's): outputs checked, then timed."""
    from ansor.bench.network_compare import worker  # noqa: PLC0415

    res = worker(job)
    if "error" in res:
        raise RuntimeError(f"{job['system']}: {res['error']}")
    return res


# ---- the driver ----------------------------------------------------------------------------------

def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _run(tree: str, function: str, args: list, env: dict, label: str) -> dict:
    """One worker; a failure is a round's ``{"error": ...}``, not the end of the run."""
    t0 = time.perf_counter()
    try:
        res = run_in_tree(tree, "runtime_sharing", function, args, env=env, timeout=900)
    except TreeRunError as e:
        _say(f"  {label}: {e}")
        return {"error": str(e)}
    _say(f"  {label}: {time.perf_counter() - t0:.1f} s")
    return res


def _medians(rounds: list[dict]) -> dict:
    """The median over rounds of every numeric figure the rounds without error have."""
    ok = [r for r in rounds if "error" not in r]
    keys = [k for k, v in (ok[0].items() if ok else ()) if isinstance(v, (int, float))]
    return {k: statistics.median(r[k] for r in ok) for k in keys}


def _alternate(systems: list[str], rounds: int, run_one: Callable[[str, int], dict]) -> dict:
    """``run_one(system, round)`` over the rounds, the order reversed every other round (no
    system always runs right after the same other one); per system its rounds and medians."""
    out: dict = {s: {"rounds": []} for s in systems}
    for r in range(rounds):
        for s in (systems if r % 2 == 0 else systems[::-1]):
            out[s]["rounds"].append(run_one(s, r))
    for s in systems:
        out[s]["median"] = _medians(out[s]["rounds"])
    return out


def _network_options(model: str, image_size: int | None) -> dict:
    from ansor.bench.network_compare import is_onnx_file  # noqa: PLC0415 - the driver's tree

    return {} if is_onnx_file(model) or image_size is None else {"image_size": image_size}


def part_overhead(ns: argparse.Namespace, trees: list[str], env: dict, timing: dict) -> dict:
    opts = _network_options(ns.overhead_network, ns.overhead_image_size)
    args = [ns.sizes, ns.threads, ns.overhead_network, opts, timing]
    return _alternate(trees, ns.rounds, lambda t, r: _run(t, "overhead_worker", args, env,
                                                         f"overhead round {r + 1} {t}"))


def part_interleave(ns: argparse.Namespace, trees: list[str], env: dict, timing: dict) -> dict:
    wl = ns.kernel_row
    args = [wl.workload, list(wl.args), ns.numpy_n, ns.torch_n, ns.threads, timing,
            ns.kernel_log and os.path.abspath(ns.kernel_log)]
    res = _alternate(trees, ns.rounds, lambda t, r: _run(t, "interleave_worker", args, env,
                                                        f"interleave round {r + 1} {t}"))
    for t in trees:
        m = res[t]["median"]
        for peer in ("numpy", "torch"):
            if m.get(f"kernel_{peer}_s"):
                m[f"{peer}_pair_over_sum"] = m[f"kernel_{peer}_s"] / (m["kernel_s"] + m[f"{peer}_s"])
    return {"kernel": wl.name, "args": list(wl.args), **res}


@contextlib.contextmanager
def busy_process(on: bool) -> Iterator[subprocess.Popen | None]:
    """One busy loop at nice 19 while the block runs (None if not ``on``); killed on any exit."""
    if not on:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", _BUSY])
    try:
        time.sleep(0.2)  # running before the first worker starts
        yield proc
    finally:
        proc.kill()
        proc.wait()


def part_niced(ns: argparse.Namespace, trees: list[str], env: dict, timing: dict) -> dict:
    from pathlib import Path  # noqa: PLC0415

    from ansor.bench.network_compare import write_job_data  # noqa: PLC0415 - the driver's tree

    opts = _network_options(ns.niced_network, ns.niced_image_size)
    systems = trees + [ORT]
    out: dict = {s: {"quiet": [], "loaded": []} for s in systems}
    with tempfile.TemporaryDirectory(prefix="ansor-sharing-") as tmp:
        files, onnx_error = write_job_data(ns.niced_network, opts, Path(tmp))
        if onnx_error:
            sys.exit(f"niced: {onnx_error}")
        base = {"model": ns.niced_network, "options": opts, **files, "threads": ns.threads,
                "log": ns.log and os.path.abspath(ns.log), "timing": timing}
        for r in range(ns.rounds):
            for phase in (("quiet", "loaded") if r % 2 == 0 else ("loaded", "quiet")):
                with busy_process(phase == "loaded"):
                    for s in (systems if r % 2 == 0 else systems[::-1]):
                        job = {**base, "system": ORT if s == ORT else "ansor"}
                        res = _run(ROOT if s == ORT else s, "network_worker", [job], env,
                                   f"niced round {r + 1} {phase} {s}")
                        out[s][phase].append(res.get("seconds") if "error" not in res else res)
    for s in systems:
        for phase in ("quiet", "loaded"):
            vals = [v for v in out[s][phase] if isinstance(v, float)]
            out[s][f"{phase}_s"] = statistics.median(vals) if vals else None
        q, lo = out[s]["quiet_s"], out[s]["loaded_s"]
        out[s]["slowdown"] = lo / q if q and lo else None
    ort = out[ORT]["slowdown"]
    for t in trees:
        mine = out[t]["slowdown"]
        out[t]["slowdown_over_onnxruntime"] = mine / ort if mine and ort else None
    return {"network": ns.niced_network, "options": opts, "log": ns.log, **out}


# ---- the report ----------------------------------------------------------------------------------

def _cell(value: float | None, scale: float = 1.0, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value * scale, fmt)


def _errors(rounds: list) -> list[str]:
    return sorted({r["error"] for r in rounds if isinstance(r, dict) and "error" in r})


def render(report: dict) -> str:
    """The Markdown tables of ``report`` (what ``main`` writes as JSON)."""
    m, trees, parts = report["machine"], report["trees"], report["parts"]
    names = {t: f"{os.path.basename(t.rstrip(os.sep)) or t}" + (f" ({c})" if (c := trees[t]) else "")
             for t in trees}
    lines = [f"# Runtime sharing: {m['cpu']} ({m['llvm_cpu']}), {report['threads']} threads, "
             f"{report['rounds']} rounds, {m['date']}", ""]
    lines += [f"- tree {names[t]}: `{t}`" for t in trees] + [""]
    head = ["| figure | " + " | ".join(names[t] for t in trees) + " |",
            "| --- |" + " ---: |" * len(trees)]
    errors: list[str] = []

    def row(label: str, key: str, part: dict, scale: float, fmt: str = ".3f") -> str:
        return f"| {label} | " + " | ".join(_cell(part[t]["median"].get(key), scale, fmt) for t in trees) + " |"

    if "overhead" in parts:
        p = parts["overhead"]
        lines += ["## Overhead per kernel call (median over rounds)", ""] + head
        for n in report["settings"]["sizes"]:
            lines.append(row(f"add of {n} floats, parallel (us)", f"add_{n}_parallel_s", p, 1e6))
            lines.append(row(f"add of {n} floats, serial (us)", f"add_{n}_serial_s", p, 1e6))
        net = report["settings"]["overhead_network"]
        lines += [row(f"{net}: per inference (ms)", "network_inference_s", p, 1e3),
                  row(f"{net}: kernel calls", "network_kernels", p, 1, ".0f"),
                  row(f"{net}: per kernel call (us)", "network_per_kernel_s", p, 1e6),
                  row(f"{net}: executor's own dispatch, per inference (us)", "network_executor_s", p, 1e6), ""]
        errors += [f"overhead, {names[t]}: {e}" for t in trees for e in _errors(p[t]["rounds"])]
    if "interleave" in parts:
        p, s = parts["interleave"], report["settings"]
        lines += [f"## A kernel ({p['kernel']}) interleaved with a matmul in one process", ""] + head
        lines.append(row("kernel alone (ms)", "kernel_s", p, 1e3))
        for peer, n in (("numpy", s["numpy_n"]), ("torch", s["torch_n"])):
            lines += [row(f"{peer} {n}x{n} matmul alone (ms)", f"{peer}_s", p, 1e3),
                      row(f"kernel; {peer} matmul (ms per pair)", f"kernel_{peer}_s", p, 1e3),
                      row(f"**pair / (kernel + {peer})**", f"{peer}_pair_over_sum", p, 1, ".2f")]
        lines.append("")
        errors += [f"interleave, {names[t]}: {e}" for t in trees for e in _errors(p[t]["rounds"])]
    if "niced" in parts:
        p = parts["niced"]
        net = p["network"] + (f" ({os.path.basename(p['log'])})" if p["log"] else " (untuned)")
        lines += [f"## {net} quiet and beside one busy process at nice 19 (median over rounds)", "",
                  "| system | quiet (ms) | loaded (ms) | slowdown | slowdown / onnxruntime's |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for key in [*trees, ORT]:
            e = p[key]
            lines.append(f"| {names.get(key, key)} | {_cell(e['quiet_s'], 1e3)} | {_cell(e['loaded_s'], 1e3)} "
                         f"| {_cell(e['slowdown'], 1, '.2f')} | {_cell(e.get('slowdown_over_onnxruntime'), 1, '.2f')} |")
            errors += [f"niced, {names.get(key, key)}: {x}" for x in _errors(e["quiet"] + e["loaded"])]
        lines.append("")
    if errors:
        lines += ["Errors:", ""] + [f"- {e}" for e in errors] + [""]
    return "\n".join(lines)


def _check_inputs(ns: argparse.Namespace, ap: argparse.ArgumentParser) -> None:
    """Bad names fail here, in one line, before minutes of timing; sets ``ns.kernel_row``."""
    from ansor.bench.network_compare import load_graph  # noqa: PLC0415 - the driver's tree
    from ansor.bench.workloads import parse_workloads  # noqa: PLC0415

    if "interleave" in ns.parts:
        found = parse_workloads(ns.kernel)  # a SystemExit naming the problem
        if len(found) != 1:
            ap.error(f"--kernel: name one workload, got {len(found)}")
        ns.kernel_row = found[0]
    for part, flag in (("overhead", "overhead"), ("niced", "niced")):
        if part in ns.parts:
            model = getattr(ns, f"{flag}_network")
            try:
                load_graph(model, _network_options(model, getattr(ns, f"{flag}_image_size")))
            except (ValueError, OSError, ImportError) as e:
                ap.error(f"--{flag}-network {model}: {e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", nargs="+", metavar="TREE", default=None,
                    help="source trees to compare (e.g. OLD NEW), alternating (default: this one)")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per tree and part")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("ANSOR_NUM_THREADS") or 2))
    ap.add_argument("--repeat", type=int, default=9, help="timed repeats per figure in a process")
    ap.add_argument("--min-repeat-ms", type=float, default=40.0, help="shortest repeat")
    ap.add_argument("--warmup-s", type=float, default=0.3, help="warm-up before each figure")
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024], help="overhead: add sizes")
    ap.add_argument("--overhead-network", default="mobilenet-v2", help="zoo name or .onnx file")
    ap.add_argument("--overhead-image-size", type=int, default=64, help="for a zoo CNN")
    # ~0.3 ms on 2 Zen 4 cores untuned (the grouped conv of the issue's figures runs ~10x its
    # tuned time untuned: pass it with --kernel-log)
    ap.add_argument("--kernel", default="conv2d_nhwc:1,28,28,64,64,3,3,1,1",
                    help="interleave: a benchmark row name or WORKLOAD:ARGS (as `ansor bench`)")
    ap.add_argument("--kernel-log", default=None, help="interleave: the kernel's best record from "
                    "this log (default: its rule-based untuned schedule)")
    ap.add_argument("--numpy-n", type=int, default=600)
    ap.add_argument("--torch-n", type=int, default=512)
    ap.add_argument("--niced-network", default="mobilenet-v2", help="zoo name or .onnx file")
    ap.add_argument("--niced-image-size", type=int, default=224, help="for a zoo CNN")
    ap.add_argument("--log", default=None, help="niced: tuning records for the network (default untuned)")
    ap.add_argument("--json", default=None, help="write every figure and round here")
    ns = ap.parse_args(argv)
    for name in ("rounds", "threads", "repeat", "numpy_n", "torch_n"):
        if getattr(ns, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if min(ns.sizes) < 1:
        ap.error("--sizes must be positive")
    for flag in ("log", "kernel_log"):
        path = getattr(ns, flag)
        if path is not None and not os.path.isfile(path):
            ap.error(f"--{flag.replace('_', '-')}: no such file {path}")
    if ROOT not in sys.path:  # the driver's own tree: argument checks, reference data, report
        sys.path.insert(0, ROOT)
    from ansor.bench.timing import machine_info, thread_env  # noqa: PLC0415

    trees = check_trees(ns.trees or [ROOT])
    _check_inputs(ns, ap)
    env = thread_env(ns.threads)
    timing = {"repeat": ns.repeat, "min_repeat_ms": ns.min_repeat_ms, "warmup_s": ns.warmup_s}
    report: dict = {"machine": machine_info(), "threads": ns.threads, "rounds": ns.rounds,
                    "trees": {t: tree_commit(t) for t in trees}, "timing": timing,
                    "settings": {k: getattr(ns, k) for k in (
                        "sizes", "overhead_network", "overhead_image_size", "kernel", "numpy_n",
                        "torch_n", "niced_network", "niced_image_size", "log", "kernel_log")}, "parts": {}}
    parts = {"overhead": part_overhead, "interleave": part_interleave, "niced": part_niced}
    t0 = time.perf_counter()
    # SIGTERM unwinds like Ctrl-C: the busy process and the running worker are killed on the way.
    before = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        for name in ns.parts:
            _say(f"{name}:")
            report["parts"][name] = parts[name](ns, trees, env, timing)
    finally:
        signal.signal(signal.SIGTERM, before)
    report["seconds"] = time.perf_counter() - t0
    from ansor.bench.report import emit  # noqa: PLC0415 - lazy, as the script's other imports

    emit(report, render(report), ns.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
