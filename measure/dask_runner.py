"""DaskRunner: time built candidates on the measuring workers of a Dask cluster.

A measuring worker holds the ``measure`` resource (``dask worker --resources measure=1``, what
``ansor worker`` starts); each measurement is a Dask task that needs one unit of it, so a worker
times one candidate at a time, and only one measuring worker per host is admitted
(``Cluster.admit``), so two kernels never share a machine while timed. Before a worker measures,
its toolchain identity is checked against the target and its ``ANSOR_NUM_THREADS`` against the
run's thread count; kernels run on the tuner's thread count (``ANSOR_NUM_THREADS`` where the
tuner runs, else its CPU count: the task's), never on whatever the worker would pick.

On the worker a measurement is the local one (``cluster_worker.measure_on_worker``: a sandboxed
``LocalRunner`` with this runner's settings): a crash, hang or wrong answer is an error code, as
locally. Each result names the host that timed it and is kept as soon as it arrives; a worker
killed mid-batch has its candidates measured again on the measuring workers left or on its
restarted self (``cluster_fanout``). The batch finishes building before it measures
(``measure_batch``), so this run's builds never share a machine with its timings.

It is a ``measure.protocols.Runner``, as ``LocalRunner`` is, with the same settings
(``RunnerBase``, read at each ``run``), so every tuner takes it as it takes the local one. It has
no local pool: the cluster's measuring workers time.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from .builder import progress_mark
from .checks import check_seconds
from .cluster import MEASURE_RESOURCE, Cluster
from .cluster_fanout import STALLED, fan_out
from .cluster_worker import measure_on_worker
from .host import clean_host
from .measure import MAX_FLOAT, BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, network_conditions
from .runner import RunnerBase, build_failure, built
from .target import num_threads, toolchain_identity

# Beyond a measurement's own timeout: starting the worker's sandbox and setting up the workload's
# inputs (and, with check_correctness, its reference outputs: ``reference_timeout``).
STALL_SLACK_S = 120.0


class DaskRunner(RunnerBase):
    """Measure built candidates on the measuring workers of the Dask cluster at ``cluster`` (a
    scheduler address such as ``"tcp://10.0.0.1:8786"``, a ``distributed.Client``, or a cluster
    object).

    The measurement settings are ``RunnerBase``'s, applied on the workers. ``connect_timeout``,
    ``worker_wait``, ``target`` and ``on_result`` (each measurement as it arrives) are as for
    ``DaskBuilder``.
    """

    def __init__(self, cluster: Any, timeout: float = 10, number: int = 3, repeat: int = 1,
                 min_repeat_ms: float = 100, cooldown_interval: float = 0.0,
                 enable_cpu_cache_flush: bool = False, check_correctness: bool = False,
                 memory_limit_gb: float | None = 8.0, warmup_ms: float = 300, cache: str = "warm", *,
                 connect_timeout: float = 30.0, worker_wait: float = 60.0,
                 target: dict | None = None,
                 on_result: Callable[[MeasureResult], None] | None = None):
        super().__init__(timeout=timeout, number=number, repeat=repeat,
                         min_repeat_ms=min_repeat_ms, cooldown_interval=cooldown_interval,
                         enable_cpu_cache_flush=enable_cpu_cache_flush,
                         check_correctness=check_correctness, memory_limit_gb=memory_limit_gb,
                         warmup_ms=warmup_ms, cache=cache)
        self.worker_wait = check_seconds("DaskRunner worker_wait", worker_wait)
        self.target = dict(target if target is not None else toolchain_identity())
        self.on_result = on_result
        self.cluster: Cluster | None = Cluster.connect(cluster, connect_timeout)

    def _cluster(self) -> Cluster:
        if self.cluster is None:
            raise RuntimeError("the DaskRunner is closed")
        return self.cluster

    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult],
            verbose: int = 0) -> list[MeasureResult]:
        """Measure every successfully built candidate on the cluster; results in input order, one
        per input (a candidate whose build failed carries its build error). Raises
        ``MeasureUnavailableError`` (only) when the cluster cannot measure at all."""
        if len(inputs) != len(build_results):
            raise ValueError(f"{len(inputs)} inputs but {len(build_results)} build results")
        cluster = self._cluster()
        results: list[MeasureResult | None] = [None] * len(inputs)
        todo: list[int] = []
        for i, br in enumerate(build_results):
            if built(br):
                todo.append(i)
            else:
                results[i] = build_failure(br, self.cache)
                if verbose >= 1:
                    print(progress_mark(results[i].error_no), end="", flush=True)
        settings = self.settings()
        threads = num_threads()  # the task's: what the search tuned the parallel loops for
        dag_json: dict[str, dict] = {}
        args = []
        for i in todo:
            task = inputs[i].task
            if task.workload_key not in dag_json:
                dag_json[task.workload_key] = task.compute_dag.to_json()
            args.append((task.workload_key, dag_json[task.workload_key],
                         build_results[i].compiled, settings, self.reference_timeout, threads,
                         network_conditions(task)))

        def mark(j: int, res: MeasureResult) -> None:
            if self.on_result is not None:
                self.on_result(res)
            if verbose >= 1:
                print(progress_mark(res.error_no), end="", flush=True)

        stall = self.timeout + STALL_SLACK_S + (self.reference_timeout
                                                if self.check_correctness else 0.0)
        outs = fan_out(cluster, measure_on_worker, args,
                       pick_workers=lambda: cluster.admit("measure", self.target, threads,
                                                          wait=self.worker_wait),
                       stall_timeout=stall, label="measure", resources={MEASURE_RESOURCE: 1},
                       on_result=mark)
        for i, out in zip(todo, outs):
            if out.ok and isinstance(out.value, MeasureResult):
                # A worker's name reaches the log: held to the rule whatever the worker sent.
                results[i] = dataclasses.replace(out.value, host=clean_host(out.value.host))
                continue
            code = MeasureErrorNo.RUN_TIMEOUT if out.kind == STALLED else MeasureErrorNo.RUNTIME_DEVICE
            why = out.error if not out.ok else f"not a measure result: {type(out.value).__name__}"
            results[i] = MeasureResult((MAX_FLOAT,), int(code),
                                       f"measuring on the cluster failed: {why}", 0.0,
                                       cache=self.cache)
            if verbose >= 1:
                print(progress_mark(int(code)), end="", flush=True)
        if verbose >= 1:
            print(flush=True)
        return [r for r in results if r is not None]

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.release()
            self.cluster = None
