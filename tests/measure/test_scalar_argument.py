"""A kernel argument of shape () (a network's scalar constant, e.g. BERT's 1/sqrt(d) scale) is
measured like any other: the runner's random inputs keep it 0-d (np.ascontiguousarray made it
shape (1,), and every candidate of such a task failed its argument check)."""
import numpy as np

import ansor
from compute import te
from compute.reference import random_inputs
from measure.builder import LocalBuilder
from measure.local import measure_batch
from measure.measure import MeasureErrorNo, MeasureInput
from measure.runner import LocalRunner


def _scaled_matmul():
    a = te.placeholder((8, 16), "float32", "A")
    b = te.placeholder((16, 8), "float32", "B")
    s = te.placeholder((), "float32", "scale")
    k = te.reduce_axis((0, 16), "k")
    c = te.compute((8, 8), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    d = te.compute((8, 8), lambda i, j: c[i, j] * s[()], name="D")
    return [a, b, s, d]


def test_random_inputs_keep_a_scalar_0d():
    shapes = [x.shape for x in random_inputs(_scaled_matmul())]
    assert shapes == [(8, 16), (16, 8), ()]


def test_a_task_with_a_scalar_argument_measures():
    task = ansor.SearchTask(tensors=_scaled_matmul())
    inp = MeasureInput(task, task.compute_dag.init_state())
    builder, runner = LocalBuilder(), LocalRunner(number=1, repeat=1, min_repeat_ms=0)
    try:
        res = measure_batch([inp], builder, runner)[0]
    finally:
        builder.close()
        runner.close()
    assert res.error_no == MeasureErrorNo.NO_ERROR, res.error_msg
    assert np.isfinite(res.mean_cost)
