"""Program features: the schema, agreement of the feature loop nests with what lowering builds,
exact values on hand-made schedules, and robustness on random step sequences."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

import ansor
from cost_model.feature import (FEATURE_DOCS, FEATURE_NAMES, FEATURE_VERSION, NUM_FEATURES,
                                dump_features, get_per_store_features, state_features)
from cost_model.loop_nests import statement_nests as _nests
from cost_model.stage_analysis import stage_infos as _stage_infos
from sketch.lower import _Lowering
from measure.target import host_hardware_params
from sketch.search_policy import SearchParams, SketchPolicy
from cost_model import RandomModel
from tests.sketch.random_schedules import random_state
from tests.workloads import CASES

from compute.ops import workloads as W


def _unlog(v: float) -> float:
    return math.copysign(2.0 ** abs(v) - 1.0, v)


def _value(state, stage_name: str, feature: str) -> float:
    m = state_features(state)
    names = [state.stages[k].name for k in sorted(_nests(state, _stage_infos(state)))]
    return _unlog(m[names.index(stage_name), FEATURE_NAMES.index(feature)])


def test_schema_is_named_documented_and_versioned():
    assert len(FEATURE_NAMES) == NUM_FEATURES == len(set(FEATURE_NAMES))
    assert all(doc.strip() for _, doc in FEATURE_DOCS)
    assert FEATURE_VERSION and NUM_FEATURES >= 150
    for b in range(5):
        assert f"B{b}.reuse_dis_bytes" in FEATURE_NAMES
    assert "ai_curve_9" in FEATURE_NAMES and "auto_unroll_max_step" in FEATURE_NAMES


def _gemm(n=64, m=48, k=32):
    return ansor.ComputeDAG(W.matmul(n, m, k))


def test_hand_schedule_values():
    dag = _gemm()
    s = dag.init_state().cache_write("matmul")
    s = s.split("matmul", "i", [8]).split("matmul", "j", [16]).reorder("matmul", ["i.0", "j.0", "i.1", "j.1"])
    s = s.compute_at("matmul.local", "matmul", "j.0").parallel("matmul", "i.0").vectorize("matmul", "j.1")
    s = s.vectorize("matmul.local", "j")
    # The accumulator: 64*48*32 multiply-adds over the whole nest, a vectorized loop of 16 lanes,
    # inside one parallel loop of 8.
    assert _value(s, "matmul.local", "float_mad") == pytest.approx(64 * 48 * 32)
    assert _value(s, "matmul.local", "vec_len") == pytest.approx(16)
    assert _value(s, "matmul.local", "vec_pos_inner_spatial") == 1
    assert _value(s, "matmul.local", "parallel_len") == pytest.approx(8)
    assert _value(s, "matmul.local", "parallel_pos_outer_spatial") == 1
    # Its local buffer is the 8x16 tile, refilled once per (i.0, j.0) iteration.
    assert _value(s, "matmul.local", "alloc_size") == pytest.approx(8 * 16 * 4)
    assert _value(s, "matmul.local", "alloc_outer_prod") == pytest.approx(8 * 3)
    assert _value(s, "matmul.local", "is_reduction") == 1
    # The copy-out statement writes the whole output once.
    assert _value(s, "matmul", "outer_prod") == pytest.approx(64 * 48)
    assert _value(s, "matmul", "float_mad") == 0
    row = state_features(s)[1]
    names = [n for n in FEATURE_NAMES]
    accs = [row[names.index(f"B{b}.acc_write")] for b in range(5)]
    assert sum(accs) == 1  # exactly one written buffer


def test_reuse_and_stride_of_a_plain_gemm():
    dag = _gemm(16, 16, 16)
    s = dag.init_state()  # loops i, j, k: A[i,k] is reused across j, B[k,j] across i
    m = state_features(s)[0]
    names = FEATURE_NAMES
    rows = {}
    for b in range(3):
        base = f"B{b}."
        vals = {n[len(base):]: _unlog(m[names.index(n)]) for n in names if n.startswith(base)}
        rows[b] = vals
    # C (read-write accumulator) is reused across k; A varies along k (stride 1), B along k
    # (stride 16).
    strides = sorted(v["stride"] for v in rows.values())
    assert strides == pytest.approx([1, 1, 16])
    acc = [v for v in rows.values() if v["acc_readwrite"] == 1]
    assert len(acc) == 1 and acc[0]["reuse_loop"] == 1
    assert acc[0]["reuse_ct"] == pytest.approx(16) and acc[0]["reuse_dis_iter"] == pytest.approx(1)
    # A[i, k] is carried by j (16 k-iterations apart), B[k, j] by i (16 x 16 iterations apart).
    assert sorted(v["reuse_dis_iter"] for v in rows.values()) == pytest.approx([1, 16, 256])
    assert _value(s, "matmul", "B0.unique_bytes") <= 16 * 16 * 4 + 1e-6


def _max_set_rows(s) -> float:
    return max(_value(s, "matmul", f"B{b}.set_rows") for b in range(5))


@pytest.mark.parametrize("k, expect", [(1024, 16), (512, 8), (1056, 1), (1025, 16)])
def test_set_rows_counts_register_tile_rows_sharing_an_l1_set(k, expect):
    # A 16x16 register tile inside the reduction loop: its 16 rows of A are k floats apart.
    # 4 KiB apart (k=1024) they all share one L1 set; 2 KiB apart, two sets take 8 each; 4224 B
    # apart every row has its own set; 4100 B apart they drift 4 B per row, still one set.
    s = _gemm(64, 64, k).init_state()
    s = s.split("matmul", "i", [16]).split("matmul", "j", [16])
    s = s.reorder("matmul", ["i.0", "j.0", "k", "i.1", "j.1"])
    assert _max_set_rows(s) == pytest.approx(expect)


def test_set_rows_is_one_without_loops_inside_the_reduction():
    s = _gemm(64, 64, 1024).init_state()  # i, j, k: nothing runs inside k
    assert _max_set_rows(s) == pytest.approx(1)


@pytest.mark.parametrize("rows, expect", [(1024, 16), (1056, 1)])
def test_set_rows_of_a_stage_without_reduction_counts_its_innermost_loop(rows, expect):
    # A transposing copy: out[i, j] = A[j, i]. Its innermost loop (16 lanes of j) reads 16 rows of
    # A, 4 KiB apart when A's rows hold 1024 floats (one L1 set), 4224 B apart with 1056.
    dag = ansor.ComputeDAG(W.transpose((16, rows)))
    s = dag.init_state()
    worst = max(_value(s, "transpose", f"B{b}.set_rows") for b in range(5))
    assert worst == pytest.approx(expect)


POP_WORKLOADS = ["matmul", "matmul_relu", "conv2d_bias_relu", "softmax", "norm", "conv2d_nhwc"]


def _population(name: str, n: int = 48):
    from tests.sketch.test_init_population import WORKLOADS as INIT_WORKLOADS, make_dag

    if name in INIT_WORKLOADS:
        dag = make_dag(name)
    else:
        dag = ansor.ComputeDAG(W.conv2d_nhwc(1, 14, 14, 16, 16, 3, 3, 1, 1))

    class Task:
        compute_dag = dag
        workload_key = dag.workload_key
        hardware_params = host_hardware_params()

    pol = SketchPolicy(Task(), RandomModel(0), SearchParams(population_size=n, num_cores=2), seed=1)
    return pol.sample_initial_population(n)


@pytest.mark.parametrize("name", POP_WORKLOADS)
def test_feature_nests_agree_with_lowering(name):
    """Loop extents, attach chains and local buffer shapes the features use are what lowering
    builds, for states the search produces."""
    pop = _population(name)
    assert pop
    for s in pop:
        nests = _nests(s, _stage_infos(s))
        lw = _Lowering(s, "x")
        lw._effective_bodies()
        lw._params()
        lw._bounds()
        for k, nest in nests.items():
            c = lw.ctx[k]
            assert list(nest.own_ext) == list(c.ext), (s.stages[k].name, str(s))
            assert [int(e) for e in nest.ext[: nest.n_enc]] == [e for _, e, _ in c.enclosing]
            if c.region_local:
                assert tuple(nest.region) == c.buffer.shape


def test_population_features_shape_and_cache():
    pop = _population("matmul", 32)
    rows, group = get_per_store_features(pop)
    assert rows.shape == (group.sum(), NUM_FEATURES)
    assert (group >= 1).all() and np.isfinite(rows).all()
    again, _ = get_per_store_features(pop)
    assert np.array_equal(rows, again)
    assert state_features(pop[0]) is state_features(pop[0])  # computed once per state


@pytest.mark.parametrize("case", CASES[::3], ids=[c.id for c in CASES[::3]])
def test_random_step_sequences_featurise(case):
    """Any valid state gets finite features, one row per non-inlined compute stage."""
    dag = ansor.ComputeDAG(case.make())
    rng = random.Random(7)
    for _ in range(4):
        s = random_state(dag.init_state(), rng, 12)
        rows, group = get_per_store_features([s])
        n_stmt = sum(1 for st in s.stages if not st.is_placeholder and st.compute_at != "inline")
        assert group[0] in (0, n_stmt)
        assert np.isfinite(rows).all()


def test_dump_features_is_readable():
    s = _gemm().init_state()
    text = dump_features(s)
    assert FEATURE_VERSION in text and "statement matmul:" in text
    assert "float_mad" in text and "# float multiply-adds" in text
    full = dump_features(s, nonzero_only=False)
    assert full.count("\n") >= NUM_FEATURES
