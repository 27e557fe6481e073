"""Tuning on a Dask cluster, end to end (issue 21's done-when), on a LocalCluster of two worker
processes on loopback, one holding the ``measure`` resource:

* the same fixed-seed run gives the same candidates, and a log equivalent to the local one;
* a worker killed with SIGKILL mid-batch (the measuring one, or a build-only one) loses nothing
  measured, and the run completes;
* a scheduler shutdown ends the run cleanly, saying how to resume, and it resumes locally from
  its log.

Tiny workloads (matmul 16^3, 8 trials) and a fast runner: these check the plumbing, not timing.
The kills happen at an event (a result arriving), never after a sleep.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import ansor
from cost_model.cost_model import RandomModel
from measure.builder import LocalBuilder
from measure.dask_builder import DaskBuilder
from measure.dask_runner import DaskRunner
from measure.host import this_host
from measure.runner import LocalRunner
from sketch.search_policy import SearchParams
from tests.dask_cluster import client, cluster, local_cluster, sigkill, workers  # noqa: F401 - fixtures

FAST = dict(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0)
# No measured state seeds the search and the model scores at random from its seed: the
# candidates then depend on the seed and on what was measured, never on the measured times,
# which differ between any two runs.
SEEDED = SearchParams(population_size=64, num_generations=1, use_measured_ratio=0.0)



@pytest.fixture
def task():
    return ansor.SearchTask(func="matmul", args=(16, 16, 16))


def opts(builder, runner, log: Path, trials: int = 8, per_round: int = 4) -> ansor.TuningOptions:
    return ansor.TuningOptions(num_measure_trials=trials, num_measures_per_round=per_round,
                               log_file=str(log), builder=builder, runner=runner, seed=3,
                               search_params=SEEDED, verbose=0)


def records(log: Path) -> list[dict]:
    return [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]


class BatchRunner(DaskRunner):
    """A DaskRunner that knows the size and number of the batch it is measuring."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.batch, self.batches = 0, 0

    def run(self, inputs, build_results, verbose=0):
        self.batch, self.batches = len(inputs), self.batches + 1
        return super().run(inputs, build_results, verbose)


def test_a_fixed_seed_run_gives_the_same_candidates_and_an_equivalent_log(cluster, task,
                                                                            tmp_path):
    with LocalBuilder(n_parallel=2) as b, LocalRunner(**FAST) as r:
        local = task.tune(opts(b, r, tmp_path / "local.json"), cost_model=RandomModel(3))
    with DaskBuilder(cluster.scheduler_address) as b, \
            DaskRunner(cluster.scheduler_address, **FAST) as r:
        remote = task.tune(opts(b, r, tmp_path / "dask.json"), cost_model=RandomModel(3))
    a, d = records(tmp_path / "local.json"), records(tmp_path / "dask.json")
    assert local.trials == remote.trials == 8 and local.stop_reason == remote.stop_reason

    def same(rec: dict) -> tuple:  # all but the times
        i, r = rec["input"], rec["result"]
        return (i["workload_key"], i["task"], i["target"], i["steps"], r["error_no"], r["host"])

    assert len(a) == len(d) == 8 and [same(x) for x in a] == [same(x) for x in d]
    assert len({json.dumps(x["input"]["steps"]) for x in d}) == 8  # 2 rounds, no repeats
    assert all(x["result"]["error_no"] == 0 and x["result"]["costs"][0] > 0 for x in a + d)
    assert {x["result"]["host"] for x in d} == {this_host()}
    # The log is a log like any other: the best record replays here.
    ansor.build(task.apply_best(tmp_path / "dask.json"))


def test_sigkill_of_the_measuring_worker_mid_batch_loses_nothing(cluster, client, task,
                                                                   tmp_path):
    measuring, _ = workers(client)
    before_kill: list = []
    killed: list[int] = []

    def on_result(res) -> None:
        if runner.batch == 8 and not killed:
            before_kill.append(res)
            if len(before_kill) == 2:  # two of the round's eight measured, six to go
                killed.append(sigkill(client, measuring))

    log = tmp_path / "kill.json"
    with DaskBuilder(cluster.scheduler_address) as b, \
            BatchRunner(cluster.scheduler_address, on_result=on_result, **FAST) as runner:
        res = task.tune(opts(b, runner, log, trials=8, per_round=8))
    assert killed, "the measuring worker was never killed"
    assert res.trials == 8 and res.errors == 0 and res.stop_reason == "trial budget reached"
    recs = records(log)
    assert len(recs) == 8 and all(x["result"]["error_no"] == 0 for x in recs)
    # What was measured before the kill is in the log as it was measured (not lost, not
    # measured again); the rest was measured by the restarted worker.
    logged = [tuple(x["result"]["costs"]) for x in recs]
    assert all(r.ok and tuple(r.costs) in logged for r in before_kill)
    again, _ = workers(client)
    assert again != measuring and client.run(os.getpid, workers=[again])[again] != killed[0]


def test_sigkill_of_a_build_worker_mid_batch_loses_nothing(cluster, client, task, tmp_path):
    _, build_only = workers(client)
    built: list = []
    killed: list[int] = []

    def on_build(res) -> None:
        built.append(res)
        if len(built) == 2 and not killed:  # the default schedule's and one of the round's
            killed.append(sigkill(client, build_only))

    log = tmp_path / "kill.json"
    with DaskBuilder(cluster.scheduler_address, on_result=on_build) as b, \
            DaskRunner(cluster.scheduler_address, **FAST) as r:
        res = task.tune(opts(b, r, log, trials=8, per_round=8))
    assert killed
    assert res.trials == 8 and res.errors == 0 and res.stop_reason == "trial budget reached"
    assert len(records(log)) == 8 and all(x["result"]["error_no"] == 0 for x in records(log))
    assert len(built) >= 9  # the default schedule and all eight candidates came back built


def test_a_scheduler_shutdown_ends_the_run_cleanly_and_it_resumes_locally(task, tmp_path):
    log = tmp_path / "gone.json"
    with local_cluster() as cl:
        def on_result(res) -> None:
            # Calls: the default schedule (twice), round 1, round 2: gone during round 2.
            if runner.batch == 4 and runner.batches == 4 and cl.scheduler.status.name == "running":
                cl.sync(cl.scheduler.close)

        with DaskBuilder(cl.scheduler_address) as b, \
                BatchRunner(cl.scheduler_address, on_result=on_result, **FAST) as runner:
            res = task.tune(opts(b, runner, log, trials=12, per_round=4))
    assert res.measurement_stopped and not res.interrupted, res.stop_reason
    assert f"the Dask scheduler at {cl.scheduler_address} went away" in res.stop_reason
    assert f"the log {log} keeps every finished round" in res.stop_reason
    assert "tune again with the same log to resume" in res.stop_reason
    assert res.trials == 4 and len(records(log)) == 4  # round 1; round 2 abandoned
    with LocalBuilder(n_parallel=2) as b, LocalRunner(**FAST) as r:
        again = task.tune(opts(b, r, log, trials=4, per_round=4))
    assert again.resumed_records == 4 and again.trials == 4 and again.errors == 0
    steps = [json.dumps(x["input"]["steps"]) for x in records(log)]
    assert len(steps) == 8 and len(set(steps)) == 8  # nothing measured twice


def test_the_task_scheduler_and_a_template_tuner_measure_on_the_cluster(cluster, tmp_path):
    from ansor import autotvm

    tasks = [ansor.SearchTask(func="matmul", args=(16, 16, 16)),
             ansor.SearchTask(func="matmul", args=(8, 16, 32))]
    net, tmpl = tmp_path / "net.json", tmp_path / "tmpl.json"
    with DaskBuilder(cluster.scheduler_address) as b, \
            DaskRunner(cluster.scheduler_address, **FAST) as r:
        res = ansor.TaskScheduler(tasks, remeasure_best=1).tune(opts(b, r, net, trials=8))
        summary = autotvm.RandomTuner(autotvm.create_task("matmul", (16, 16, 16)), seed=0).tune(
            4, autotvm.measure_option(builder=b, runner=r), log_file=str(tmpl), batch_size=4,
            verbose=0)
    assert res.trials == 8 and res.stop_reason == "trial budget reached"
    assert summary.trials == 4 and summary.errors == 0
    for log, n in ((net, 8), (tmpl, 4)):
        recs = records(log)
        assert len(recs) == n and all(x["result"]["host"] == this_host() for x in recs)
