"""Depthwise convolutions in a network lower to the operator library's ``depthwise_conv2d_nhwc``
(the formulation its tuned kernels use), with the graph's HWIO weight read as the library's
[KH, KW, C, M] kernel, and still compute the graph reference."""
import numpy as np
import pytest

import ansor
from compute.compute_dag import ComputeDAG
from ansor.graph import GraphBuilder, run
from ansor.graph.plan import extract_tasks
from compute.ops import workloads


def _depthwise(mult, strides, with_tail):
    b = GraphBuilder()
    x = b.input("x", (1, 9, 9, 4))
    rng = np.random.default_rng(3)
    w = b.constant(rng.standard_normal((3, 3, 1, 4 * mult)).astype(np.float32), "w")
    bias = b.constant(rng.standard_normal(4 * mult).astype(np.float32), "bias") if with_tail else None
    y = b.conv2d(x, w, bias, strides=strides, padding=1, groups=4)
    return b.build(b.relu6(y) if with_tail else y)


@pytest.mark.parametrize("mult, strides", [(1, 1), (2, 2)])
def test_depthwise_task_is_the_library_depthwise_workload(mult, strides):
    (task,), _ = extract_tasks(_depthwise(mult, strides, with_tail=False))
    lib = ComputeDAG(workloads.depthwise_conv2d_nhwc(1, 9, 9, 4, 3, 3, stride=strides, padding=1, multiplier=mult))
    assert task.workload_key == lib.workload_key


@pytest.mark.parametrize("mult, strides", [(1, 1), (2, 2)])
def test_compiled_depthwise_matches_reference(mult, strides):
    g = _depthwise(mult, strides, with_tail=True)
    feed = {"x": np.random.default_rng(0).standard_normal((1, 9, 9, 4)).astype(np.float32)}
    out = ansor.compile_network(g, verbose=False).run(feed)[g.outputs[0]]
    np.testing.assert_allclose(out, run(g, feed)[g.outputs[0]], rtol=1e-5, atol=1e-5)


def test_mobilenet_v2_depthwise_convs_use_the_depthwise_op():
    g = ansor.networks.get("mobilenet-v2", image_size=32)
    n_dw = sum(1 for n in g.nodes if n.op == "conv2d" and n.attrs["groups"] > 1)
    tasks, weights = extract_tasks(g)
    dw = [(t, w) for t, w in zip(tasks, weights) if "depthwise_conv2d" in str(t.compute_dag)]
    assert n_dw > 0 and sum(w for _, w in dw) == n_dw


def test_exported_depthwise_network_loads_and_runs(tmp_path):
    # The weight is a constant read in the kernel's shape through a view; the exported plan
    # must rebuild that view.
    g = _depthwise(2, 1, with_tail=True)
    feed = {"x": np.random.default_rng(0).standard_normal((1, 9, 9, 4)).astype(np.float32)}
    lib = ansor.compile_network(g, verbose=False)
    lib.export(tmp_path / "m")
    out = ansor.load_module(tmp_path / "m").run(feed)[g.outputs[0]]
    np.testing.assert_allclose(out, run(g, feed)[g.outputs[0]], rtol=1e-5, atol=1e-5)
