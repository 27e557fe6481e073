"""PRelu (ansor/graph/ops/prelu.py) against onnxruntime: scalar, per-axis and per-channel slopes
on plain tensors, a per-channel slope after a convolution (the image stays NHWC and the slope
follows its channel axis), a slope computed at run time, and a slope that does not broadcast."""
import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx import helper

import ansor
from ansor.graph import run, to_onnx
from ansor.graph.torch_peer import to_torch

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


@pytest.mark.parametrize("slope_shape", [(1,), (7,), (5, 1), (2, 5, 7)])
def test_prelu_plain(slope_shape):
    g = check_everywhere([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": rand(2, 5, 7, low=-3, high=3)},
                         {"s": rand(*slope_shape, seed=3)})
    assert g.op_counts() == {"prelu": 1}


@pytest.mark.parametrize("slope_shape", [(5, 1, 1), (1,), (7,)])
def test_prelu_after_convolution_stays_nhwc(slope_shape):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["c", "s"], ["p"]),
             helper.make_node("Conv", ["p", "w2"], ["y"])]
    g = check_everywhere(nodes, {"x": rand(2, 3, 9, 7)},
                         {"w": rand(5, 3, 3, 3, seed=1), "s": rand(*slope_shape, seed=4), "w2": rand(4, 5, 1, 1, seed=2)},
                         rtol=1e-4)
    assert g.op_counts().get("transpose") == 2  # only at the graph's NCHW boundary


def test_prelu_slope_computed_at_run_time():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("PRelu", ["c", "s"], ["y"])]
    check_everywhere(nodes, {"x": rand(2, 3, 6, 5), "s": rand(5, 1, 1, seed=5)}, {"w": rand(5, 3, 1, 1, seed=1)},
                     rtol=1e-4)


def test_prelu_int64_against_numpy():
    # onnxruntime has no integer PRelu: numpy is the oracle; the export (Where/Less/Mul) runs in it.
    x = np.arange(-17, 18, dtype=np.int64).reshape(5, 7)
    s = np.array([3, -2, 0, 1, 5, 7, -1], np.int64)
    want = np.where(x < 0, x * s, x)
    g = from_onnx(model_of([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x}, {"s": s},
                           out_dtypes={"y": "int64"}))
    np.testing.assert_array_equal(run(g, {"x": x})["y"], want)
    np.testing.assert_array_equal(ansor.compile_network(g, verbose=False).run({"x": x})["y"], want)
    sess = ort.InferenceSession(to_onnx(g).SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess.run(None, {"input_0": x})[0], want)
    with torch.inference_mode():
        np.testing.assert_array_equal(to_torch(g)(torch.from_numpy(x))[0].numpy(), want)


def test_prelu_slope_must_broadcast_to_x():
    model = model_of([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": rand(1, 7)}, {"s": rand(3, 7)})
    with pytest.raises(OnnxImportError, match=r"PRelu.*slope|slope.*PRelu|PRelu.*broadcast"):
        from_onnx(model)


def test_prelu_fuses_into_a_blocked_convolution():
    # a per-channel PRelu is elementwise with a constant: it follows a conv into NCHW{x}c
    from ansor.graph.layouts import NHWC, blocked, why_not
    from ansor.graph.plan import plan_network
    from measure.target import host_hardware_params

    c = 2 * host_hardware_params().vector_lanes
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["c", "s"], ["y"])]
    x = rand(1, c, 5, 5)
    g = from_onnx(model_of(nodes, {"x": x}, {"w": rand(c, c, 3, 3, seed=1), "s": rand(c, 1, 1, seed=2)}))
    groups = plan_network(g).groups
    lays = [blocked(c // 2) if grp.group.nodes[0].op == "conv2d" else NHWC for grp in groups]
    assert [[n.op for n in grp.group.nodes] for grp, lay in zip(groups, lays) if lay != NHWC] == [["conv2d", "prelu"]]
    assert all(why_not(grp.group, g, lay) is None for grp, lay in zip(groups, lays))
    got = ansor.compile_network(g, layouts=lays, verbose=False).run({"x": x})["y"]
    np.testing.assert_allclose(got, run(g, {"x": x})["y"], rtol=1e-5, atol=1e-5)
