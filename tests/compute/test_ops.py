"""Tests of the operator library (compute.ops) and of the shared test cases (tests/workloads.py).

Three things are checked: every shared case evaluates (with the reference evaluator) to what its
independent numpy implementation says; every registered workload builds; and the ops' argument
checks and the DAG facts the search relies on (multi-level tiling, inlineability, branches) hold.
"""
from __future__ import annotations

import numpy as np
import pytest

from compute import ComputeDAG, te
from compute import ops
from compute.reference import evaluate
from compute.tensor import ComputeOp, PlaceholderOp
from tests.workloads import CASES, Case, case_by_id


def _ph(*shape: int, dtype: str = "float32", name: str = "X"):
    return te.placeholder(shape, dtype, name)


def _op_by_tag(dag: ComputeDAG, tag: str) -> ComputeOp:
    found = [op for op in dag.compute_ops if op.tag == tag]
    assert len(found) == 1, f"expected one {tag!r} stage, got {[op.name for op in dag.compute_ops]}"
    return found[0]


# ---- the shared cases against their numpy implementations --------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_matches_numpy(case: Case) -> None:
    dag = ComputeDAG(case.make())
    inputs = case.make_inputs(seed=0)
    got = evaluate(dag, inputs)
    want = case.numpy_impl(inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert g.dtype == w.dtype, f"numpy_impl returns {w.dtype}, the op computes {g.dtype}"
        np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol)


def test_cases_are_small_and_distinct() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    for c in CASES:
        dag = ComputeDAG(c.make())
        points = sum(int(np.prod(t.shape)) for t in dag.tensors if isinstance(t.op, ComputeOp))
        assert points <= 4096, f"case {c.id} has {points} output points; keep cases small"


def test_cases_build_fresh_tensors() -> None:
    c = CASES[0]
    assert all(a is not b for a, b in zip(c.make(), c.make()))


def test_case_by_id() -> None:
    assert case_by_id(CASES[3].id) is CASES[3]
    with pytest.raises(KeyError, match="unknown case 'nope'"):
        case_by_id("nope")


# Every library op must be exercised by at least one case (ids start with the op's name).
_LIBRARY_OPS = [
    "matmul", "batch_matmul", "dense", "norm", "conv1d", "conv2d_nhwc", "conv2d_nchw",
    "depthwise_conv2d_nhwc", "conv3d_ndhwc", "conv2d_transpose_nhwc", "max_pool2d", "avg_pool2d",
    "softmax", "layer_norm", "relu", "gelu", "bias_add", "add", "multiply", "transpose", "reshape",
    "pad", "conv2d_bias_relu", "dense_bias_gelu", "dense_bias_relu", "batch_matmul_softmax",
    "matmul_relu",
]


@pytest.mark.parametrize("name", _LIBRARY_OPS)
def test_every_op_has_a_case(name: str) -> None:
    assert any(c.id.startswith(name + "_") for c in CASES), f"no test case covers {name}"


def test_cases_cover_edge_extents() -> None:
    extents = set()
    for c in CASES:
        for t in c.make():
            extents.update(t.shape)
    assert {1, 3, 7, 17} <= extents


# ---- the workload registry ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ops.WORKLOADS))
def test_workload_small_args_build_and_evaluate(name: str) -> None:
    spec = ops.get_workload(name)
    assert spec.name == name and spec.description
    args = spec.func(*spec.small_args)
    assert all(isinstance(t.op, PlaceholderOp) for t in args[:-1])
    assert isinstance(args[-1].op, ComputeOp)
    dag = ComputeDAG(args)
    from compute.reference import random_inputs

    (out,) = evaluate(dag, random_inputs(dag))
    assert out.shape == args[-1].shape and np.all(np.isfinite(out))


@pytest.mark.parametrize("name", sorted(ops.WORKLOADS))
def test_workload_default_args_build(name: str) -> None:
    spec = ops.WORKLOADS[name]
    dag = ComputeDAG(spec.make())
    assert dag.compute_ops and dag.tensors[-1].op is dag.output_ops[-1]
    # The key depends on the computation only: rebuilding gives the same key.
    assert ComputeDAG(spec.make()).workload_key == dag.workload_key


def test_registry_names_and_lookup() -> None:
    for name in ["matmul", "batch_matmul", "dense", "conv1d", "conv2d_nhwc", "conv2d_nchw",
                 "depthwise_conv2d_nhwc", "conv3d_ndhwc", "conv2d_transpose_nhwc", "max_pool2d",
                 "avg_pool2d", "softmax", "layer_norm", "relu", "gelu", "bias_add", "add", "multiply",
                 "transpose", "reshape", "pad", "norm", "conv2d_bias_relu", "dense_bias_gelu",
                 "batch_matmul_softmax", "matmul_relu"]:
        assert name in ops.WORKLOADS
    assert ops.WORKLOADS["matmul"].default_args == (1024, 1024, 1024)
    assert ops.WORKLOADS["conv2d_nhwc"].default_args == (1, 56, 56, 64, 64, 3, 3, 1, 1)
    with pytest.raises(KeyError, match="unknown workload 'gemm'; known workloads: .*matmul"):
        ops.get_workload("gemm")


def test_workload_shapes() -> None:
    a, b, c = ops.workloads.matmul(8, 5, 3, transpose_a=True, transpose_b=True)
    assert a.shape == (3, 8) and b.shape == (5, 3) and c.shape == (8, 5)
    *_, out = ops.workloads.conv2d_nhwc(1, 56, 56, 64, 64, 3, 3, 1, 1)
    assert out.shape == (1, 56, 56, 64)
    *_, out = ops.workloads.conv2d_transpose_nhwc(1, 4, 4, 512, 256, 4, 4, 2, 1)
    assert out.shape == (1, 8, 8, 256)
    *_, out = ops.workloads.max_pool2d(1, 112, 112, 64, 3, 3, 2, 1)
    assert out.shape == (1, 56, 56, 64)
    args = ops.workloads.dense(4, 5, 6, bias=False)
    assert len(args) == 3 and args[-1].shape == (4, 5)
    assert ops.workloads.norm(5, 7)[-1].shape == (1,)


# ---- argument validation -----------------------------------------------------------------------

def _conv_nhwc(ds, ks, **kw):
    return lambda: ops.conv2d_nhwc(_ph(*ds, name="data"), _ph(*ks, name="kernel"), **kw)


_ERRORS = [
    ("conv_groups_ci", _conv_nhwc((1, 7, 7, 3), (3, 3, 1, 4), groups=2), ValueError,
     r"conv2d_nhwc: input channels \(3\) are not divisible by groups \(2\)"),
    ("conv_groups_co", _conv_nhwc((1, 7, 7, 4), (3, 3, 2, 5), groups=2), ValueError,
     r"conv2d_nhwc: output channels \(5\) are not divisible by groups \(2\)"),
    ("conv_kernel_channels", _conv_nhwc((1, 7, 7, 4), (3, 3, 3, 4)), ValueError,
     r"conv2d_nhwc: kernel \[3, 3, 3, 4\] \(HWIO\) has 3 input channel\(s\) per group"),
    ("conv_kernel_too_big", _conv_nhwc((1, 3, 3, 2), (5, 5, 2, 2)), ValueError,
     r"conv2d_nhwc: kernel extent 5 is larger than the padded input extent 3 in dimension H"),
    ("conv_dilated_too_big", _conv_nhwc((1, 9, 5, 2), (3, 3, 2, 2), dilation=3), ValueError,
     r"conv2d_nhwc: dilated kernel extent 7 is larger than the padded input extent 5 in dimension W"),
    ("conv_rank", lambda: ops.conv2d_nhwc(_ph(7, 7, 3), _ph(3, 3, 3, 4)), ValueError,
     r"conv2d_nhwc: data must be 4-D \(NHWC\), got shape \[7, 7, 3\]"),
    ("conv_stride", _conv_nhwc((1, 7, 7, 3), (3, 3, 3, 4), stride=0), ValueError,
     r"conv2d_nhwc: stride must be >= 1"),
    ("conv_padding_form", _conv_nhwc((1, 7, 7, 3), (3, 3, 3, 4), padding=(1, 2, 3)), ValueError,
     r"conv2d_nhwc: padding must be an int, 2 ints or 4 ints"),
    ("conv_padding_negative", _conv_nhwc((1, 7, 7, 3), (3, 3, 3, 4), padding=-1), ValueError,
     r"conv2d_nhwc: padding must be >= 0"),
    ("conv_groups_zero", _conv_nhwc((1, 7, 7, 3), (3, 3, 3, 4), groups=0), ValueError,
     r"conv2d_nhwc: groups must be a positive integer"),
    ("conv_dtypes", lambda: ops.conv2d_nhwc(_ph(1, 7, 7, 3), _ph(3, 3, 3, 4, dtype="float64")),
     ValueError, r"conv2d_nhwc: inputs have different dtypes"),
    ("conv_nchw_groups", lambda: ops.conv2d_nchw(_ph(1, 3, 7, 7), _ph(4, 1, 3, 3), groups=2),
     ValueError, r"conv2d_nchw: input channels \(3\) are not divisible by groups \(2\)"),
    ("conv_nchw_kernel", lambda: ops.conv2d_nchw(_ph(1, 3, 7, 7), _ph(4, 2, 3, 3)), ValueError,
     r"conv2d_nchw: kernel \[4, 2, 3, 3\] \(OIHW\) has 2 input channel\(s\) per group"),
    ("conv1d_kernel_too_big", lambda: ops.conv1d(_ph(1, 4, 2), _ph(7, 2, 3), padding=1), ValueError,
     r"conv1d: kernel extent 7 is larger than the padded input extent 6 in dimension W"),
    ("conv3d_rank", lambda: ops.conv3d_ndhwc(_ph(1, 4, 4, 4, 2), _ph(3, 3, 2, 2)), ValueError,
     r"conv3d_ndhwc: kernel must be 5-D \(DHWIO\)"),
    ("depthwise_channels", lambda: ops.depthwise_conv2d_nhwc(_ph(1, 5, 5, 3), _ph(3, 3, 4, 1)),
     ValueError, r"depthwise_conv2d_nhwc: kernel \[3, 3, 4, 1\] has 4 channel\(s\) but data has 3"),
    ("depthwise_too_big", lambda: ops.depthwise_conv2d_nhwc(_ph(1, 2, 5, 3), _ph(3, 3, 3, 1)),
     ValueError, r"depthwise_conv2d_nhwc: kernel extent 3 is larger than the padded input extent 2"),
    ("t2d_padding", lambda: ops.conv2d_transpose_nhwc(_ph(1, 4, 4, 2), _ph(3, 3, 2, 2), padding=3),
     ValueError, r"conv2d_transpose_nhwc: padding 3 exceeds dilation\*\(kernel-1\) = 2 in dimension H"),
    ("t2d_output_padding", lambda: ops.conv2d_transpose_nhwc(_ph(1, 4, 4, 2), _ph(3, 3, 2, 2),
                                                             stride=2, output_padding=2),
     ValueError, r"conv2d_transpose_nhwc: output_padding 2 must be smaller than the stride 2"),
    ("t2d_channels", lambda: ops.conv2d_transpose_nhwc(_ph(1, 4, 4, 2), _ph(3, 3, 3, 2)), ValueError,
     r"conv2d_transpose_nhwc: kernel \[3, 3, 3, 2\] has 3 input channel\(s\) but data has 2"),
    ("t2d_empty", lambda: ops.conv2d_transpose_nhwc(_ph(1, 1, 4, 2), _ph(3, 3, 2, 2), padding=2),
     ValueError, r"conv2d_transpose_nhwc: the output would be empty in dimension H"),
    ("pool_padding", lambda: ops.max_pool2d(_ph(1, 7, 7, 3), 2, padding=2), ValueError,
     r"max_pool2d: padding 2 must be smaller than the kernel size 2 in dimension H"),
    ("pool_too_big", lambda: ops.avg_pool2d(_ph(1, 7, 3, 3), 5, padding=0), ValueError,
     r"avg_pool2d: kernel extent 5 is larger than the padded input extent 3 in dimension W"),
    ("avg_pool_int", lambda: ops.avg_pool2d(_ph(1, 7, 7, 3, dtype="int32"), 3), ValueError,
     r"avg_pool2d: needs a float input"),
    ("matmul_inner", lambda: ops.matmul(_ph(4, 5, name="A"), _ph(6, 3, name="B")), ValueError,
     r"matmul \(NN\): inner dimensions differ: A \[4, 5\] gives K=5, B \[6, 3\] gives K=6"),
    ("matmul_nt_inner", lambda: ops.matmul(_ph(4, 5), _ph(3, 6), transpose_b=True), ValueError,
     r"matmul \(NT\): inner dimensions differ"),
    ("matmul_rank", lambda: ops.matmul(_ph(4, 5, 6), _ph(6, 3)), ValueError,
     r"matmul: A must be 2-D \(M, K\)"),
    ("bmm_batch", lambda: ops.batch_matmul(_ph(2, 4, 5), _ph(3, 5, 6)), ValueError,
     r"batch_matmul: batch sizes differ: A has 2, B has 3"),
    ("bmm_inner", lambda: ops.batch_matmul(_ph(2, 4, 5), _ph(2, 4, 6)), ValueError,
     r"batch_matmul \(NN\): inner dimensions differ"),
    ("dense_inner", lambda: ops.dense(_ph(4, 5), _ph(6, 4)), ValueError,
     r"dense: inner dimensions differ: data is \[4, 5\] \(K=5\) but weight is \[6, 4\] \(K=4\)"),
    ("dense_bias", lambda: ops.dense(_ph(4, 5), _ph(6, 5), _ph(5)), ValueError,
     r"dense: bias must have shape \[6\]"),
    ("transpose_perm", lambda: ops.transpose(_ph(3, 4), (0, 0)), ValueError,
     r"transpose: axes \[0, 0\] is not a permutation of the 2 dimensions of shape \[3, 4\]"),
    ("transpose_len", lambda: ops.transpose(_ph(3, 4, 5), (1, 0)), ValueError,
     r"transpose: axes \[1, 0\] is not a permutation"),
    ("transpose_range", lambda: ops.transpose(_ph(3, 4), (0, 2)), ValueError,
     r"transpose: axes \[0, 2\] is not a permutation"),
    ("reshape_size", lambda: ops.reshape(_ph(6, 10), (7,)), ValueError,
     r"reshape: cannot reshape \[6, 10\] \(60 elements\) into \[7\] \(7 elements\)"),
    ("reshape_infer", lambda: ops.reshape(_ph(6, 10), (-1, 7)), ValueError,
     r"reshape: cannot reshape \[6, 10\] \(60 elements\) into \[-1, 7\]: 60 is not divisible by 7"),
    ("reshape_two_unknown", lambda: ops.reshape(_ph(6, 10), (-1, -1)), ValueError,
     r"reshape: at most one extent may be -1"),
    ("reshape_zero", lambda: ops.reshape(_ph(6, 10), (0, 60)), ValueError,
     r"reshape: extents must be positive"),
    ("add_broadcast", lambda: ops.add(_ph(7, 3), _ph(4)), ValueError,
     r"add: shapes \[7, 3\] and \[4\] cannot be broadcast together \(dimension -1: 3 vs 4\)"),
    ("multiply_broadcast", lambda: ops.multiply(_ph(2, 3, 4), _ph(5, 4)), ValueError,
     r"multiply: shapes \[2, 3, 4\] and \[5, 4\] cannot be broadcast together \(dimension -2: 3 vs 5\)"),
    ("add_dtypes", lambda: ops.add(_ph(3), _ph(3, dtype="int32", name="Y")), ValueError,
     r"add: dtypes differ"),
    ("add_no_tensor", lambda: ops.add(1.0, 2.0), TypeError, r"add: at least one operand must be a Tensor"),
    ("bias_add_size", lambda: ops.bias_add(_ph(4, 5), _ph(4)), ValueError,
     r"bias_add: bias must have shape \[5\] \(dimension 1 of the input \[4, 5\]\), got \[4\]"),
    ("bias_add_axis", lambda: ops.bias_add(_ph(4, 5), _ph(5), axis=2), ValueError,
     r"bias_add: axis 2 is out of range for an input of rank 2"),
    ("softmax_rank", lambda: ops.softmax(_ph(5)), ValueError, r"softmax: input must be at least 2-D"),
    ("softmax_int", lambda: ops.softmax(_ph(3, 5, dtype="int32")), ValueError,
     r"softmax: needs a float input"),
    ("layer_norm_gamma", lambda: ops.layer_norm(_ph(3, 5), _ph(4), _ph(5)), ValueError,
     r"layer_norm: gamma must have shape \[5\] \(the last axis of the input\), got \[4\]"),
    ("layer_norm_eps", lambda: ops.layer_norm(_ph(3, 5), _ph(5), _ph(5), eps=-1.0), ValueError,
     r"layer_norm: eps must be a non-negative number"),
    ("gelu_int", lambda: ops.gelu(_ph(3, dtype="int32")), ValueError, r"gelu: needs a float input"),
    ("norm_int", lambda: ops.norm(_ph(3, 3, dtype="int32")), ValueError, r"norm: needs a float input"),
    ("pad_len", lambda: ops.pad(_ph(3, 4), (1, 2, 3)), ValueError,
     r"pad: pad_before must have 2 value\(s\), got \(1, 2, 3\)"),
    ("pad_negative", lambda: ops.pad(_ph(3, 4), 1, (0, -1)), ValueError,
     r"pad: pad_after must be >= 0, got \(0, -1\)"),
    ("not_a_tensor", lambda: ops.relu(np.zeros(3)), TypeError, r"relu: input must be a Tensor"),
]


@pytest.mark.parametrize("build,exc,match", [e[1:] for e in _ERRORS], ids=[e[0] for e in _ERRORS])
def test_argument_errors(build, exc, match) -> None:
    with pytest.raises(exc, match=match):
        build()


# ---- DAG facts the search relies on ------------------------------------------------------------

@pytest.mark.parametrize("name,tag", [
    ("matmul", "matmul"), ("batch_matmul", "batch_matmul"), ("dense", "dense"),
    ("conv1d", "conv1d_nwc"), ("conv2d_nhwc", "conv2d_nhwc"), ("conv2d_nchw", "conv2d_nchw"),
    ("group_conv2d_nhwc", "conv2d_nhwc"), ("dilated_conv2d_nhwc", "conv2d_nhwc"),
    ("depthwise_conv2d_nhwc", "depthwise_conv2d_nhwc"), ("conv3d_ndhwc", "conv3d_ndhwc"),
    ("conv2d_transpose_nhwc", "conv2d_transpose_nhwc"), ("matmul_relu", "matmul"),
    ("conv2d_bias_relu", "conv2d_nhwc"), ("dense_bias_gelu", "dense"),
    ("batch_matmul_softmax", "batch_matmul"),
])
def test_tiled_ops_need_multi_level_tiling(name: str, tag: str) -> None:
    for small in (False, True):
        dag = ComputeDAG(ops.WORKLOADS[name].make(small))
        op = _op_by_tag(dag, tag)
        assert dag.info[op].needs_multi_level_tiling
        assert dag.info[op].has_reduce


def test_relu_and_bias_add_are_strictly_inlineable() -> None:
    dag = ComputeDAG(ops.workloads.conv2d_bias_relu(1, 7, 7, 3, 4, 3, 3, 1, 1))
    by_name = {op.name: op for op in dag.compute_ops}
    for name in ("bias_add", "relu"):
        inf = dag.info[by_name[name]]
        assert inf.is_strictly_inlineable and inf.is_elementwise is (name == "relu")
        assert not inf.needs_multi_level_tiling
    assert dag.info[by_name["relu"]].is_output
    for wl in ("relu", "bias_add"):
        dag = ComputeDAG(ops.WORKLOADS[wl].make(small=True))
        assert dag.info[dag.compute_ops[-1]].is_strictly_inlineable


def test_gelu_is_not_strictly_inlineable() -> None:
    dag = ComputeDAG(ops.workloads.gelu(7, 17))
    inf = dag.info[dag.compute_ops[0]]
    assert inf.has_expensive_op and not inf.is_strictly_inlineable


@pytest.mark.parametrize("args", [
    ops.workloads.conv2d_nhwc(1, 7, 7, 3, 4, 3, 3, 1, 1),
    ops.workloads.conv2d_nchw(1, 7, 7, 3, 4, 3, 3, 1, 1),
    ops.workloads.max_pool2d(1, 7, 7, 3, 3, 3, 2, 1),
    ops.workloads.conv2d_transpose_nhwc(1, 3, 3, 2, 3, 4, 4, 2, 1),
    ops.workloads.pad((3, 5), (1, 0), (0, 2)),
], ids=["conv2d_nhwc", "conv2d_nchw", "max_pool2d", "conv2d_transpose", "pad"])
def test_pad_stage_has_branch(args) -> None:
    dag = ComputeDAG(args)
    pad = _op_by_tag(dag, "pad")
    inf = dag.info[pad]
    assert inf.has_branch and inf.is_injective and not inf.is_strictly_inlineable


@pytest.mark.parametrize("args", [
    ops.workloads.conv2d_nhwc(1, 7, 7, 3, 4, 3, 3, 1, 0),
    ops.workloads.conv1d(1, 9, 3, 4, 3),
    ops.workloads.depthwise_conv2d_nhwc(1, 7, 7, 3, 3, 3),
    ops.workloads.max_pool2d(1, 8, 8, 3, 2, 2, 2, 0),
    ops.workloads.conv2d_transpose_nhwc(1, 3, 3, 2, 4, 1, 1),
], ids=["conv2d", "conv1d", "depthwise", "max_pool2d", "conv2d_transpose_1x1"])
def test_zero_padding_has_no_pad_stage(args) -> None:
    dag = ComputeDAG(args)
    assert all(op.tag != "pad" for op in dag.compute_ops)
    assert len(dag.compute_ops) == 1


def test_stage_structure_and_names() -> None:
    dag = ComputeDAG(ops.workloads.softmax(7, 17))
    assert [op.name for op in dag.compute_ops] == ["softmax_maxelem", "softmax_exp",
                                                   "softmax_expsum", "softmax"]
    assert [dag.info[op].has_reduce for op in dag.compute_ops] == [True, False, True, False]
    dag = ComputeDAG(ops.workloads.layer_norm(7, 17))
    assert [op.name for op in dag.compute_ops] == ["layer_norm_mean", "layer_norm_var", "layer_norm"]
    dag = ComputeDAG(ops.workloads.avg_pool2d(1, 7, 7, 3, 3, 3, 2, 1))
    assert [op.tag for op in dag.compute_ops] == ["pad", "reduce", "elemwise"]
    dag = ComputeDAG(ops.workloads.norm(5, 7))
    assert [op.shape for op in dag.compute_ops] == [(1,), (1,)]


def test_readable_axis_names() -> None:
    *_, conv = ops.workloads.conv2d_nhwc(1, 7, 7, 3, 4, 3, 3, 1, 1)
    assert [a.name for a in conv.op.axes] == ["n", "h", "w", "co"]
    assert [a.name for a in conv.op.reduce_axes] == ["rh", "rw", "rc"]
    *_, conv = ops.workloads.conv2d_nchw(1, 7, 7, 3, 4, 3, 3)
    assert [a.name for a in conv.op.reduce_axes] == ["rc", "rh", "rw"]
    *_, c = ops.workloads.matmul(4, 5, 6)
    assert [a.name for a in c.op.axes] == ["i", "j"] and [a.name for a in c.op.reduce_axes] == ["k"]
    *_, c = ops.workloads.conv3d_ndhwc(1, 3, 3, 3, 2, 2, 3, 3, 3)
    assert [a.name for a in c.op.reduce_axes] == ["rd", "rh", "rw", "rc"]


def test_elementwise_tags_and_facts() -> None:
    dag = ComputeDAG(ops.workloads.add((7, 17), (7, 17)))
    op = dag.compute_ops[0]
    assert op.tag == "elemwise" and dag.info[op].is_elementwise
    dag = ComputeDAG(ops.workloads.add((7, 17), (17,)))
    op = dag.compute_ops[0]
    assert op.tag == "broadcast" and dag.info[op].is_strictly_inlineable
    dag = ComputeDAG(ops.workloads.transpose((3, 5), None))
    op = dag.compute_ops[0]
    assert op.tag == "injective" and not dag.info[op].is_simple_access
    dag = ComputeDAG(ops.workloads.matmul_relu(8, 8, 8))
    mm, relu = dag.compute_ops
    assert dag.elementwise_match(mm, relu)


def test_out_dtype_accumulates_wide() -> None:
    a, b = _ph(4, 5, dtype="int8", name="A"), _ph(5, 3, dtype="int8", name="B")
    c = ops.matmul(a, b, out_dtype="int32")
    assert c.dtype == "int32"
    big = [np.full((4, 5), 100, np.int8), np.full((5, 3), 100, np.int8)]
    (out,) = evaluate([a, b, c], big)
    assert np.all(out == 50000)  # would wrap in int8


@pytest.mark.parametrize("args, taps", [
    ((1, 8, 8, 16, 8, 4, 4, 2, 1), 2 * 2),   # DCGAN's 4x4 stride 2: two taps per phase and axis
    ((1, 5, 6, 4, 3, 3, 3, 2, 1, 1), 2 * 2),  # 3x3 stride 2: the second tap past the kernel reads zero
    ((1, 4, 4, 4, 3, 3, 3, 1, 1), 3 * 3),   # stride 1: an ordinary convolution's taps
])
def test_transposed_conv_reduces_over_the_taps_that_reach_each_output(args, taps) -> None:
    """Sub-pixel form: no zero-spread input stage, and the reduction is ceil(K/s)^2 taps x CI,
    not K^2 x CI (a quarter of the multiply-adds at stride 2 with K = 4)."""
    dag = ComputeDAG(ops.workloads.conv2d_transpose_nhwc(*args))
    conv = _op_by_tag(dag, "conv2d_transpose_nhwc")
    red = int(np.prod([a.extent for a in conv.reduce_axes]))
    assert red == taps * args[3]
    assert not any(op.tag == "pad" and "stride" in op.attrs for op in dag.compute_ops)  # no spread
    # a multiply and an add per tap (the test of a tap past the kernel is index arithmetic)
    assert dag.flop_count == 2 * int(np.prod(conv.shape)) * red


def test_a_dilated_transposed_conv_keeps_the_spread_input() -> None:
    dag = ComputeDAG(ops.workloads.conv2d_transpose_nhwc(1, 4, 4, 2, 2, 3, 3, 2, 1, 0, 2))
    assert any(op.tag == "pad" and "stride" in op.attrs for op in dag.compute_ops)
