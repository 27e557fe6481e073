"""Einsum (ansor/graph/ops/einsum.py) against onnxruntime: the equations models use (batched and
attention matmuls, outer products, transposes, broadcast ellipsis, a three-matrix chain, the
bilinear form), implicit outputs, repeated labels (diagonal, trace), upper-case labels, int64."""
import numpy as np
import pytest
import torch
from onnx import helper

import ansor
from ansor.frontend import from_onnx
from ansor.graph import GraphError, run
from ansor.graph.builder import GraphBuilder
from ansor.graph.torch_peer import to_torch
from ansor.frontend.onnx import OnnxImportError

from ..onnx_util import rand
from ..op_check import check_everywhere, model_of

CASES = [
    ("bij,bjk->bik", [(2, 3, 5), (2, 5, 7)]),
    ("bhid,bhjd->bhij", [(2, 3, 5, 4), (2, 3, 7, 4)]),
    ("bhij,bhjd->bhid", [(2, 3, 5, 7), (2, 3, 7, 4)]),
    ("ij,jk->ik", [(5, 7), (7, 3)]),
    ("bi,bj->bij", [(2, 5), (2, 3)]),
    ("i,j->ij", [(5,), (7,)]),
    ("bij->bji", [(2, 3, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 5), (1, 3, 5, 4)]),  # the ellipsis broadcasts 1 against n
    ("ij,jk,kl->il", [(3, 5), (5, 4), (4, 7)]),
    ("bn,anm,bm->ba", [(2, 5), (3, 5, 7), (2, 7)]),  # bilinear
    ("ij,kj", [(3, 5), (4, 5)]),  # implicit output: ik
    ("Ab,bC->AC", [(3, 5), (5, 2)]),
    ("bii->bi", [(2, 5, 5)]),  # diagonal
    ("ii", [(5, 5)]),  # implicit trace: a scalar
]


@pytest.mark.parametrize("equation, shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum(equation, shapes):
    names = [f"x{k}" for k in range(len(shapes))]
    inputs = {n: rand(*s, seed=k) for k, (n, s) in enumerate(zip(names, shapes))}
    g = check_everywhere([helper.make_node("Einsum", names, ["y"], equation=equation)], inputs, rtol=1e-4)
    assert g.op_counts() == {"einsum": 1}


def test_einsum_int64_with_a_constant_operand():
    a = (np.arange(2 * 3 * 5, dtype=np.int64).reshape(2, 3, 5) % 7) - 3
    w = (np.arange(5 * 4, dtype=np.int64).reshape(5, 4) % 5) - 2
    check_everywhere([helper.make_node("Einsum", ["a", "w"], ["y"], equation="bij,jk->bik")], {"a": a}, {"w": w},
                     out_dtypes={"y": "int64"})


def test_einsum_label_sizes_that_differ_name_the_node():
    model = model_of([helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik", name="e")],
                     {"a": rand(3, 5), "b": rand(4, 2)})
    with pytest.raises(OnnxImportError, match=r"node e \(Einsum\): "):
        from_onnx(model)


def test_einsum_ellipsis_of_different_ranks_against_numpy():
    # numpy's semantics (onnxruntime refuses ellipses of different ranks): right-aligned, broadcast
    b = GraphBuilder()
    a, w = b.input("a", (2, 1, 3, 5)), b.input("w", (4, 5, 6))
    g = b.build(b.add_node("einsum", [a, w], {"equation": "...ij,...jk->...ik"}))
    feeds = {"a": rand(2, 1, 3, 5), "w": rand(4, 5, 6, seed=1)}
    want = np.einsum("...ij,...jk->...ik", feeds["a"].astype(np.float64), feeds["w"].astype(np.float64))
    assert want.shape == (2, 4, 3, 6)
    np.testing.assert_allclose(next(iter(run(g, feeds).values())), want, rtol=1e-5, atol=1e-6)
    out = next(iter(ansor.compile_network(g, verbose=False).run(feeds).values()))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    with torch.inference_mode():
        peer = to_torch(g)(*[torch.from_numpy(feeds[n]) for n in g.inputs])[0].numpy()
    np.testing.assert_allclose(peer, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation, message", [
    ("ij,jk,->ik", "has 3 operand"), ("i1,jk->ik", "labels must be letters"),
    ("ijk,jk->ik", "does not match an operand of rank 2"), ("ij,jk->iz", "must be distinct and appear"),
    ("...j,jk->k", "must keep the ellipsis"), ("ij,jk->ii", "must be distinct")])
def test_einsum_bad_equations(equation, message):
    b = GraphBuilder()
    a, w = b.input("a", (3, 5)), b.input("w", (5, 2))
    with pytest.raises(GraphError, match=message):
        b.add_node("einsum", [a, w], {"equation": equation})
