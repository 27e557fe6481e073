"""DaskBuilder: compile candidates on every worker of a Dask cluster.

Builds are independent and take most of a round's time on one machine, so they fan out to every
admitted worker of the cluster (``Cluster.admit``: same toolchain as the target, since object
code runs only where it was compiled for), each build one Dask task. On the worker a build is
the local one (``cluster_worker.build_on_worker``: a sandboxed ``LocalBuilder``), so a candidate
that crashes or hangs the compiler is a ``BuildResult`` with an error code, as locally; a worker
killed mid-batch has its builds run again elsewhere (``cluster_fanout``). Results come back in
input order, with the host that built each one.

It is a ``measure.protocols.Builder``, as ``LocalBuilder`` is, with the same settings
(``BuilderBase``: ``timeout``, ``build_func``, ``memory_limit_gb``, applied on the workers), so
``TuningOptions(builder=DaskBuilder(address))``, the template tuners' ``measure_option`` and the
task scheduler take it as they take the local one. It has no local pool and no ``n_parallel``:
the cluster's admitted workers decide how many builds run at once.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from .builder import BuilderBase, progress_mark
from .checks import check_seconds
from .cluster import Cluster
from .cluster_fanout import STALLED, fan_out
from .cluster_worker import build_on_worker
from .host import clean_host
from .measure import BuildResult, MeasureErrorNo
from .target import toolchain_identity

# Beyond a build's own timeout, what a worker may need before its first result: starting its
# sandbox (Python, numpy and LLVM in a fresh process, a few seconds; WorkerPool allows 120 s).
STALL_SLACK_S = 120.0


class DaskBuilder(BuilderBase):
    """Build candidates on the workers of the Dask cluster at ``cluster`` (a scheduler address
    such as ``"tcp://10.0.0.1:8786"``, a ``distributed.Client``, or a cluster object).

    ``timeout``, ``build_func`` (``"module:function"``, importable on the workers) and
    ``memory_limit_gb`` are ``BuilderBase``'s, applied to each build on its worker.
    ``connect_timeout``: seconds to reach the scheduler (``MeasureUnavailableError`` if it
    cannot be). ``worker_wait``: seconds a batch waits for an admissible worker when there is
    none (a worker restarting) before the run stops. ``target``: the toolchain identity workers
    must have (default: this process's, the one records name). ``on_result``: called in the
    tuner's thread with each build result as it arrives from the cluster (progress displays).
    """

    def __init__(self, cluster: Any, timeout: float = 15, build_func: str | None = None,
                 memory_limit_gb: float | None = 8.0, *, connect_timeout: float = 30.0,
                 worker_wait: float = 60.0, target: dict | None = None,
                 on_result: Callable[[BuildResult], None] | None = None):
        super().__init__(timeout=timeout, build_func=build_func, memory_limit_gb=memory_limit_gb)
        self.worker_wait = check_seconds("DaskBuilder worker_wait", worker_wait)
        self.target = dict(target if target is not None else toolchain_identity())
        self.on_result = on_result
        self.cluster: Cluster | None = Cluster.connect(cluster, connect_timeout)

    def _cluster(self) -> Cluster:
        if self.cluster is None:
            raise RuntimeError("the DaskBuilder is closed")
        return self.cluster

    def build_jobs(self, jobs: Sequence[tuple], verbose: int = 0) -> list[BuildResult]:
        """Build jobs on the cluster; results in order, one per job. Raises
        ``MeasureUnavailableError`` (only) when the cluster cannot build at all."""
        if not jobs:
            return []
        cluster = self._cluster()
        settings = self.settings()

        def mark(i: int, res: BuildResult) -> None:
            if self.on_result is not None:
                self.on_result(res)
            if verbose >= 1:
                print(progress_mark(res.error_no), end="", flush=True)

        outs = fan_out(cluster, build_on_worker, [(job, settings) for job in jobs],
                       pick_workers=lambda: cluster.admit("build", self.target,
                                                          wait=self.worker_wait),
                       stall_timeout=self.timeout + STALL_SLACK_S, label="build",
                       on_result=mark)
        results = []
        for out in outs:
            if out.ok and isinstance(out.value, BuildResult):
                results.append(dataclasses.replace(out.value, host=clean_host(out.value.host)))
                continue
            code = MeasureErrorNo.BUILD_TIMEOUT if out.kind == STALLED else MeasureErrorNo.COMPILE_HOST
            why = out.error if not out.ok else f"not a build result: {type(out.value).__name__}"
            res = BuildResult(None, int(code), f"building on the cluster failed: {why}", 0.0)
            results.append(res)
            if verbose >= 1:
                print(progress_mark(res.error_no), end="", flush=True)
        if verbose >= 1:
            print(flush=True)
        return results

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.release()
            self.cluster = None
