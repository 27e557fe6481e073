"""DaskBuilder and DaskRunner on a LocalCluster (two worker processes on loopback, one holding
the ``measure`` resource): the results of the local builder and runner, with builds spread over
every worker and measurements only on the measuring one; every result names its host; workers
of another CPU kind or thread count are refused with a message saying why; a scheduler that
cannot be reached, or the extra not installed, is a clear error.
"""
from __future__ import annotations

import logging
import sys

import pytest
from distributed import Client, get_task_stream

from measure.builder import LocalBuilder
from measure.cluster import Cluster
from measure.dask_builder import DaskBuilder
from measure.dask_runner import DaskRunner
from measure.host import this_host
from measure.local import measure_batch
from measure.measure import MeasureErrorNo as Err, MeasureInput, MeasureUnavailableError
from measure.runner import LocalRunner
from measure.target import toolchain_identity
from tests.dask_cluster import local_cluster, pretend, workers
from tests.measure import faults as F

FAST = dict(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0)


@pytest.fixture(scope="module")
def cluster():
    with local_cluster() as c:
        yield c


@pytest.fixture
def client(cluster):
    with Client(cluster, set_as_default=False) as c:
        yield c


def batch() -> list[MeasureInput]:
    """Good candidates with an invalid schedule and a crashing kernel among them."""
    dag, s = F.gemm_tiled(32, 8, 16)
    good = MeasureInput(F.task(dag), s)
    return [good, F.initial(F.add_dag(64)), F.nested_parallel(32), F.initial(F.segfault_dag()),
            F.initial(F.add_dag(48)), good, F.initial(F.add_dag(40)), F.initial(F.add_dag(24))]


def test_same_results_as_local_builds_everywhere_measures_on_the_measuring_worker(cluster, client):
    inputs = batch()
    with LocalBuilder(n_parallel=2) as lb, LocalRunner(**FAST) as lr:
        local = measure_batch(inputs, lb, lr)
    measuring, build_only = workers(client)
    with DaskBuilder(cluster.scheduler_address) as b, \
            DaskRunner(cluster.scheduler_address, **FAST) as r, \
            get_task_stream(client=client) as stream:
        assert b.cluster is r.cluster  # one connection for the run's builder and runner
        remote = measure_batch(inputs, b, r)
    assert [x.error_no for x in remote] == [x.error_no for x in local] == [
        Err.NO_ERROR, Err.NO_ERROR, Err.INSTANTIATION_ERROR, Err.RUNTIME_DEVICE, Err.NO_ERROR,
        Err.NO_ERROR, Err.NO_ERROR, Err.NO_ERROR]
    assert "SIGSEGV" in remote[3].error_msg and "nested parallel" in remote[2].error_msg
    assert all(x.host == this_host() for x in remote)
    ran = {}
    for t in stream.data:
        kind = t["key"].split("-")[1] if t["key"].startswith("ansor-") else "?"
        ran.setdefault(kind, set()).add(t["worker"])
    assert ran["build"] == {measuring, build_only}  # builds fan out to every worker
    assert ran["measure"] == {measuring}  # measurements only where the resource is


def test_a_worker_of_another_cpu_kind_is_refused_with_the_reason(cluster, client, caplog):
    measuring, build_only = workers(client)
    client.run(pretend, cpu="znver9", workers=[build_only])
    try:
        with caplog.at_level(logging.WARNING, logger="ansor.cluster"), \
                DaskBuilder(cluster.scheduler_address) as b, \
                DaskRunner(cluster.scheduler_address, **FAST) as r, \
                get_task_stream(client=client) as stream:
            res = measure_batch(batch()[:4], b, r)
    finally:
        client.run(pretend, workers=[build_only])
    assert [x.error_no for x in res] == [Err.NO_ERROR, Err.NO_ERROR, Err.INSTANTIATION_ERROR,
                                         Err.RUNTIME_DEVICE]
    assert {t["worker"] for t in stream.data if t["key"].startswith("ansor-build")} == {measuring}
    refusals = [r.getMessage() for r in caplog.records if build_only in r.getMessage()]
    assert any("refused for building" in m and "CPU 'znver9' where the target has "
               f"{toolchain_identity()['cpu']!r}" in m and "CPU features differ" in m
               for m in refusals), refusals


def test_no_worker_of_the_target_kind_stops_with_how_to_start_one(cluster):
    other = dict(toolchain_identity(), cpu="znver9", key="f" * 16)
    with DaskBuilder(cluster.scheduler_address, target=other, worker_wait=0.5) as b:
        with pytest.raises(MeasureUnavailableError) as err:
            b.build(batch()[:1])
    msg = str(err.value)
    assert f"no worker of the Dask cluster at {cluster.scheduler_address} may build" in msg
    assert f"CPU {toolchain_identity()['cpu']!r} where the target has 'znver9'" in msg
    assert f"ansor worker {cluster.scheduler_address}" in msg


def test_a_measuring_worker_with_another_thread_count_is_refused(cluster, client):
    measuring, build_only = workers(client)
    client.run(pretend, env_threads="2", workers=[measuring])
    try:
        with LocalBuilder(n_parallel=1) as b, \
                DaskRunner(cluster.scheduler_address, worker_wait=0.5, **FAST) as r:
            inputs = batch()[:1]
            built = b.build(inputs)
            with pytest.raises(MeasureUnavailableError) as err:
                r.run(inputs, built)
    finally:
        client.run(pretend, workers=[measuring])
    msg = str(err.value)
    assert (f"{measuring}: it was started with ANSOR_NUM_THREADS=2 but this run times kernels on "
            "1 thread(s)") in msg
    assert f"{build_only}: it does not hold the 'measure' resource (builds only)" in msg


def test_an_unreachable_scheduler_is_a_clear_error():
    with pytest.raises(MeasureUnavailableError, match="cannot reach the Dask scheduler at "
                                                      "tcp://127.0.0.1:9 within 1 s"):
        DaskBuilder("tcp://127.0.0.1:9", connect_timeout=1)
    with pytest.raises(ValueError, match="scheduler address"):
        DaskRunner("tcp://a\nb")


def test_without_the_extra_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install 'ansor-py\[cluster\]'"):
        DaskRunner("tcp://127.0.0.1:8786")
    assert not Cluster._shared  # nothing half-connected is left behind
