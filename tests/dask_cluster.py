"""A small Dask cluster on loopback for the cluster tests: a scheduler and two worker processes of
one thread each, one holding the ``measure`` resource (it builds and measures), one without (it
builds only). Workers run under nannies, so a worker killed with SIGKILL is restarted, as
``dask worker`` restarts it.

Kernels run on one thread (``ANSOR_NUM_THREADS=1`` for the tuner and the workers): the machine
is shared, and these tests are about faults and equivalence, not speed.
"""
from __future__ import annotations

import contextlib
import copy
import os
import signal
from typing import Any, Iterator

import pytest
from distributed import Client, LocalCluster


@contextlib.contextmanager
def local_cluster() -> Iterator[LocalCluster]:
    """A LocalCluster: worker 0 measures (``measure=1``), worker 1 builds only."""
    saved = os.environ.get("ANSOR_NUM_THREADS")
    os.environ["ANSOR_NUM_THREADS"] = "1"  # inherited by the worker processes
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", resources={"measure": 1})
    try:
        (name, spec), = cluster.new_worker_spec().items()
        spec = copy.deepcopy(spec)
        spec["options"].pop("resources", None)
        cluster.worker_spec[name] = spec
        cluster.sync(cluster._correct_state)
        with Client(cluster, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=60)
        yield cluster
    finally:
        if cluster.scheduler is not None and cluster.scheduler.status.name != "running":
            # A test shut the scheduler down: asking it to terminate again would wait for a
            # connection timeout; the workers are closed all the same.
            cluster.shutdown_scheduler = False
        cluster.close(timeout=30)
        if saved is None:
            os.environ.pop("ANSOR_NUM_THREADS", None)
        else:
            os.environ["ANSOR_NUM_THREADS"] = saved


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """One cluster per test module (starting one takes seconds)."""
    with local_cluster() as c:
        yield c


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster, set_as_default=False) as c:
        yield c


def workers(client: Client) -> tuple[str, str]:
    """(the measuring worker's address, the build-only worker's address)."""
    info = client.scheduler_info()["workers"]
    measuring = [a for a, w in info.items() if w.get("resources", {}).get("measure")]
    others = [a for a in info if a not in measuring]
    assert len(measuring) == 1 and len(others) == 1, info
    return measuring[0], others[0]


def sigkill(client: Client, address: str) -> int:
    """SIGKILL the worker process at ``address`` (its nanny restarts it); returns its pid."""
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, signal.SIGKILL)
    return pid


def pretend(env_threads: str | None = None, cpu: str | None = None) -> Any:
    """Run on a worker (``client.run``): make it report another ANSOR_NUM_THREADS and/or another
    CPU kind, as a worker started differently or on another machine would. ``pretend()``
    undoes it."""
    from measure import target

    if not hasattr(target, "_real_identity"):
        target._real_identity = target.toolchain_identity
    if cpu is None:
        target.toolchain_identity = target._real_identity
    else:
        ident = dict(target._real_identity())
        ident.update(cpu=cpu, key="0" * 16, features=ident["features"] + ",+imaginary")
        target.toolchain_identity = lambda: ident
    if env_threads is None:
        os.environ["ANSOR_NUM_THREADS"] = "1"
    else:
        os.environ["ANSOR_NUM_THREADS"] = env_threads


def pretend_host(name: str | None) -> None:
    """Run on a worker (``client.run``): report ``name`` as the host that measured (None: its
    real name again)."""
    from measure import host, runner

    runner.this_host = host.this_host if name is None else (lambda: name)
