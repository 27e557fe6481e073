"""Two-anchor fusion (``RuleTwoAnchorFusion``): a 1x1 conv computed a tile at a time inside the
depthwise conv it feeds (a depthwise conv inside the 1x1 projection after it, a 1x1 inside a
3x3 conv), the intermediate held in a local buffer of the consumer's tile plus the 3x3 halo.

Odd shapes (H, W primes, batch 2), strides 1 and 2: schedules sampled from the fused sketches,
a hand-written one whose buffer size is known, and random step sequences on the fused DAG all
match an independent numpy implementation (or the reference evaluator for random steps).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import ansor
from compute import loop_ir as L
from compute import ops, te
from compute.compute_dag import ComputeDAG
from compute.reference import random_inputs
from sketch.init_population import sample_state
from sketch.loop_state import InvalidStepError, State
from sketch.lower import lower
from sketch.search_params import SearchParams
from sketch.sketch_rules import DEFAULT_RULES, generate_sketches
from tests.util import assert_matches_reference, run_kernel
from tests.workloads import np_conv_channels_last, np_depthwise_nhwc

from .random_schedules import random_state

N, H, W, CIN, HID, COUT = 2, 13, 11, 8, 24, 12
PARAMS = SearchParams(num_cores=2, max_vector_lanes=16)


def _bias_relu6(x, b, relu6: bool = True):
    y = te.compute(x.shape, lambda *i: x[i] + b[i[-1]], name=x.name + "_bias")
    if not relu6:
        return y
    return te.compute(x.shape, lambda *i: te.max(te.min(y[i], 6.0), 0.0), name=x.name + "_relu6")


def expand_dw(stride: int):
    """1x1 conv + bias + relu6 -> 3x3 depthwise (pad 1) + bias + relu6: MobileNet-V2's expand
    and depthwise layers."""
    x = te.placeholder((N, H, W, CIN), "float32", "x")
    w1 = te.placeholder((1, 1, CIN, HID), "float32", "w1")
    b1 = te.placeholder((HID,), "float32", "b1")
    w2 = te.placeholder((3, 3, HID, 1), "float32", "w2")
    b2 = te.placeholder((HID,), "float32", "b2")
    y = _bias_relu6(ops.conv2d_nhwc(x, w1, name="expand"), b1)
    z = _bias_relu6(ops.depthwise_conv2d_nhwc(y, w2, stride, 1, name="dw"), b2)
    return [x, w1, b1, w2, b2, z]


def dw_project(stride: int):
    """3x3 depthwise (pad 1) + bias + relu6 -> 1x1 conv + bias: the depthwise and projection."""
    x = te.placeholder((N, H, W, HID), "float32", "x")
    w2 = te.placeholder((3, 3, HID, 1), "float32", "w2")
    b2 = te.placeholder((HID,), "float32", "b2")
    w3 = te.placeholder((1, 1, HID, COUT), "float32", "w3")
    b3 = te.placeholder((COUT,), "float32", "b3")
    y = _bias_relu6(ops.depthwise_conv2d_nhwc(x, w2, stride, 1, name="dw"), b2)
    z = _bias_relu6(ops.conv2d_nhwc(y, w3, name="project"), b3, relu6=False)
    return [x, w2, b2, w3, b3, z]


def conv1x1_conv3x3(stride: int):
    """1x1 conv + bias + relu6 -> 3x3 conv (pad 1) + bias: a ResNet bottleneck's first two."""
    x = te.placeholder((N, H, W, CIN), "float32", "x")
    w1 = te.placeholder((1, 1, CIN, COUT), "float32", "w1")
    b1 = te.placeholder((COUT,), "float32", "b1")
    w2 = te.placeholder((3, 3, COUT, CIN), "float32", "w2")
    b2 = te.placeholder((CIN,), "float32", "b2")
    y = _bias_relu6(ops.conv2d_nhwc(x, w1, name="reduce"), b1)
    z = _bias_relu6(ops.conv2d_nhwc(y, w2, stride, 1, name="conv3"), b2, relu6=False)
    return [x, w1, b1, w2, b2, z]


def _relu6(x):
    return np.clip(x, 0.0, 6.0)


def np_expand_dw(stride, x, w1, b1, w2, b2):
    y = _relu6(np_conv_channels_last(x, w1) + b1)
    return _relu6(np_depthwise_nhwc(y, w2, stride, 1) + b2)


def np_dw_project(stride, x, w2, b2, w3, b3):
    y = _relu6(np_depthwise_nhwc(x, w2, stride, 1) + b2)
    return np_conv_channels_last(y, w3) + b3


def np_conv1x1_conv3x3(stride, x, w1, b1, w2, b2):
    y = _relu6(np_conv_channels_last(x, w1) + b1)
    return np_conv_channels_last(y, w2, stride, 1) + b2


PATTERNS = {"expand_dw": (expand_dw, np_expand_dw, "expand"), "dw_project": (dw_project, np_dw_project, "dw"),
            "conv1x1_conv3x3": (conv1x1_conv3x3, np_conv1x1_conv3x3, "reduce")}


def _fused_sketches(dag: ComputeDAG, producer: str) -> list[State]:
    """The sketches where the producer anchor is computed inside a tile loop of another stage
    (not written whole at root)."""
    out = []
    for s in generate_sketches(dag, num_cores=2):
        st = next(x for x in s.stages if x.name == producer)
        if st.compute_at == "iter" and not any(x.name == producer + ".local" for x in s.stages):
            out.append(s)
    return out


def _check_numpy(state: State, dag: ComputeDAG, np_fn, stride: int, what: str) -> None:
    inputs = random_inputs(dag.tensors, 1)
    got = run_kernel(ansor.build(state), dag, inputs)[0]
    np.testing.assert_allclose(got, np_fn(stride, *inputs), rtol=1e-4, atol=1e-4, err_msg=what)


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_rule_derives_the_fused_sketches(pattern):
    make, _, producer = PATTERNS[pattern]
    dag = ComputeDAG(make(1))
    fused = _fused_sketches(dag, producer)
    assert fused, "no sketch computes the producer inside the consumer's tiles"
    for s in fused:
        st = next(x for x in s.stages if x.name == producer)
        target = s.stages[st.attach[0]]
        # at the tile loop of the consumer anchor's own consumer (the relu6 or bias stage)
        assert target.name.startswith(("dw_", "project_", "conv3_")), target.name
        assert st.relations, "the producer is tiled too"
    # half of them also compute the producer's bias and relu6 at the tile, once per element
    epilogue = [s for s in fused if s.stages[s.stage_index(producer + "_relu6")].compute_at == "iter"]
    assert 0 < len(epilogue) < len(fused)
    plain = len(generate_sketches(dag, num_cores=2,
                                  rules=[r for r in DEFAULT_RULES if r.name != "two_anchor_fusion"]))
    assert len(generate_sketches(dag, num_cores=2)) > plain, "the unfused sketches stay beside them"


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_sampled_fused_schedules_match_numpy(pattern, stride):
    make, np_fn, producer = PATTERNS[pattern]
    dag = ComputeDAG(make(stride))
    fused = _fused_sketches(dag, producer)
    rng = random.Random(stride)
    for k in range(8):
        state = sample_state(fused[k % len(fused)], rng, PARAMS)
        _check_numpy(state, dag, np_fn, stride, f"{pattern} s{stride} sample {k}:\n{state}")


def _allocs(func: L.PrimFunc) -> dict[str, L.Buffer]:
    return {s.buffer.name: s.buffer for s in L.walk(func.body) if isinstance(s, L.Allocate)}


@pytest.mark.parametrize("stride", [1, 2])
def test_intermediate_buffer_is_the_tile_plus_halo(stride):
    # By hand: the output in 4x4 spatial tiles, the depthwise and the 1x1 conv both computed at
    # the tile; the 1x1's buffer is the tile's input window, (4-1)*stride + 3 per side, every
    # channel the tile reads (all 24), one image - not the 2x13x11x24 tensor.
    make, np_fn, _ = PATTERNS["expand_dw"]
    dag = ComputeDAG(make(stride))
    s = dag.init_state()
    for name in ("expand_bias", "expand_relu6", "dw_pad", "dw_bias"):
        s = s.compute_inline(s.stage_index(name))
    out = s.stage_index("dw_relu6")
    s = s.split(out, 1, [4]).split(out, 3, [4])         # n, ho, hi, wo, wi, c
    s = s.reorder(out, [0, 1, 3, 2, 4, 5])              # n, ho, wo, hi, wi, c
    s = s.compute_at(s.stage_index("dw"), out, 2)
    s = s.compute_at(s.stage_index("expand"), out, 2)
    func = lower(s)
    side = 3 * stride + 3
    assert _allocs(func)["expand"].shape == (1, side, side, HID)
    assert _allocs(func)["expand"].scope == "local"
    _check_numpy(s, dag, np_fn, stride, str(s))


def _random_check(pattern: str, stride: int, seed: int, n_steps: int) -> None:
    make, _, _ = PATTERNS[pattern]
    dag = ComputeDAG(make(stride))
    sketches = generate_sketches(dag, num_cores=2)
    rng = random.Random(seed)
    start = rng.choice(sketches) if rng.random() < 0.7 else dag.init_state()
    state = random_state(start, rng, n_steps)
    try:
        lower(state)
    except InvalidStepError:
        return  # a structurally invalid schedule: the search discards it
    assert_matches_reference(ansor.build(state), dag, random_inputs(dag.tensors, seed % 3), 1e-4, 1e-4,
                             f"{pattern} s{stride} seed={seed} steps={[x.to_json() for x in state.steps]}")


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_random_schedules_of_the_fused_dag(pattern, stride):
    for seed in range(4):
        _random_check(pattern, stride, seed, 12)


def expand_dw_project(stride: int):
    """All three of an inverted residual block: 1x1 -> depthwise 3x3 -> 1x1, each with its bias."""
    x = te.placeholder((N, H, W, CIN), "float32", "x")
    w1 = te.placeholder((1, 1, CIN, HID), "float32", "w1")
    b1 = te.placeholder((HID,), "float32", "b1")
    w2 = te.placeholder((3, 3, HID, 1), "float32", "w2")
    b2 = te.placeholder((HID,), "float32", "b2")
    w3 = te.placeholder((1, 1, HID, COUT), "float32", "w3")
    b3 = te.placeholder((COUT,), "float32", "b3")
    y = _bias_relu6(ops.conv2d_nhwc(x, w1, name="expand"), b1)
    z = _bias_relu6(ops.depthwise_conv2d_nhwc(y, w2, stride, 1, name="dw"), b2)
    return [x, w1, b1, w2, b2, w3, b3, _bias_relu6(ops.conv2d_nhwc(z, w3, name="project"), b3, relu6=False)]


@pytest.mark.parametrize("stride", [1, 2])
def test_the_rule_composes_over_three_anchors(stride):
    # Applied twice (the depthwise inside the projection's tiles, the 1x1 expand inside those
    # too): no intermediate is written whole. The graph offers pairs only; this checks that a
    # chain stays correct when the rule meets it.
    dag = ComputeDAG(expand_dw_project(stride))
    chained = [s for s in generate_sketches(dag, num_cores=2)
               if all(s.stages[s.stage_index(n)].compute_at == "iter" for n in ("expand", "dw"))
               and not any(x.name.endswith(".local") for x in s.stages)]
    assert chained
    rng = random.Random(stride)

    def np_fn(s, x, w1, b1, w2, b2, w3, b3):
        return np_dw_project(s, _relu6(np_conv_channels_last(x, w1) + b1), w2, b2, w3, b3)

    for k in range(4):
        state = sample_state(chained[k % len(chained)], rng, PARAMS)
        assert {b.scope for name, b in _allocs(lower(state)).items() if name in ("expand", "dw")} == {"local"}
        _check_numpy(state, dag, np_fn, stride, f"three anchors s{stride} sample {k}:\n{state}")
