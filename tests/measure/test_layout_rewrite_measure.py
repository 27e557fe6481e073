"""Measuring with weight layout rewrite: a task whose constant input is packed by the candidate is
built without the pack (the compiled object says which argument it takes packed) and timed with
the input packed outside the timed calls - exactly, so check_correctness still holds - and a task
without it measures the pack inside, as before."""
from __future__ import annotations

import ansor
from measure.builder import LocalBuilder, build_job
from measure.measure import MeasureErrorNo, MeasureInput
from measure.runner import LocalRunner
from sketch.transform_steps import steps_to_json

from ..sketch.test_pack import packed_gemm


def test_build_job_leaves_the_pack_out_only_when_asked():
    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    args = (dag.workload_key, dag.to_json(), steps_to_json(s.steps), None)
    plain, err, msg = build_job(*args)
    assert err == MeasureErrorNo.NO_ERROR, msg
    assert plain.packed_args == () and [a.shape for a in plain.args] == [(5, 3), (3, 37), (5, 37)]
    packed, err, msg = build_job(*args, (1,))
    assert err == MeasureErrorNo.NO_ERROR, msg
    assert [a.shape for a in packed.args] == [(5, 3), (3, 3, 16), (5, 37)]
    assert [(p.position, p.dim, p.block) for p in packed.packed_args] == [(1, 1, 16)]
    # only the default build function rewrites (a custom one gets the state as it is)
    other, _, _ = build_job(*args[:3], "measure.builder:default_build_func", (1,))
    assert other.packed_args == ()


def test_a_costly_pack_is_measured_outside_with_rewrite(monkeypatch):
    """M = 2 rows against a 1024 x 1024 B: copying B (4 MB) costs several times the product, so
    the candidate measured with the pack outside is much cheaper; both pass check_correctness
    (the runner packs the workload's input exactly). One thread: on a loaded machine a parallel
    kernel's barriers make both times scheduler noise."""
    monkeypatch.setenv("ANSOR_NUM_THREADS", "1")
    dag, s = packed_gemm(2, 1024, 1024, (2, 64), (2, 16, 8))
    plain_task = ansor.SearchTask(tensors=dag)
    task = ansor.SearchTask(tensors=dag, layout_rewrite_inputs=[1])
    assert task.layout_rewrite and not plain_task.layout_rewrite
    assert task.workload_key == plain_task.workload_key  # the same workload either way
    with LocalBuilder(n_parallel=1) as b, LocalRunner(check_correctness=True, repeat=3,
                                                      min_repeat_ms=20, warmup_ms=50) as r:
        inputs = [MeasureInput(plain_task, s), MeasureInput(task, s)]
        built = b.build(inputs)
        assert [x.compiled.packed_args != () for x in built] == [False, True]
        inside, outside = r.run(inputs, built)
    assert inside.ok and outside.ok, (inside, outside)
    assert outside.mean_cost < 0.7 * inside.mean_cost, (inside, outside)


def test_build_jobs_carry_the_tasks_constant_inputs():
    from measure.builder import make_build_jobs

    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    jobs = make_build_jobs([MeasureInput(ansor.SearchTask(tensors=dag), s),
                            MeasureInput(ansor.SearchTask(tensors=dag, layout_rewrite_inputs=[1]), s)], None)
    assert [j[4] for j in jobs] == [(), (1,)]
