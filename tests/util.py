"""Helpers shared by tests that compile and run kernels."""
from __future__ import annotations

import numpy as np

from compute import reference
from compute.tensor import ComputeOp


def run_kernel(kernel, dag, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Call ``kernel`` with ``inputs`` for the placeholders and fresh (NaN-filled) outputs.

    Outputs start as NaN (or a sentinel for ints) so an unwritten element cannot pass by luck.
    """
    it = iter(inputs)
    args, outs = [], []
    for t in dag.tensors:
        if isinstance(t.op, ComputeOp):
            fill = np.nan if np.dtype(t.dtype).kind == "f" else (True if t.dtype == "bool" else 123)
            a = np.full(t.shape, fill, dtype=t.dtype)
            outs.append(a)
        else:
            a = next(it)
        args.append(a)
    kernel(*args)
    return outs


def assert_matches_reference(kernel, dag, inputs, rtol=1e-4, atol=1e-5, what="") -> None:
    expected = reference.evaluate(dag, inputs)
    got = run_kernel(kernel, dag, inputs)
    for e, g, t in zip(expected, got, [t for t in dag.tensors if isinstance(t.op, ComputeOp)]):
        if np.dtype(t.dtype).kind == "f":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"{what} output {t.name}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"{what} output {t.name}")


def graph_inputs(g, seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal arrays for every input of the network graph ``g``, by name."""
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in g.inputs.items()}


def assert_network_matches(lib, g, atol: float = 1e-4) -> dict[str, np.ndarray]:
    """``lib`` (a compiled ``g``) gives the graph reference's outputs, to ``atol`` times each
    output's largest magnitude; returns its outputs."""
    from ansor.graph import run  # the graph layer is heavier than the kernel helpers above

    x = graph_inputs(g)
    out, ref = lib.run(x), run(g, x)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=0, atol=atol * np.abs(ref[k]).max())
    return out


def assert_peers_match_reference(name: str, args: tuple) -> np.ndarray:
    """The benchmark's numpy and PyTorch formulations of a workload (``ansor.bench.peers``) give
    the reference's output on the suite's inputs; returns the reference output."""
    import torch

    from ansor.bench import suite as S

    dag = S.make_dag(name, args)
    inputs = S.make_inputs(dag)
    ref = reference.evaluate(dag, inputs)[-1]
    assert S.check_output(S.numpy_impl(name, args, inputs)(), ref) is None
    with torch.inference_mode():
        fn, tensors, to_numpy = S.torch_impl(name, args, inputs)
        assert S.check_output(to_numpy(fn(*tensors)), ref) is None
    return ref


def tiny_tune_argv(model: str, log, n_tasks: int, *flags: str) -> list[str]:
    """``ansor network tune MODEL FLAGS`` as a test runs it: 2 trials per task, 2 per round, a
    16-state population, single measurements trusted, seed 0, no closing comparison."""
    return ["network", "tune", model, *flags, "--trials", str(2 * n_tasks), "--per-round", "2",
            "--population", "16", "--remeasure-best", "1", "--log", str(log), "--seed", "0", "--rounds", "0"]


def benchmark_module(name: str):
    """The script ``benchmarks/<name>.py`` imported by path (``benchmarks/`` is not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
