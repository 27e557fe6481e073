"""Templates: the registry, and every built-in template computing what the numpy reference
computes under its fallback and random configurations, on small odd shapes.

Each configuration is compiled (LLVM) and run on random inputs; the expected values come both
from the reference evaluator and from the independent numpy implementations of
``tests/workloads.py``. The exhaustive checks over every configuration of small spaces are slow.
"""
from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

import ansor
from ansor import autotvm
from ansor.autotvm.task import InstantiationError, _BY_WORKLOAD, _TEMPLATES
from compute import reference
from tests.util import assert_matches_reference, run_kernel
from tests.workloads import np_conv_channels_last, np_depthwise_nhwc, np_gelu, np_matmul, np_relu

REQUIRED = ("matmul", "dense", "batch_matmul", "conv2d_nhwc", "depthwise_conv2d_nhwc",
            "conv2d_bias_relu")


def _numpy(workload: str, args: tuple, xs: list[np.ndarray]) -> np.ndarray:
    """Independent expected output (float64) of the workloads the templates serve."""
    if workload in ("matmul", "matmul_relu", "batch_matmul"):
        out = np_matmul(xs[0], xs[1])
        return np_relu(out) if workload == "matmul_relu" else out
    if workload == "dense":
        return np_matmul(xs[0], xs[1], tb=True) + xs[2]
    if workload == "dense_bias_gelu":
        return np_gelu(np_matmul(xs[0], xs[1], tb=True) + xs[2])
    if workload in ("conv2d_nhwc", "conv2d_bias_relu"):
        stride, padding = args[7], args[8]
        out = np_conv_channels_last(xs[0], xs[1], stride, padding)
        return np_relu(out + xs[2]) if workload == "conv2d_bias_relu" else out
    if workload == "group_conv2d_nhwc":
        return np_conv_channels_last(xs[0], xs[1], args[7], args[8], args[9], args[10])
    if workload == "depthwise_conv2d_nhwc":
        return np_depthwise_nhwc(xs[0], xs[1], args[6], args[7])
    raise KeyError(workload)


# (workload, args): odd and non-square shapes, strides, a depthwise multiplier, groups.
CASES = [
    ("matmul", (17, 24, 12)),
    ("matmul_relu", (16, 9, 8)),
    ("dense", (7, 20, 16)),
    ("dense_bias_gelu", (6, 16, 9)),
    ("batch_matmul", (3, 7, 12, 9)),
    ("conv2d_nhwc", (1, 7, 9, 6, 8, 3, 3, 1, 1)),
    ("conv2d_nhwc", (2, 9, 9, 4, 6, 3, 3, 2, 1)),
    ("group_conv2d_nhwc", (1, 7, 7, 8, 8, 3, 3, 1, 1, 1, 2)),
    ("conv2d_bias_relu", (1, 8, 6, 4, 12, 3, 3, 1, 1)),
    ("depthwise_conv2d_nhwc", (1, 9, 7, 6, 3, 3, 1, 1)),
    ("depthwise_conv2d_nhwc", (1, 8, 8, 4, 3, 3, 2, 1, 1, 2)),
]


def _check(task: autotvm.TemplateTask, indices, seed: int = 0) -> None:
    wl, args = task.search_task.workload_name, task.search_task.args
    inputs = reference.random_inputs(task.dag, seed)
    want = _numpy(wl, args, inputs)
    for i in indices:
        state = task.instantiate(i)
        kernel = ansor.build(state)
        assert_matches_reference(kernel, task.dag, inputs, what=f"{task} config {i}")
        got = run_kernel(kernel, task.dag, inputs)[-1]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{task} config {i}")


# ---- the registry ------------------------------------------------------------------------------

def test_every_required_workload_has_a_template():
    for w in REQUIRED:
        t = autotvm.template_for_workload(w)
        assert t.name == w and w in t.workloads and t.doc
    assert {t.name for t in autotvm.list_templates()} >= set(REQUIRED)


def test_unknown_names_are_clear_errors():
    with pytest.raises(KeyError, match="no template named 'gemmm'; registered templates: .*matmul"):
        autotvm.get_template("gemmm")
    with pytest.raises(KeyError, match="no template for workload 'softmax'"):
        autotvm.create_task("softmax", (4, 8))
    with pytest.raises(KeyError, match="nosuchop"):
        autotvm.create_task("nosuchop", (4,))
    with pytest.raises(TypeError, match="workload name or a SearchTask"):
        autotvm.TemplateTask(42)


def test_a_task_takes_another_template_by_name():
    task = autotvm.create_task("matmul_relu", (8, 8, 8), template="matmul", name="mm")
    assert task.template.name == "matmul" and task.name == "mm" and len(task.space) > 1
    st = ansor.SearchTask(func="matmul", args=(8, 8, 8))
    assert autotvm.TemplateTask(st).search_task is st



def test_registration_rules(scratch_templates):
    scratch_templates.append("t_reg")

    @autotvm.register_template("t_reg", workloads=("norm",))
    def tmpl(cfg, dag):
        cfg.define_knob("k", [1, 2])
        return dag.init_state()

    assert autotvm.template_for_workload("norm").func is tmpl
    with pytest.raises(ValueError, match="already registered"):
        autotvm.register_template("t_reg")(tmpl)
    with pytest.raises(ValueError, match="already have a template"):
        autotvm.register_template("t_other", workloads=("matmul",))(tmpl)
    task = autotvm.create_task("norm", (4, 4))
    assert len(task.space) == 2 and task.instantiate(1).steps == ()


def test_a_config_whose_steps_do_not_apply_raises_instantiation_error(scratch_templates):
    scratch_templates.append("t_bad")

    @autotvm.register_template("t_bad", workloads=())
    def tmpl(cfg, dag):
        cfg.define_knob("ann", ["unroll", "vectorize"])
        s = dag.init_state()
        return s.annotate("matmul", "k", cfg["ann"].val)  # vectorizing a reduction is invalid

    task = autotvm.create_task("matmul", (8, 8, 8), template="t_bad")
    assert task.instantiate(0).steps
    with pytest.raises(InstantiationError, match="cannot vectorize reduction loop k"):
        task.instantiate(1)


def test_a_template_that_fails_on_collection_names_itself(scratch_templates):
    scratch_templates.append("t_broken")

    @autotvm.register_template("t_broken", workloads=())
    def tmpl(cfg, dag):
        return dag.init_state().split("matmul", "nope", [2])

    with pytest.raises(ValueError, match="template 't_broken' failed on matmul.*no loop named 'nope'"):
        autotvm.create_task("matmul", (8, 8, 8), template="t_broken")


# ---- correctness -------------------------------------------------------------------------------

@pytest.mark.parametrize("workload, args", CASES, ids=[f"{w}-{'x'.join(map(str, a))}" for w, a in CASES])
def test_fallback_and_random_configs_match_the_reference(workload, args):
    task = autotvm.create_task(workload, args)
    rng = random.Random(zlib.crc32(repr((workload, args)).encode()))
    picks = [task.space.fallback().index] + [rng.randrange(len(task.space)) for _ in range(4)]
    _check(task, picks)


def test_fallback_gemm_is_the_hand_schedule_shape():
    """The untuned GEMM is the hand schedule's: 128 x 128 parallel tiles, 8 x 32 register tile
    (unrolled rows, vectorized columns), K blocked by 128."""
    task = autotvm.create_task("matmul", (1024, 1024, 1024))
    fb = task.space.fallback()
    assert fb["tile_y"].size == (8, 16, 8) and fb["tile_x"].size == (8, 4, 32)
    assert fb["tile_k"].size == (8, 128) and fb["ann_reg"].anns == ("unroll", "vectorize")
    text = str(task.fallback_state())
    assert "parallel" in text and "vectorize j.1 (0,32)" in text and "unroll i.1 (0,8)" in text


@pytest.mark.slow
@pytest.mark.parametrize("workload, args", [
    ("depthwise_conv2d_nhwc", (1, 4, 6, 4, 3, 3, 1, 1)),
    ("conv2d_bias_relu", (1, 2, 2, 2, 4, 3, 3, 1, 1)),
])
def test_every_config_of_a_small_space_matches_the_reference(workload, args):
    task = autotvm.create_task(workload, args)
    assert len(task.space) <= 400
    _check(task, range(len(task.space)))


@pytest.mark.slow
@pytest.mark.parametrize("workload, args", CASES, ids=[f"{w}-{'x'.join(map(str, a))}" for w, a in CASES])
def test_many_random_configs_match_the_reference(workload, args):
    task = autotvm.create_task(workload, args)
    rng = random.Random(7)
    _check(task, [rng.randrange(len(task.space)) for _ in range(25)], seed=1)
