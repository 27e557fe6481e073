"""DaskBuilder and DaskRunner on a LocalCluster (two worker processes on loopback, one holding
the ``measure`` resource): the results of the local builder and runner, with builds spread over
every worker and measurements only on the measuring one; every result names its host; workers
of another CPU kind or thread count are refused with a message saying why; a scheduler that
cannot be reached, or the extra not installed, is a clear error; a wedged worker cannot hang the
tuner.
"""
from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed import get_task_stream

from measure.builder import LocalBuilder
from measure.cluster import Cluster, identity_difference, read_facts, threads_conflict
from measure.cluster_fanout import STALLED, fan_out
from measure.dask_builder import DaskBuilder
from measure.dask_runner import DaskRunner
from measure.host import this_host
from measure.local import measure_batch
from measure.measure import MeasureErrorNo as Err, MeasureInput, MeasureUnavailableError
from measure.runner import LocalRunner
from measure.target import toolchain_identity
from tests.dask_cluster import client, cluster, pretend, pretend_host, workers  # noqa: F401 - fixtures
from tests.measure import faults as F

FAST = dict(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0)
ROOT = Path(__file__).resolve().parents[2]



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
                                                      "tcp://127.0.0.1:9: Connection refused"):
        DaskBuilder("tcp://127.0.0.1:9", connect_timeout=1)
    with pytest.raises(ValueError, match="scheduler address"):
        DaskRunner("tcp://a\nb")


def test_without_the_extra_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install 'ansor-py\[cluster\]'"):
        DaskRunner("tcp://127.0.0.1:8786")
    assert not Cluster._shared  # nothing half-connected is left behind


def test_worker_facts_are_checked_and_differences_named():
    ours = toolchain_identity()
    good = {"host": "node\n7", "identity": dict(ours), "env_threads": None, "usable_cpus": 4}
    f = read_facts("tcp://w:1", good, {"measure": 1})
    assert f.host == "node_7" and f.measures and identity_difference(f.identity, ours) is None
    assert not read_facts("tcp://w:1", good, {}).measures
    for bad, why in (([], "must be a dict"), ({**good, "identity": {"key": 1}}, "identity"),
                     ({**good, "usable_cpus": 0}, "CPU count"),
                     ({**good, "env_threads": 2}, "ANSOR_NUM_THREADS")):
        with pytest.raises(ValueError, match=why):
            read_facts("tcp://w:1", bad, {})
    other = dict(ours, key="1" * 16, llvm="99.0.0")
    assert f"LLVM '99.0.0' where the target has {ours['llvm']!r}" in identity_difference(other, ours)
    assert threads_conflict(dataclasses.replace(f, env_threads="4"), 4) is None
    assert "ANSOR_NUM_THREADS=4 but this run times kernels on 2" in threads_conflict(
        dataclasses.replace(f, env_threads="4"), 2)


def test_a_batch_with_no_result_for_the_stall_timeout_ends_with_errors(cluster):
    """A worker wedged outside any sandbox (here: a job that sleeps in the worker itself) does
    not hang the tuner: after ``stall_timeout`` without a result the batch ends with errors."""
    c = Cluster.connect(cluster.scheduler_address)
    try:
        t0 = time.monotonic()
        out = fan_out(c, F.sleep_then, [(2.0, "late")], stall_timeout=0.5, label="test",
                      pick_workers=lambda: c.admit("build", toolchain_identity(), wait=1))
        elapsed = time.monotonic() - t0
    finally:
        c.release()
    assert out[0].kind == STALLED and not out[0].ok
    assert "no result from the cluster within 0.5 s" in out[0].error and elapsed < 1.9


def test_a_host_name_from_a_worker_is_held_to_the_rule(cluster, client):
    measuring, _ = workers(client)
    client.run(pretend_host, "evil\nhost\x1b[2J", workers=[measuring])
    try:
        with LocalBuilder(n_parallel=1) as b, DaskRunner(cluster.scheduler_address, **FAST) as r:
            inputs = batch()[:1]
            res = r.run(inputs, b.build(inputs))
    finally:
        client.run(pretend_host, None, workers=[measuring])
    assert res[0].ok and res[0].host == "evil_host_[2J"  # no control character left


def test_the_core_and_the_cli_work_without_dask():
    """Nothing outside the cluster modules' functions imports Dask: with it unimportable, ansor
    and its command line load and build as before."""
    code = ("import sys; sys.modules['distributed'] = sys.modules['dask'] = None\n"
            "import ansor, ansor.cli, measure.dask_runner, measure.dask_builder\n"
            "from ansor.cli import main; assert main(['workloads']) == 0\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_lost_scheduler_is_not_logged_as_dask_tracebacks(capsys):
    """The run reports a lost scheduler itself; Dask's client ERROR records with the chained
    connection tracebacks are dropped, its other errors still print."""
    import asyncio
    import logging

    import distributed

    from measure.cluster import Cluster

    Cluster._quiet_connection_loss(distributed)
    Cluster._quiet_connection_loss(distributed)  # once only
    log = logging.getLogger("distributed.client")
    assert sum(type(f).__name__ == "_ConnectionLossFilter" for f in log.filters) == 1
    handler = logging.StreamHandler()
    log.addHandler(handler)
    try:
        try:
            try:
                raise distributed.comm.core.CommClosedError("in <TCP (closed)>: reset by peer")
            except distributed.comm.core.CommClosedError:
                raise asyncio.CancelledError()
        except asyncio.CancelledError:
            log.error("", exc_info=True)
        try:
            raise ValueError("something else")
        except ValueError:
            log.error("other failure", exc_info=True)
    finally:
        log.removeHandler(handler)
    err = capsys.readouterr().err
    assert "CommClosedError" not in err and "CancelledError" not in err
    assert "other failure" in err and "ValueError: something else" in err
