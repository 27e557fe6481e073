"""Winograd F(m, 3) (``compute.ops.winograd``): the derived matrices compute the FIR filter
exactly, and the tensor expression - evaluated by the reference, compiled with the default
schedule and under random sketch samples - equals the direct convolution within the stated
tolerance for odd shapes (batch 2, prime channel counts, H and W not multiples of m, padding 0
and 1, asymmetric padding, 1x3 and 3x1 kernels)."""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

import ansor
from compute import reference
from compute.compute_dag import ComputeDAG
from compute.ops.winograd import (ALLOWED_M, TOLERANCE, conv2d_winograd_workload, exact_matrices,
                                  transform_matrices, weight_transform, winograd_inputs, winograd_numpy)
from measure.target import host_hardware_params
from sketch.init_population import sample_initial_population
from sketch.search_params import SearchParams
from sketch.sketch_rules import generate_sketches
from tests.util import run_kernel
from tests.workloads import np_conv_channels_last


def _data(shape_x, shape_w, seed=0):
    r = np.random.default_rng(seed)
    ci = shape_w[2]
    x = r.standard_normal(shape_x).astype(np.float32)
    w = (r.standard_normal(shape_w) * np.sqrt(2 / (shape_w[0] * shape_w[1] * ci))).astype(np.float32)
    return x, w


def _inputs(x, w, m):
    return [x, weight_transform(w, m), *winograd_inputs(m, w.shape[:2])]


def _check(got, x, w, padding):
    ref = np_conv_channels_last(x, w, 1, padding)
    assert got.shape == ref.shape
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err <= TOLERANCE, err


@pytest.mark.parametrize("m", [2, 4, 6])
def test_exact_matrices_filter_every_tap(m):
    bt, g, at = exact_matrices(m)
    alpha = m + 2
    # y_i = sum_k g_k d_(i+k) for the unit vectors g, d: the identity holds exactly in Q
    for k in range(3):
        for j in range(alpha):
            gg = [Fraction(int(i == k)) for i in range(3)]
            d = [Fraction(int(i == j)) for i in range(alpha)]
            gu = [sum(g[e][r] * gg[r] for r in range(3)) for e in range(alpha)]
            dv = [sum(bt[e][a] * d[a] for a in range(alpha)) for e in range(alpha)]
            y = [sum(at[i][e] * gu[e] * dv[e] for e in range(alpha)) for i in range(m)]
            assert y == [Fraction(int(i + k == j)) for i in range(m)]
    assert all(v.denominator == 1 for row in bt for v in row)  # B^T scaled to integers


def test_allowed_tile_sizes_and_bad_arguments():
    assert ALLOWED_M == (2, 4, 6)
    with pytest.raises(ValueError, match="tile size m must be one of"):
        transform_matrices(3)
    with pytest.raises(ValueError, match="3x3, 1x3 or 3x1"):
        weight_transform(np.zeros((5, 5, 2, 2), np.float32), 4)
    with pytest.raises(ValueError, match="only float32"):
        from compute import te
        from compute.ops.winograd import conv2d_winograd_nhwc
        ts = conv2d_winograd_workload(1, 4, 4, 2, 2, 2)[:-1]
        d64 = te.placeholder((1, 4, 4, 2), "float64", "d")
        conv2d_winograd_nhwc(d64, *ts[1:])


@pytest.mark.parametrize("m", [2, 4, 6])
def test_numpy_model_within_tolerance_on_a_resnet_like_layer(m):
    x, w = _data((1, 14, 14, 64), (3, 3, 64, 64))
    _check(winograd_numpy(x, w, m, 1), x, w, 1)


CASES = [  # (N, H, W, CI, CO, kernel, padding)
    (2, 7, 9, 5, 7, (3, 3), 1),
    (2, 11, 6, 3, 11, (3, 3), 0),
    (1, 5, 13, 7, 5, (3, 3), (1, 0, 2, 1)),
    (2, 6, 7, 5, 3, (1, 3), (0, 1)),
    (1, 9, 4, 3, 5, (3, 1), (1, 0)),
]


@pytest.mark.parametrize("m", [2, 4, 6])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}x{c[2]}_k{c[5][0]}{c[5][1]}_p{c[6]}" for c in CASES])
def test_reference_evaluation_matches_the_direct_conv(m, case):
    n, h, w_, ci, co, k, pad = case
    x, w = _data((n, h, w_, ci), (*k, ci, co))
    dag = ComputeDAG(conv2d_winograd_workload(n, h, w_, ci, co, m, pad, k))
    _check(reference.evaluate(dag, _inputs(x, w, m))[-1], x, w, pad)
    np.testing.assert_allclose(winograd_numpy(x, w, m, pad), np_conv_channels_last(x, w, 1, pad),
                               atol=TOLERANCE * np.abs(np_conv_channels_last(x, w, 1, pad)).max())


@pytest.mark.parametrize("m", [2, 4, 6])
def test_compiled_default_schedule_matches(m):
    n, h, w_, ci, co, k, pad = CASES[0]
    x, w = _data((n, h, w_, ci), (*k, ci, co))
    dag = ComputeDAG(conv2d_winograd_workload(n, h, w_, ci, co, m, pad, k))
    kernel = ansor.build(dag.init_state())
    _check(run_kernel(kernel, dag, _inputs(x, w, m))[-1], x, w, pad)


@pytest.mark.parametrize("m", [2, 4, 6])
def test_random_sketch_samples_compute_the_right_result(m):
    n, h, w_, ci, co, k, pad = CASES[1] if m != 4 else CASES[2]
    x, w = _data((n, h, w_, ci), (*k, ci, co), seed=m)
    dag = ComputeDAG(conv2d_winograd_workload(n, h, w_, ci, co, m, pad, k))
    hw = host_hardware_params()
    sketches = list(generate_sketches(dag, hardware_params=hw))
    assert sketches
    states = sample_initial_population(sketches, 4, random.Random(m), SearchParams().with_hardware(hw))
    assert states
    for st in states:
        _check(run_kernel(ansor.build(st), dag, _inputs(x, w, m))[-1], x, w, pad)
