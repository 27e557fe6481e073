"""LayerNormalization (ansor/graph/ops/layer_norm.py) against onnxruntime in all its parts: every
axis of 2-, 3- and 4-D inputs, negative ones too, with and without beta, epsilon, and gamma/beta
of lower rank that broadcast to the normalised shape."""
import pytest
from onnx import helper

from ..onnx_util import rand
from ..op_check import check_everywhere


def _ln(x, axis, beta=True, gamma_shape=None, epsilon=None):
    norm = x.shape[-1 if axis is None else axis:]
    gshape = norm if gamma_shape is None else gamma_shape
    inits = {"g": rand(*gshape, seed=3, low=0.5, high=1.5)}
    names = ["x", "g"]
    if beta:
        inits["b"] = rand(*gshape, seed=4)
        names.append("b")
    attrs = {"axis": axis} if axis is not None else {}
    if epsilon is not None:
        attrs["epsilon"] = epsilon
    return check_everywhere([helper.make_node("LayerNormalization", names, ["y"], **attrs)], {"x": x}, inits,
                            rtol=1e-4)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_layer_norm_every_axis_of_a_3d_input(axis):
    g = _ln(rand(2, 5, 7, low=-3, high=3), axis)
    assert g.op_counts() == {"layer_norm": 1}


@pytest.mark.parametrize("axis", [1, -1, 3, -3])
def test_layer_norm_4d_no_beta_and_epsilon(axis):
    _ln(rand(2, 3, 5, 7), axis, beta=False, epsilon=1e-3)


def test_layer_norm_default_axis_and_2d():
    _ln(rand(3, 11), None)
    _ln(rand(3, 11), 0)


def test_layer_norm_gamma_of_lower_rank_broadcasts():
    _ln(rand(2, 5, 7), 1, gamma_shape=(7,))
    _ln(rand(2, 5, 7), 1, gamma_shape=(1, 7))
