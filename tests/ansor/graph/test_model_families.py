"""Today's model families (issue 42 item 4) imported from ONNX, compiled and checked against
onnxruntime.

The models are ``tests/models/<family>.onnx``, exported from the tiny plain-PyTorch definitions
of ``tests/models/families.py`` by ``tests/models/export_families.py`` (committed: no export, no
torch here). Each has a dynamic batch axis; the shape the tests use is in its metadata
(``ansor_test_shape``; ``ansor_test_high`` bounds integer ids). A family is imported with that
shape (``ansor.frontend.from_onnx``), compiled untuned (``ansor.compile_network``), run on seeded
random inputs and compared with onnxruntime on the same inputs: max |ours - onnxruntime| must be
below 1e-4 times max |onnxruntime| (relative to the output's scale). Each family also imports
at batch 3, checked with the graph's numpy reference (no compilation).

Untuned, a family takes 2-9 s here (import + compile + run, cold compile cache, on a shared
2-core machine), so all eight stay in the fast suite (about 45 s together once they import).

A family whose ONNX operators the importer lacks today is ``xfail(strict=True)`` on the import
error, naming the operators: once they land the test passes, strict xfail turns that into a
failure, and the mark must go. The slow test tunes each family for one trial per task through
the task scheduler (as ``ansor network tune`` does), then compiles from the log (strict: every
task from a tuned record) and checks again.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ansor
from ansor.frontend.onnx import OnnxImportError

MODELS = Path(__file__).resolve().parents[2] / "models"
RTOL = 1e-4

# What each family lacks today, in the order the importer meets it (a later need is hidden by
# an earlier one: "Gather of non-constant data" is e.g. the q/k/v pick of nn.MultiheadAttention).
LACKS = {
    "mobilenet_v3": None,
    "efficientnet": None,
    "convnext": None,
    "vit": None,
    "gpt2": None,
    "unet": None,
    "deeplab": None,
    "whisper_encoder": None,
}


def _params(extra_marks=()):
    out = []
    for name, lacks in LACKS.items():
        marks = list(extra_marks)
        if lacks is not None:
            marks.append(pytest.mark.xfail(strict=True, raises=OnnxImportError, reason=f"needs ONNX {lacks}"))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def _model(name: str):
    """The family's file, its input's name, test shape and (for ids) exclusive upper bound."""
    path = MODELS / f"{name}.onnx"
    model = onnx.load(str(path))
    meta = {p.key: p.value for p in model.metadata_props}
    (inp,) = model.graph.input
    assert inp.type.tensor_type.shape.dim[0].dim_param == "batch"  # exported with a dynamic batch
    shape = tuple(int(d) for d in meta["ansor_test_shape"].split(","))
    high = int(meta["ansor_test_high"]) if "ansor_test_high" in meta else None
    return path, inp.name, shape, high


def _check(run, path: Path, inp: str, shape: tuple[int, ...], high: int | None, seed: int = 0) -> None:
    """``run({input: x})`` (a compiled network's, or the graph's numpy reference) against
    onnxruntime on a seeded input."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, high, shape, dtype=np.int64) if high is not None \
        else rng.standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = sess.run(None, {inp: x})
    got = run({inp: x})
    assert len(got) == len(want)
    for (out_name, g), w in zip(got.items(), want):
        assert g.shape == w.shape and g.dtype == w.dtype, (out_name, g.shape, w.shape)
        err = float(np.max(np.abs(g - w)) / np.max(np.abs(w)))
        assert err < RTOL, f"{path.name} output {out_name}: relative error {err:.2e}"


@pytest.mark.parametrize("name", _params())
def test_family_matches_onnxruntime(name):
    path, inp, shape, high = _model(name)
    graph = ansor.frontend.from_onnx(str(path), shape={inp: shape})
    _check(ansor.compile_network(graph, verbose=False).run, path, inp, shape, high)


@pytest.mark.parametrize("name", _params())
def test_family_imports_at_another_batch(name):
    # the batch axis is dynamic: any batch imports (the reshapes' shapes are computed from it);
    # checked with the graph's numpy reference, which needs no compilation
    path, inp, shape, high = _model(name)
    shape = (3, *shape[1:])
    graph = ansor.frontend.from_onnx(str(path), shape={inp: shape})
    assert tuple(graph.inputs[inp].shape) == shape
    _check(lambda feeds: ansor.graph.run(graph, feeds), path, inp, shape, high, seed=1)


def _tune(plan, log: Path, trials: int, only: set[int] | None = None):
    """One round-robin pass of the task scheduler (one trial per task, resumed from ``log``);
    ``only``: the task indices to tune (the others keep their records)."""
    from ansor.task_scheduler import TaskScheduler
    from sketch.search_policy import SearchParams

    flt = None if only is None else (lambda i, _task: i in only)
    return TaskScheduler(plan.tasks, plan.weights, strategy="round-robin", seed=0, remeasure_best=1,
                         callbacks=[], task_filter=flt).tune(
        ansor.TuningOptions(num_measure_trials=trials, num_measures_per_round=1, log_file=log, verbose=0,
                            seed=0, search_params=SearchParams(population_size=16, num_generations=1,
                                                               init_min_population=4)))


@pytest.mark.parametrize("name", _params([pytest.mark.slow]))
def test_tuned_family_matches_onnxruntime(name, tmp_path):
    from ansor.graph.plan import plan_network

    path, inp, shape, high = _model(name)
    graph = ansor.frontend.from_onnx(str(path), shape={inp: shape})
    plan = plan_network(graph)
    log = tmp_path / f"{name}.json"
    n = len(plan.tasks)
    res = _tune(plan, log, n)
    assert res.task_trials == [1] * n
    for _ in range(2):  # a measurement may fail on a loaded machine: such a task gets another trial
        missing = {i for i, cost in enumerate(res.best_costs) if cost is None}
        if not missing:
            break
        res = _tune(plan, log, len(missing), missing)
    # strict: every task runs a schedule from the log (UntunedTaskError names any that has none)
    _check(ansor.compile_network(plan, log_file=log, verbose=False, strict=True).run, path, inp, shape, high)
