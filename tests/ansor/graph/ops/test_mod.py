"""Mod (ansor/graph/ops/mod.py) against onnxruntime: floor modulo (fmod=0) and C fmod (fmod=1) on
int64/int32 with every sign combination and broadcasting, float fmod after a convolution, the
constant fold at import, and the float fmod=0 the spec forbids."""
import numpy as np
import pytest
from onnx import helper

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of


def _ints(shape, dtype, seed, nonzero=False):
    v = np.random.default_rng(seed).integers(-23, 24, shape).astype(dtype)
    if nonzero:
        v[v == 0] = 5
    return v


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_mod_integers_broadcast(fmod, dtype):
    a, b = _ints((2, 5, 7), dtype, 1), _ints((7,), dtype, 2, nonzero=True)
    g = check_everywhere([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)], {"a": a, "b": b},
                         out_dtypes={"y": dtype})
    assert g.op_counts() == {"mod": 1}


def test_mod_float_fmod_broadcast_both_ways():
    a = rand(3, 1, 7, low=-50, high=50)
    b = rand(5, 1, seed=3, low=0.5, high=7) * np.where(np.arange(5) % 2, -1, 1).astype(np.float32)[:, None]
    check_everywhere([helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)], {"a": a, "b": b})


def test_mod_float_after_convolution():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Mod", ["c", "m"], ["y"], fmod=1)]
    g = check_everywhere(nodes, {"x": rand(2, 3, 9, 7, low=-3, high=3)},
                         {"w": rand(5, 3, 3, 3, seed=1), "m": np.array([0.7], np.float32)}, rtol=1e-4)
    assert g.op_counts().get("transpose") == 2  # the NHWC image crosses back only at the output


def test_mod_of_constants_is_folded():
    nodes = [helper.make_node("Mod", ["c", "d"], ["m"]), helper.make_node("Mod", ["c", "d"], ["f"], fmod=1),
             helper.make_node("Add", ["x", "m"], ["s"]), helper.make_node("Add", ["s", "f"], ["y"])]
    c, d = np.array([-7, 7, -7, 7], np.int64), np.array([3, 3, -3, -3], np.int64)
    g = check_everywhere(nodes, {"x": np.arange(4, dtype=np.int64)}, {"c": c, "d": d}, out_dtypes={"y": "int64"})
    assert "mod" not in g.op_counts()


def test_mod_float_with_fmod_0_is_refused():
    model = model_of([helper.make_node("Mod", ["a", "b"], ["y"])], {"a": rand(3, 4), "b": rand(3, 4, seed=1)})
    with pytest.raises(OnnxImportError, match=r"\(Mod\).*fmod=0"):
        from_onnx(model)


def test_integer_mod_of_constants_by_zero_is_refused():
    nodes = [helper.make_node("Mod", ["c", "d"], ["m"]), helper.make_node("Add", ["x", "m"], ["y"])]
    model = model_of(nodes, {"x": np.zeros(2, np.int64)}, {"c": np.array([3, 4], np.int64), "d": np.array([2, 0], np.int64)},
                     out_dtypes={"y": "int64"})
    with pytest.raises(OnnxImportError, match=r"\(Mod\): integer Mod by zero"):
        from_onnx(model)
