"""A zoo of whole networks built with ``GraphBuilder``, with deterministic random weights.

    g = ansor.networks.get("resnet-50", batch=1)
    ansor.networks.list()   # ['bert-base-layer', 'efficientnet-b0', 'mobilenet-v2', 'resnet-18', 'resnet-50']

CNNs are NHWC (input ``data`` of shape ``[batch, 224, 224, 3]``, ``image_size=`` changes it) and
return logits ``[batch, 1000]``; batch norm is folded into each conv (a conv, then a bias add),
as inference graphs are after import. Weights come from ``numpy.random.default_rng(seed)``:
He-normal convs (the last conv of each residual branch scaled down so the residual sum keeps its
scale, as zero-init-residual training would), so activations stay finite and non-zero through
the network. Nothing is downloaded.

``bert-base-layer`` is one BERT-base encoder layer (hidden 768, 12 heads, FFN 3072, GELU,
post-layer-norm): input ``data`` ``[batch, seq_len, 768]`` (``seq_len`` default 128), output the
same shape; weights N(0, 0.02) as BERT's initialiser.
"""
from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from compute.errors import InputError

from .graph import Graph, GraphBuilder, Var


class _Net:
    """Builder plus a seeded generator for the weights of one network."""

    def __init__(self, name: str, seed: int) -> None:
        self.b = GraphBuilder(name)
        self.rng = np.random.default_rng(seed)

    def he(self, shape: tuple[int, ...], fan_in: int, gain: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * gain * math.sqrt(2.0 / fan_in)).astype(np.float32)

    def conv(self, x: Var, cout: int, k: int, stride: int = 1, groups: int = 1, act: str | None = "relu",
             gain: float = 1.0, name: str = "conv") -> Var:
        """conv (BN folded: a bias) + optional activation, 'same' padding for odd k."""
        cin = x.shape[-1]
        w = self.he((k, k, cin // groups, cout), k * k * cin // groups, gain)
        bias = (self.rng.standard_normal(cout) * 0.01).astype(np.float32)
        y = self.b.conv2d(x, self.b.constant(w, f"{name}_w"), self.b.constant(bias, f"{name}_b"),
                          strides=stride, padding=k // 2, groups=groups, name=name)
        if act == "relu":
            return self.b.relu(y, name=f"{name}_relu")
        if act == "relu6":
            return self.b.relu6(y, name=f"{name}_relu6")
        if act == "swish":
            return self.swish(y, name)
        return y

    def swish(self, y: Var, name: str) -> Var:
        """SiLU, x * sigmoid(x), as an ONNX export writes it."""
        return self.b.mul(y, self.b.sigmoid(y, name=f"{name}_sigmoid"), name=f"{name}_swish")

    def classifier(self, x: Var, classes: int) -> Var:
        y = self.b.global_avg_pool(x)
        y = self.b.reshape(y, (x.shape[0], x.shape[-1]), name="flatten")
        w = (self.rng.standard_normal((classes, x.shape[-1])) / math.sqrt(x.shape[-1])).astype(np.float32)
        return self.b.dense(y, self.b.constant(w, "fc_w"), self.b.constant(np.zeros(classes, np.float32), "fc_b"),
                            name="fc")


def _resnet(depth: int, batch: int, image_size: int, seed: int, classes: int = 1000) -> Graph:
    blocks, bottleneck = {18: ([2, 2, 2, 2], False), 50: ([3, 4, 6, 3], True)}[depth]
    net = _Net(f"resnet-{depth}", seed)
    b = net.b
    x = b.input("data", (batch, image_size, image_size, 3))
    x = net.conv(x, 64, 7, 2, name="conv1")
    x = b.max_pool2d(x, 3, 2, 1, name="pool1")
    for stage, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for i in range(n):
            stride = 2 if stage > 0 and i == 0 else 1
            cout = width * 4 if bottleneck else width
            p = f"stage{stage + 1}_unit{i + 1}"
            if bottleneck:
                y = net.conv(x, width, 1, 1, name=f"{p}_conv1")
                y = net.conv(y, width, 3, stride, name=f"{p}_conv2")
                y = net.conv(y, cout, 1, 1, act=None, gain=0.5, name=f"{p}_conv3")
            else:
                y = net.conv(x, width, 3, stride, name=f"{p}_conv1")
                y = net.conv(y, cout, 3, 1, act=None, gain=0.5, name=f"{p}_conv2")
            sc = x if stride == 1 and x.shape[-1] == cout else net.conv(x, cout, 1, stride, act=None,
                                                                         name=f"{p}_sc")
            x = b.relu(b.add(y, sc, name=f"{p}_add"), name=f"{p}_relu")
    return b.build(net.classifier(x, classes))


def _inverted_residuals(net: _Net, x: Var, cfg: list[tuple[int, int, int, int, int]], act: str,
                        se: bool) -> Var:
    """MobileNet-V2's inverted residual blocks, EfficientNet's MBConv with ``se``: per entry
    (expansion, output channels, repeats, first stride, depthwise kernel), 1x1 expand (none at
    expansion 1), depthwise, optional squeeze-excite (the reduced width a quarter of the block's
    input channels, a sigmoid gate scaling the depthwise output per channel), 1x1 project, the
    residual where the shape allows."""
    b = net.b
    cin, k = x.shape[-1], 0
    for t, c, n, s, ks in cfg:
        for i in range(n):
            k += 1
            stride, p, hidden = (s if i == 0 else 1), f"block{k}", cin * t
            y = net.conv(x, hidden, 1, act=act, name=f"{p}_expand") if t != 1 else x
            y = net.conv(y, hidden, ks, stride, groups=hidden, act=act, name=f"{p}_dw")
            if se:
                g = b.global_avg_pool(y, name=f"{p}_se_pool")
                g = net.conv(g, max(1, cin // 4), 1, act=act, name=f"{p}_se_reduce")
                g = net.conv(g, hidden, 1, act=None, name=f"{p}_se_expand")
                y = b.mul(y, b.sigmoid(g, name=f"{p}_se_gate"), name=f"{p}_se_scale")
            use_res = stride == 1 and cin == c
            y = net.conv(y, c, 1, act=None, gain=0.5 if use_res else 1.0, name=f"{p}_project")
            x = b.add(x, y, name=f"{p}_add") if use_res else y
            cin = c
    return x


def _mobilenet_v2(batch: int, image_size: int, seed: int, classes: int = 1000) -> Graph:
    net = _Net("mobilenet-v2", seed)
    x = net.b.input("data", (batch, image_size, image_size, 3))
    x = net.conv(x, 32, 3, 2, act="relu6", name="conv1")
    cfg = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 32, 3, 2, 3), (6, 64, 4, 2, 3), (6, 96, 3, 1, 3),
           (6, 160, 3, 2, 3), (6, 320, 1, 1, 3)]
    x = _inverted_residuals(net, x, cfg, "relu6", se=False)
    x = net.conv(x, 1280, 1, act="relu6", name="conv_last")
    return net.b.build(net.classifier(x, classes))


def _efficientnet_b0(batch: int, image_size: int, seed: int, classes: int = 1000) -> Graph:
    """EfficientNet-B0: MBConv blocks with squeeze-excite (``_inverted_residuals``), SiLU, 3x3 and
    5x5 depthwise convs."""
    net = _Net("efficientnet-b0", seed)
    x = net.b.input("data", (batch, image_size, image_size, 3))
    x = net.conv(x, 32, 3, 2, act="swish", name="stem")
    cfg = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
           (6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]  # the B0 table
    x = _inverted_residuals(net, x, cfg, "swish", se=True)
    x = net.conv(x, 1280, 1, act="swish", name="head")
    return net.b.build(net.classifier(x, classes))


def _bert_layer(batch: int, seq_len: int, seed: int, hidden: int = 768, heads: int = 12, ffn: int = 3072) -> Graph:
    net = _Net("bert-base-layer", seed)
    b, rng = net.b, net.rng
    dh = hidden // heads

    def w(n: int, k: int, name: str) -> Var:  # dense weight [N, K], BERT's N(0, 0.02)
        return b.constant((rng.standard_normal((n, k)) * 0.02).astype(np.float32), name)

    def bias(n: int, name: str) -> Var:
        return b.constant(np.zeros(n, np.float32), name)

    def ln(x: Var, name: str) -> Var:
        return b.layer_norm(x, b.constant(np.ones(hidden, np.float32), f"{name}_gamma"),
                            b.constant(np.zeros(hidden, np.float32), f"{name}_beta"), eps=1e-12, name=name)

    data = b.input("data", (batch, seq_len, hidden))
    x = b.reshape(data, (batch * seq_len, hidden), name="tokens")

    def heads_of(t: Var, name: str, perm: tuple[int, ...]) -> Var:
        t = b.reshape(t, (batch, seq_len, heads, dh), name=f"{name}_split")
        return b.transpose(t, perm, name=f"{name}_heads")

    q = heads_of(b.dense(x, w(hidden, hidden, "q_w"), bias(hidden, "q_b"), name="q"), "q", (0, 2, 1, 3))
    k = heads_of(b.dense(x, w(hidden, hidden, "k_w"), bias(hidden, "k_b"), name="k"), "k", (0, 2, 3, 1))
    v = heads_of(b.dense(x, w(hidden, hidden, "v_w"), bias(hidden, "v_b"), name="v"), "v", (0, 2, 1, 3))
    scores = b.mul(b.matmul(q, k, name="scores"), np.float32(1.0 / math.sqrt(dh)), name="scores_scaled")
    probs = b.softmax(scores, axis=-1, name="probs")
    ctx = b.transpose(b.matmul(probs, v, name="context"), (0, 2, 1, 3), name="context_t")
    ctx = b.reshape(ctx, (batch * seq_len, hidden), name="context_merged")
    att = b.dense(ctx, w(hidden, hidden, "attn_out_w"), bias(hidden, "attn_out_b"), name="attn_out")
    x1 = ln(b.add(att, x, name="attn_residual"), "ln1")
    h = b.gelu(b.dense(x1, w(ffn, hidden, "ffn1_w"), bias(ffn, "ffn1_b"), name="ffn1"), name="ffn1_gelu")
    h = b.dense(h, w(hidden, ffn, "ffn2_w"), bias(hidden, "ffn2_b"), name="ffn2")
    x2 = ln(b.add(h, x1, name="ffn_residual"), "ln2")
    return b.build(b.reshape(x2, (batch, seq_len, hidden), name="output"))


# The CNNs halve the image 5 times (stride-2 stem, pool or conv, and 3 more stages): the image
# must be a multiple of 32 so every feature map is whole, down to 1 x 1 at 32.
_TOTAL_STRIDE = 32

_ZOO: dict[str, tuple[Callable[..., Graph], dict[str, Any]]] = {
    "resnet-18": (lambda batch, image_size, seed: _resnet(18, batch, image_size, seed), {"image_size": 224}),
    "resnet-50": (lambda batch, image_size, seed: _resnet(50, batch, image_size, seed), {"image_size": 224}),
    "mobilenet-v2": (_mobilenet_v2, {"image_size": 224}),
    "efficientnet-b0": (_efficientnet_b0, {"image_size": 224}),
    "bert-base-layer": (_bert_layer, {"seq_len": 128}),
}


def list_networks() -> builtins.list[str]:
    """The zoo's network names, sorted."""
    return sorted(_ZOO)


def get(name: str, batch: int = 1, seed: int = 0, **kwargs: Any) -> Graph:
    """The network ``name`` as a Graph. Options: ``image_size`` (CNNs, default 224; a multiple of
    32, the CNNs' total stride, so 32 is the smallest) or ``seq_len`` (BERT, default 128); ``seed``
    picks the weights. Bad names and options raise ``InputError`` (a ``ValueError``)."""
    if name not in _ZOO:
        raise InputError(f"unknown network {name!r}; available: {', '.join(list_networks())}")
    fn, defaults = _ZOO[name]
    bad = sorted(set(kwargs) - set(defaults))
    if bad:
        raise InputError(f"network {name!r} takes option(s) {', '.join(sorted(defaults))}, not {', '.join(bad)}")
    opts = {**defaults, **kwargs}
    for key, value in {"batch": batch, **opts}.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"network {name!r}: {key} must be a positive integer, got {value!r}")
    if "image_size" in opts and opts["image_size"] % _TOTAL_STRIDE:
        size = opts["image_size"]
        near = max(_TOTAL_STRIDE, size // _TOTAL_STRIDE * _TOTAL_STRIDE)
        raise InputError(f"network {name!r}: image_size must be a multiple of {_TOTAL_STRIDE} (the network "
                         f"halves it 5 times; the smallest that works is {_TOTAL_STRIDE}), got {size}; "
                         f"try {near}")
    return fn(batch=batch, seed=seed, **opts)


list = list_networks  # noqa: A001 - the public name is ansor.networks.list()

__all__ = ["get", "list", "list_networks"]
