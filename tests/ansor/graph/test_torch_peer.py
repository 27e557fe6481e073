"""The PyTorch eager peer (issue 16: latency beside onnxruntime and PyTorch): a graph as a torch
module computes what the graph reference does, with images kept channels-last."""
import numpy as np
import pytest
import torch

import ansor
from ansor.bench.network_compare import worker
from ansor.graph.torch_peer import UnsupportedForTorch, to_torch
from ansor.graph import GraphBuilder, run

from .test_onnx_light_models import LIGHT


def _feeds(g):
    rng = np.random.default_rng(0)
    return {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in g.inputs.items()}


def _check_torch(g, rtol=1e-4):
    x = _feeds(g)
    ref = run(g, x)
    with torch.inference_mode():
        outs = to_torch(g)(*[torch.from_numpy(v) for v in x.values()])
    for o, name in zip(outs, g.outputs):
        np.testing.assert_allclose(o.numpy(), ref[name], rtol=0, atol=rtol * np.abs(ref[name]).max())
    return x, ref


@pytest.mark.parametrize("name, kwargs", [("resnet-18", {"image_size": 32}), ("mobilenet-v2", {"image_size": 32}),
                                          ("bert-base-layer", {"seq_len": 8})])
def test_zoo_networks_in_torch(name, kwargs):
    _check_torch(ansor.networks.get(name, **kwargs))


def test_pools_with_asymmetric_padding_and_concat_of_images():
    b = GraphBuilder("pools")
    x = b.input("x", (1, 9, 9, 4))
    w = b.constant(np.random.default_rng(1).standard_normal((3, 3, 4, 8)).astype(np.float32), "w")
    y = b.relu(b.conv2d(x, w, padding=(0, 0, 1, 1)))
    a = b.avg_pool2d(y, 3, strides=2, padding=(0, 0, 1, 1), ceil_mode=True)
    m = b.max_pool2d(y, 3, strides=2, padding=(0, 0, 1, 1), ceil_mode=True)
    c = b.concat([a, m], axis=3)
    _check_torch(b.build(b.softmax(b.reshape(c, (1, -1)), axis=1)))


def test_a_light_onnx_model_with_lrn():
    g = ansor.frontend.from_onnx(f"{LIGHT}/light_bvlc_alexnet.onnx")
    _check_torch(g)


def test_worker_refuses_to_time_wrong_outputs(tmp_path):
    g = ansor.networks.get("bert-base-layer", seq_len=4)
    x = _feeds(g)
    data = tmp_path / "d.npz"
    np.savez(data, **{f"in{i}": v for i, v in enumerate(x.values())},
             **{f"out{i}": run(g, x)[o] + 1.0 for i, o in enumerate(g.outputs)})
    res = worker({"system": "torch", "model": "bert-base-layer", "options": {"seq_len": 4},
                  "data": str(data), "threads": 1})
    assert "outputs differ from the graph reference" in res["error"]


def test_unmapped_op_is_named():
    b = GraphBuilder("lrn1")
    x = b.input("x", (1, 4, 4, 8))
    g = b.build(b.lrn(x, 3, axis=1))
    with pytest.raises(UnsupportedForTorch, match="lrn over axis 1"):
        to_torch(g)(torch.zeros(1, 4, 4, 8))
