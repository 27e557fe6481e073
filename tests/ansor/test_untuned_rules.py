"""The untuned schedule's rules (issue 16 item 4): register tiles that fit the stated machine's
registers, zero padding kept as a buffer, constant dense weights bound as [K, N], matrix
products with the column tile outermost; and the schedules still compute what the reference
does."""
import dataclasses

import numpy as np
import pytest

import ansor
from ansor.graph import GraphBuilder, run
from ansor.graph.plan import extract_tasks
from ansor.untuned import _register_tile, untuned_schedule
from compute.ops import workloads as W
from sketch.hardware import HardwareParams

AVX2 = HardwareParams(num_cores=2, vector_bits=256, cache_line_bytes=64, num_vector_registers=16,
                      target="test-avx2")
AVX512 = dataclasses.replace(AVX2, vector_bits=512, num_vector_registers=32, target="test-avx512")


@pytest.mark.parametrize("hw", [AVX2, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize("cols, rows", [(64, 56), (64, 14), (24, 56), (512, 7), (768, 128), (1000, 1)])
def test_register_tile_fits_the_registers(hw, cols, rows):
    r, c = _register_tile(cols, rows, hw, 2 * hw.vector_lanes)
    assert cols % c == 0 and rows % r == 0
    regs = -(-c // hw.vector_lanes)
    # accumulators plus the column vectors' spare: never more than the machine has
    assert r * regs <= hw.num_vector_registers - 2
    assert r <= 8


def test_register_tile_prefers_whole_registers():
    # 24 channels on AVX2: 8 lanes a register; 12 lanes would leave half a register idle.
    assert _register_tile(24, 56, AVX2, 16)[1] == 8
    # 14 rows on AVX2: two registers a row and 7 rows (14 accumulators) beats 2 rows.
    assert _register_tile(64, 14, AVX2, 16) == (7, 16)
    # more registers, a longer tile
    assert _register_tile(64, 56, AVX512, 32) == (8, 32)


def _conv_dag():
    return ansor.ComputeDAG(W.conv2d_bias_relu(1, 14, 14, 32, 64, 3, 3, 1, 1))


def test_padding_stays_a_buffer_and_the_tile_follows_the_machine():
    dag = _conv_dag()
    for hw, cols in ((AVX2, 16), (AVX512, 32)):
        state, how = untuned_schedule(dag, hardware_params=hw)
        assert how == "rules"
        text = str(state)
        assert "conv2d_nhwc_pad = ..." in text  # computed into its own buffer
        assert "Inlined: bias_add" in text.splitlines()
        assert f"vectorize co.3 (0,{cols})" in text


def _dense_graph(m=16, k=64, n=48):
    b = GraphBuilder("dense")
    x = b.input("x", (m, k))
    w = b.constant(np.random.default_rng(0).standard_normal((n, k)).astype(np.float32), "w")
    y = b.relu(b.dense(x, w, b.constant(np.ones(n, np.float32), "bias")))
    return b.build(y)


def test_constant_dense_weight_is_bound_transposed_and_matches():
    g = _dense_graph()
    tasks, _ = extract_tasks(g)
    text = str(tasks[0].compute_dag)
    assert "PLACEHOLDER [64, 48]" in text and "[k, j]" in text
    lib = ansor.compile_network(g, verbose=False)
    x = {"x": np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)}
    np.testing.assert_allclose(lib.run(x)["relu"], run(g, x)["relu"], rtol=1e-4, atol=1e-4)


def test_matrix_product_runs_column_tiles_outermost():
    g = _dense_graph(m=64, k=64, n=256)
    tasks, _ = extract_tasks(g)
    state, how = untuned_schedule(tasks[0].compute_dag, hardware_params=AVX2)
    assert how == "rules"
    # the output's column axis (i1) is fused first into the parallel loop
    assert str(state).splitlines()[1] == "parallel i1.0@i0.0@ (0,256)"
