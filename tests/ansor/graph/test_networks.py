"""The network zoo: every network builds deterministically, prints, and runs through the numpy
interpreter with finite, non-degenerate outputs; bad names and options get clear errors."""
from __future__ import annotations

import numpy as np
import pytest

import ansor
from ansor import networks
from ansor.graph import run


def _run(g, seed=0):
    ((name, t),) = g.inputs.items()
    x = np.random.default_rng(seed).standard_normal(t.shape).astype(np.float32)
    (out,) = run(g, {name: x}).values()
    return out


def test_list():
    assert ansor.networks.list() == ["bert-base-layer", "efficientnet-b0", "mobilenet-v2", "resnet-18", "resnet-50"]


def test_bert_layer():
    g = networks.get("bert-base-layer", seq_len=16)
    assert g.inputs["data"].shape == (1, 16, 768)
    counts = g.op_counts()
    assert counts["dense"] == 6 and counts["matmul"] == 2 and counts["layer_norm"] == 2 and counts["gelu"] == 1
    assert g.type_of("scores").shape == (1, 12, 16, 16)
    assert g.constants["ffn1_w"].shape == (3072, 768)
    out = _run(g)
    assert out.shape == (1, 16, 768) and np.isfinite(out).all()
    np.testing.assert_allclose(out.mean(axis=-1), 0, atol=1e-4)   # layer norm at the end
    np.testing.assert_allclose(out.std(axis=-1), 1, rtol=1e-3)
    assert "%probs = softmax(%scores_scaled, axis=3): f32[1, 12, 16, 16]" in str(g)


def test_bert_default_seq_len_and_batch():
    g = networks.get("bert-base-layer", batch=2)
    assert g.inputs["data"].shape == (2, 128, 768)


def test_mobilenet_v2():
    g = networks.get("mobilenet-v2")
    assert g.inputs["data"].shape == (1, 224, 224, 3)
    depthwise = [n for n in g.nodes if n.op == "conv2d" and n.attrs["groups"] > 1]
    assert len(depthwise) == 17 and all(n.attrs["groups"] == n.type.shape[-1] for n in depthwise)
    assert g.op_counts()["clip"] == 35 and g.op_counts()["conv2d"] == 52
    out = _run(g)
    assert out.shape == (1, 1000) and np.isfinite(out).all() and out.std() > 1e-3


def test_efficientnet_b0():
    g = networks.get("efficientnet-b0")
    counts = g.op_counts()
    # stem + 16 blocks (15 expand, 16 depthwise, 2 SE convs, 1 project each) + head
    assert counts["conv2d"] == 1 + 15 + 16 * 4 + 1 and counts["global_avg_pool"] == 17
    depthwise = [n for n in g.nodes if n.op == "conv2d" and n.attrs["groups"] > 1]
    assert sorted({g.type_of(n.inputs[1]).shape[0] for n in depthwise}) == [3, 5]
    assert g.type_of("block16_se_scale").shape == (1, 7, 7, 1152)
    assert g.type_of("block2_se_reduce").shape == (1, 1, 1, 4)  # a quarter of the block's input
    out = _run(networks.get("efficientnet-b0", image_size=64))
    assert out.shape == (1, 1000) and np.isfinite(out).all() and out.std() > 1e-3


def test_resnet18_small_image_and_determinism():
    g = networks.get("resnet-18", image_size=64)
    assert g.op_counts()["conv2d"] == 20
    a, b = _run(g), _run(networks.get("resnet-18", image_size=64))
    np.testing.assert_array_equal(a, b)  # fixed seed: same weights every time
    assert a.shape == (1, 1000) and np.isfinite(a).all() and a.std() > 1e-3
    c = _run(networks.get("resnet-18", image_size=64, seed=1))
    assert not np.allclose(a, c)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet-18", "resnet-50"])
def test_resnet_full_size(name):
    g = networks.get(name)
    assert g.op_counts()["conv2d"] == {"resnet-18": 20, "resnet-50": 53}[name]
    out = _run(g)
    assert out.shape == (1, 1000) and np.isfinite(out).all() and out.std() > 1e-3


def test_resnet50_builds_and_prints():
    g = networks.get("resnet-50", batch=2)
    text = str(g)
    assert text.startswith("graph resnet-50(%data: f32[2, 224, 224, 3]) {")
    assert "%fc = dense(%flatten, %fc_w): f32[2, 1000]" in text
    assert g.op_counts()["conv2d"] == 53


def test_bad_names_and_options():
    with pytest.raises(ValueError, match=r"unknown network 'resnet-19'; available: bert-base-layer, efficientnet-b0, mobilenet-v2"):
        networks.get("resnet-19")
    with pytest.raises(ValueError, match=r"network 'resnet-18' takes option\(s\) image_size, not seq_len"):
        networks.get("resnet-18", seq_len=3)
    with pytest.raises(ValueError, match=r"batch must be a positive integer, got 0"):
        networks.get("mobilenet-v2", batch=0)
    with pytest.raises(ValueError, match=r"image_size must be a multiple of 32 .*, got 100; try 96"):
        networks.get("resnet-50", image_size=100)
