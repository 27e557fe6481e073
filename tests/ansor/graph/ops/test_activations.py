"""The activations of ansor/graph/ops/activations.py against onnxruntime: each op (and each of its
attributes) alone on an odd shape, all of them between convolutions where they run on NHWC
images, and the numerically delicate ends (softplus of large |x|, the ELU family near 0)
element by element against float64 numpy."""
import numpy as np
import pytest
from onnx import helper

import ansor
from ansor.frontend import from_onnx

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of

CASES = [
    ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.37}),
    ("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", {}),
    ("Elu", {}), ("Elu", {"alpha": 0.5}),
    ("Selu", {}), ("Selu", {"alpha": 1.5, "gamma": 2.0}),
    ("Celu", {}), ("Celu", {"alpha": 2.5}),
    ("Softplus", {}), ("Mish", {}),
]


@pytest.mark.parametrize("op,attrs", CASES, ids=[f"{o}-{'-'.join(a) or 'default'}" for o, a in CASES])
def test_activation_plain(op, attrs):
    x = rand(2, 5, 7, low=-6, high=6)
    g = check_everywhere([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, opset=18)
    assert [n.op for n in g.nodes] == [op.lower().replace("relu", "_relu").replace("hard", "hard_")]
    for k, v in attrs.items():
        assert g.nodes[0].attrs[k] == pytest.approx(v)


def test_activations_between_convolutions_stay_nhwc():
    ops = ["LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Celu", "Softplus", "Mish"]
    nodes = [helper.make_node("Conv", ["x", "w"], ["a0"], pads=[1, 1, 1, 1])]
    nodes += [helper.make_node(op, [f"a{i}"], [f"a{i + 1}"]) for i, op in enumerate(ops)]
    nodes.append(helper.make_node("Conv", [f"a{len(ops)}", "w2"], ["y"]))
    g = check_everywhere(nodes, {"x": rand(2, 3, 9, 7, low=-2, high=2)},
                         {"w": rand(5, 3, 3, 3, seed=1), "w2": rand(4, 5, 1, 1, seed=2)}, opset=18, rtol=1e-4)
    assert g.op_counts().get("transpose") == 2  # only at the graph's NCHW boundary


EXTREMES = np.array([-80, -30, -20, -5, -1e-3, -1e-7, -1e-30, 0, 1e-30, 1e-7, 1e-3, 5, 20, 30, 88, 100],
                    dtype=np.float32)


def _f64(op, x):
    x = x.astype(np.float64)
    sp = np.logaddexp(0.0, x)
    return {"Softplus": sp, "Mish": x * np.tanh(sp), "Elu": np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
            "Celu": np.where(x > 0, x, 2 * np.expm1(np.minimum(x, 0) / 2))}[op]


@pytest.mark.parametrize("op", ["Softplus", "Mish", "Elu", "Celu"])
def test_activation_extremes_elementwise_accurate(op):
    attrs = {"alpha": 2.0} if op == "Celu" else {}
    model = model_of([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": EXTREMES}, opset=18)
    g = from_onnx(model)
    got = ansor.compile_network(g, verbose=False).run({"x": EXTREMES})["y"]
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, _f64(op, EXTREMES), rtol=2e-6, atol=0)
    np.testing.assert_allclose(ansor.graph.run(g, {"x": EXTREMES})["y"], _f64(op, EXTREMES), rtol=2e-6, atol=0)
