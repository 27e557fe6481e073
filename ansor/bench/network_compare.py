"""End-to-end latency of a network: ours against onnxruntime and PyTorch eager, each in a fresh process.

``compare_network(model, ...)`` computes the graph reference's outputs on a fixed random input
once, then runs every system in its own fresh process (``timing.run_fresh``: the same number of
threads for every runtime), alternating systems over ``rounds`` rounds, and reports the median
over rounds. Each worker first checks its outputs against the reference (a wrong network's speed
means nothing) and then times one inference, inputs and outputs included, with the suite's
``time_callable``. ``write_job_data`` writes what the workers are given (inputs, reference
outputs, the ONNX file), for callers that run the workers themselves (``benchmarks/runtime_sharing.py``).

Systems: ``ansor`` (``compile_network`` with the records of ``log``, untuned schedules for the
rest), ``ansor-untuned`` (no records at all), ``ansor-no-rewrite`` (the records, without weight
layout rewrite), ``onnxruntime`` (the model file itself for an ``.onnx`` MODEL; for a zoo network the graph
written by ``ansor.graph.onnx_export``; default session options but the thread count), and
``torch`` (``graph.torch_peer.to_torch``: eager, channels-last images, ``inference_mode``).

Worker: ``python -m ansor.bench.network_compare JOB.json`` (``JOB``: system, model, options).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .timing import emit_result, job_timing, run_fresh, time_callable, worker_env

SYSTEMS = ("ansor", "onnxruntime", "torch")
# also accepted: "ansor-untuned", the network compiled without records (the "before" of a tuning run),
# and "ansor-no-rewrite", the records of ``log`` compiled without weight layout rewrite (every
# packed weight copied inside its kernel on each run)
# outputs are compared relative to their largest magnitude (float32 kernels, float64 reference)
MAX_REL_ERROR = 1e-3


def is_onnx_file(model: str) -> bool:
    """MODEL names an ONNX file: ends with .onnx, or is an existing file not named like a zoo
    network (as the command line decides: ``ansor.cli.common``)."""
    from ansor import networks  # noqa: PLC0415 - as below

    return model.endswith(".onnx") or (model not in networks.list_networks() and os.path.isfile(model))


def load_graph(model: str, options: dict | None = None) -> Any:
    """A zoo network (``ansor.networks`` name) or an ONNX file; ``options``: its keyword
    arguments (``networks.get``'s, or ``from_onnx``'s ``shape``/``batch``)."""
    from ansor import frontend, networks  # noqa: PLC0415 - the frontend imports onnx lazily itself

    if is_onnx_file(model):
        return frontend.from_onnx(model, **(options or {}))
    return networks.get(model, **(options or {}))


def _rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    if out.shape != ref.shape:
        return float("inf")
    return float(np.abs(out - ref).max() / (np.abs(ref).max() or 1.0))


def _system_fn(job: dict, graph: Any, feeds: dict[str, np.ndarray], threads: int):
    """A callable doing one inference on ``feeds``, returning the outputs in graph order."""
    system = job["system"]
    if system in ("ansor", "ansor-untuned", "ansor-no-rewrite", "ansor-guess"):
        from ansor.graph.executor import compile_network  # noqa: PLC0415 - worker-only

        # ansor-untuned: no record, the rule-based schedules; ansor-guess: no record, the
        # pre-trained model's zero-trial picks.
        log = job.get("log") if system not in ("ansor-untuned", "ansor-guess") else None
        untuned = "guess" if system == "ansor-guess" else job.get("untuned", "rules")
        lib = compile_network(graph, log_file=log, verbose=False,
                              layout_rewrite=system != "ansor-no-rewrite", untuned=untuned,
                              layouts=None if job.get("layouts") == "nhwc" else "auto",
                              fuse_pairs=None if job.get("fuse_pairs") == "none" else "auto",
                              fold_scales=job.get("fold_scales") != "none")
        return lambda: [v for v in lib.run(feeds).values()]
    if system == "onnxruntime":
        import onnxruntime as ort  # noqa: PLC0415 - optional peer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        sess = ort.InferenceSession(job["onnx_path"], opts, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        ort_feeds = dict(zip(names, feeds.values()))
        return lambda: sess.run(None, ort_feeds)
    if system == "torch":
        import torch  # noqa: PLC0415 - optional peer

        from ..graph.ir_types import numpy_dtype  # noqa: PLC0415 - worker-only
        from ..graph.torch_peer import to_torch  # noqa: PLC0415 - imports torch

        torch.set_num_threads(threads)
        module = to_torch(graph)
        # The peer computes in the graph's own dtypes: a half-precision boundary
        # (``Graph.io_dtypes``) is converted here, as the compiled module converts it.
        args = [torch.from_numpy(np.asarray(v, dtype=graph.type_of(n).dtype)) for n, v in feeds.items()]
        out_dtypes = [numpy_dtype(graph.boundary_dtype(o)) for o in graph.outputs]

        def run() -> list:
            with torch.inference_mode():
                return [o.numpy().astype(d, copy=False) for o, d in zip(module(*args), out_dtypes)]
        return run
    raise ValueError(f"unknown system {system!r}; known: {', '.join(SYSTEMS)}, ansor-untuned, "
                     "ansor-no-rewrite, ansor-guess")


def worker(job: dict) -> dict:
    """One system in this (fresh) process: check the outputs, then time one inference."""
    from ansor.graph.ir_types import numpy_dtype  # noqa: PLC0415 - the graph package is heavy
    threads = int(job["threads"])
    graph = load_graph(job["model"], job.get("options"))
    data = np.load(job["data"])
    # Inputs back in the dtype callers give (bfloat16 travels as float32: npz does not keep it).
    feeds = {n: data[f"in{i}"].astype(numpy_dtype(graph.boundary_dtype(n)), copy=False)
             for i, n in enumerate(graph.inputs)}
    if job["system"] == "onnxruntime" and any(graph.boundary_dtype(n) == "bfloat16" for n in graph.inputs):
        return {"error": "onnxruntime's Python API does not take numpy bfloat16 arrays"}
    try:
        fn = _system_fn(job, graph, feeds, threads)
        outs = fn()
    except ImportError as e:
        return {"error": f"not installed: {e}"}
    err = max(_rel_error(o, data[f"out{i}"]) for i, o in enumerate(outs))
    if not err <= MAX_REL_ERROR:
        return {"error": f"outputs differ from the graph reference (relative error {err:.2e})", "rel_error": err}
    t = time_callable(fn, **job_timing(job))
    return {"seconds": t["seconds"], "rel_error": err}


def write_job_data(model: str, options: dict | None, tmp: Path, onnx: bool = True) -> tuple[dict, str | None]:
    """What every worker of one comparison is given, written under ``tmp``: the graph's fixed
    random inputs and its reference outputs (``data.npz``) and, with ``onnx``, the graph as ONNX
    for onnxruntime (the model file itself for an ``.onnx`` MODEL). Returns the job fields naming
    them (``data``, ``onnx_path``) and why the ONNX could not be written (None if it was)."""
    from ansor.graph import run as reference_run  # noqa: PLC0415 - keeps the worker import light
    from ansor.graph.ir_types import numpy_dtype  # noqa: PLC0415 - as above

    graph = load_graph(model, options)
    rng = np.random.default_rng(0)
    # In the dtype callers give (float16 for a half-precision model: onnxruntime takes only that).
    feeds = {n: rng.standard_normal(t.shape).astype(numpy_dtype(graph.boundary_dtype(n)))
             for n, t in graph.inputs.items()}
    ref = reference_run(graph, feeds)
    data = Path(tmp) / "data.npz"
    wide = {"bfloat16": np.float32}  # exact; npz would store bfloat16 as raw bytes
    np.savez(data, **{f"in{i}": v.astype(wide.get(str(v.dtype), v.dtype)) for i, v in enumerate(feeds.values())},
             **{f"out{i}": ref[o].astype(wide.get(str(ref[o].dtype), ref[o].dtype))
                for i, o in enumerate(graph.outputs)})
    onnx_path = model if is_onnx_file(model) else str(Path(tmp) / "model.onnx")
    onnx_error = None
    if onnx and not is_onnx_file(model):
        try:
            from ansor.graph.onnx_export import export_onnx  # noqa: PLC0415 - needs onnx

            export_onnx(graph, onnx_path)
        except (ImportError, ValueError) as e:  # a peer that cannot run is a table entry
            onnx_error = f"cannot write the graph as ONNX: {e}"
    return {"data": str(data), "onnx_path": onnx_path}, onnx_error


def compare_network(model: str, options: dict | None = None, systems: Sequence[str] = SYSTEMS,
                    threads: int = 2, rounds: int = 3, log: str | None = None,
                    timing: dict | None = None, say: Any = None, untuned: str = "rules",
                    variants: dict[str, dict] | None = None, peers: Sequence[str] = ()) -> dict:
    """Median seconds per inference of each system over ``rounds`` alternating fresh-process
    rounds: ``{system: {"seconds": median or None, "rounds": [...], "error": str (if any)}}``.
    ``variants``: named compilations of our own instead of ``systems`` (name -> the job fields
    that make it, e.g. ``{"fuse_pairs": "none"}``, ``{"layouts": "nhwc"}`` or
    ``{"fold_scales": "none"}``), timed the same way, with the ``peers`` named (``"onnxruntime"``, ``"torch"``) in the same alternation."""
    if variants is not None:
        unknown = [p for p in peers if p not in SYSTEMS or p.startswith("ansor") or p in variants]
        if unknown:
            raise ValueError(f"compare_network peers must be peers of {', '.join(SYSTEMS)} not named as a "
                             f"variant, got {unknown[0]!r}")
        systems = [*variants, *peers]
    out: dict[str, dict] = {s: {"rounds": [], "seconds": None} for s in systems}
    with tempfile.TemporaryDirectory(prefix="ansor-net-") as tmp:
        files, onnx_error = write_job_data(model, options, Path(tmp), onnx="onnxruntime" in systems)
        if onnx_error is not None:
            out["onnxruntime"]["error"] = onnx_error
        base = {"model": model, "options": options or {}, **files, "threads": threads,
                "log": None if log is None else os.fspath(log),
                "timing": timing or {}, "untuned": untuned}
        for r in range(rounds):
            # alternate the order so no system always runs right after another's warm-up
            order = list(systems) if r % 2 == 0 else list(reversed(systems))
            for system in order:
                if "error" in out[system]:
                    continue
                job_file = Path(tmp) / f"job-{system}.json"
                fields = {"system": system} if variants is None or system not in variants \
                    else {"system": "ansor", **variants[system]}
                job_file.write_text(json.dumps({**base, **fields}))
                res = run_fresh(["-m", "ansor.bench.network_compare", str(job_file)], threads,
                                env=worker_env())
                if "error" in res:
                    out[system]["error"] = res["error"]
                    continue
                out[system]["rounds"].append(res["seconds"])
                if say is not None:
                    say(f"round {r + 1}/{rounds}: {system} {res['seconds'] * 1e3:.3f} ms")
    for s in systems:
        if out[s]["rounds"]:
            out[s]["seconds"] = statistics.median(out[s]["rounds"])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m ansor.bench.network_compare JOB.json", file=sys.stderr)
        return 2
    emit_result(worker(json.loads(Path(args[0]).read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
