"""A tuner's connection to a Dask cluster, and which of its workers may build and measure.

The distributed engine is Dask's (scheduler, workers, transport, resources, restarts); what is
ours is the rule for who may take part in a tuning run. Code compiled on one machine runs only on
machines of the same kind, and a time measured on one CPU does not compare with a time measured
on another, so before a worker builds or measures anything the tuner asks it for its facts
(``cluster_worker.worker_facts``: host name, toolchain identity, ``ANSOR_NUM_THREADS``, CPUs) and
admits it only if its toolchain identity is the target's - the identity every record of the run
names. A worker of another CPU kind or LLVM is refused with a message naming the difference;
when no worker is left, the run stops (``MeasureUnavailableError``) rather than mixing timings.

Measuring needs more: the worker holds the ``measure`` resource (``dask worker --resources
measure=1``, what ``ansor worker`` starts), its own ``ANSOR_NUM_THREADS``, if set, agrees with
the run's thread count, and it is the only measuring worker admitted on its host: one
measurement at a time per machine, so two kernels never share one while timed.

``Cluster.connect`` shares one ``distributed.Client`` per scheduler address between a run's
builder and runner. ``distributed`` is imported here and in nothing the core imports, so
ansor-py works without the ``cluster`` extra; using a cluster without it says how to install it.
"""
from __future__ import annotations

import asyncio
import logging
import queue
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .checks import check_seconds
from .cluster_address import PROBE_S, ClusterAddressError, check_scheduler_address, probe
from .cluster_worker import worker_facts
from .host import clean_host
from .measure import MeasureUnavailableError

logger = logging.getLogger("ansor.cluster")


class _ConnectionLossFilter(logging.Filter):
    """Drops log records whose exception is a lost connection (or the cancellation it causes)."""

    def __init__(self, comm_closed: type) -> None:
        super().__init__()
        self.kinds = (comm_closed, ConnectionError, asyncio.CancelledError)

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while exc is not None:
            if isinstance(exc, self.kinds):
                return False
            exc = exc.__cause__ or exc.__context__
        return True

INSTALL_HINT = "pip install 'ansor-py[cluster]'"
MEASURE_RESOURCE = "measure"
# A worker's facts: its first answer starts LLVM (well under a second); a worker busy with a long
# task of someone else's answers after it, and is left out of this batch if that takes longer.
PROBE_TIMEOUT = 60.0
# How often membership is checked while waiting: a killed worker is noticed within this.
POLL_S = 0.5
# Scheduler round trips (the worker list); a scheduler that does not answer within this is gone.
RPC_TIMEOUT = 30.0
_IDENTITY_FIELDS = ("key", "cpu", "features", "llvm", "llvmlite", "triple")


def import_distributed() -> Any:
    """The ``distributed`` module, or ImportError saying how to install it."""
    try:
        import distributed  # noqa: PLC0415 - optional: the core works without the extra
    except ImportError as err:
        raise ImportError(f"building and measuring on a Dask cluster needs Dask distributed: "
                          f"{INSTALL_HINT} ({err})") from err
    return distributed


def start_command(address: str) -> str:
    """How to start a measuring worker, for messages."""
    return (f"`ansor worker {address}` (or `dask worker {address} --resources measure=1 "
            "--nthreads 1`)")


@dataclass(frozen=True)
class WorkerFacts:
    """A worker as it described itself (checked: it comes over the network)."""

    address: str
    host: str
    identity: dict
    env_threads: str | None
    usable_cpus: int
    measures: bool  # holds the measure resource


def read_facts(address: str, raw: Any, resources: Any) -> WorkerFacts:
    """``WorkerFacts`` from a worker's answer; ValueError if it is not one."""
    if not isinstance(raw, dict):
        raise ValueError(f"facts must be a dict, got {type(raw).__name__}")
    ident = raw.get("identity")
    if not isinstance(ident, dict) or not all(isinstance(ident.get(k), str)
                                              for k in _IDENTITY_FIELDS):
        raise ValueError("no toolchain identity in its facts")
    env = raw.get("env_threads")
    cpus = raw.get("usable_cpus")
    if env is not None and not isinstance(env, str):
        raise ValueError("bad ANSOR_NUM_THREADS in its facts")
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
        raise ValueError("bad CPU count in its facts")
    measures = isinstance(resources, dict) and _number(resources.get(MEASURE_RESOURCE)) >= 1
    return WorkerFacts(address, clean_host(raw.get("host")), {k: ident[k] for k in _IDENTITY_FIELDS},
                       env, cpus, measures)


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def identity_difference(theirs: dict, target: dict) -> str | None:
    """Why a toolchain identity is not the target's (None if it is): the fields that differ."""
    if theirs.get("key") == target.get("key"):
        return None
    parts = []
    for k, label in (("cpu", "CPU"), ("llvm", "LLVM"), ("llvmlite", "llvmlite"),
                     ("triple", "triple")):
        if theirs.get(k) != target.get(k):
            parts.append(f"{label} {theirs.get(k)!r} where the target has {target.get(k)!r}")
    ours = set(str(target.get("features", "")).split(","))
    their = set(str(theirs.get("features", "")).split(","))
    if ours != their:
        extra, missing = sorted(their - ours), sorted(ours - their)
        parts.append(f"CPU features differ ({len(extra)} extra, {len(missing)} missing, e.g. "
                     f"{(extra + missing)[0][:40]})")
    if not parts:
        parts.append("another toolchain")
    return (f"toolchain {str(theirs.get('key'))[:16]!r} is not the target's "
            f"{str(target.get('key'))[:16]!r}: " + "; ".join(parts))


def threads_conflict(facts: WorkerFacts, threads: int) -> str | None:
    """Why a measuring worker cannot time kernels on ``threads`` threads (None if it can)."""
    if facts.env_threads is None or facts.env_threads.strip() == "":
        return None
    try:
        theirs = int(facts.env_threads.strip())
    except ValueError:
        return f"its ANSOR_NUM_THREADS={facts.env_threads[:20]!r} is not a number"
    if theirs != threads:
        return (f"it was started with ANSOR_NUM_THREADS={theirs} but this run times kernels on "
                f"{threads} thread(s) (ANSOR_NUM_THREADS where the tuner runs, or its CPU "
                "count): start it with the same value, or without it")
    return None


class Cluster:
    """A connection to one Dask scheduler, shared by a run's builder and runner
    (``connect``/``release``), and the facts of its workers."""

    _shared: dict[Any, "Cluster"] = {}

    def __init__(self, client: Any, address: str, owned: bool, key: Any):
        self.client = client
        self.address = address
        self._owned = owned
        self._key = key
        self._users = 0
        self._facts: dict[str, WorkerFacts] = {}
        self._told: set[tuple[str, str]] = set()  # (address, reason) already logged

    # ---- connection ----
    @staticmethod
    def _quiet_connection_loss(distributed: Any) -> None:
        """Dask's client logs a lost scheduler as an ERROR with three chained tracebacks; the run
        reports the loss itself (MeasureUnavailableError: what happened, how to resume), so
        those records are dropped. Other client errors still print."""
        log = logging.getLogger("distributed.client")
        if any(isinstance(f, _ConnectionLossFilter) for f in log.filters):
            return
        log.addFilter(_ConnectionLossFilter(distributed.comm.core.CommClosedError))

    @classmethod
    def connect(cls, where: Any, timeout: float = 30.0) -> "Cluster":
        """The shared connection to ``where``: a scheduler address (``tcp://host:8786``), a
        ``distributed.Client`` (used as is, never closed here) or a cluster object with a
        ``scheduler_address`` (e.g. ``LocalCluster``). Raises ``ClusterAddressError`` (an
        ``InputError``) for an address that is not ``tcp://HOST:PORT`` and
        ``MeasureUnavailableError`` if the scheduler cannot be reached within ``timeout``
        seconds (a refused port or an unknown host within ``PROBE_S``)."""
        distributed = import_distributed()
        timeout = check_seconds("cluster connect timeout", timeout)
        if isinstance(where, distributed.Client):
            key: Any = ("client", id(where))
            address = str(getattr(where.scheduler, "address", "the client's scheduler"))
        elif isinstance(where, str):  # a user's text: checked before Dask sees it
            address, host, port = check_scheduler_address(where)
            key = ("address", address)
        else:  # a cluster object's own address (inproc:// for a LocalCluster without processes)
            address = getattr(where, "scheduler_address", where)
            if not isinstance(address, str) or not address.strip() or not address.isprintable():
                raise ClusterAddressError(f"a Dask scheduler address must be a string like "
                                          f"'tcp://host:8786', got {address!r:.80}")
            address = address.strip()
            key = ("address", address)
        shared = cls._shared.get(key)
        if shared is not None and shared.client.status == "running":
            shared._users += 1
            return shared
        if isinstance(where, distributed.Client):
            cluster = cls(where, address, owned=False, key=key)
        else:
            cls._quiet_connection_loss(distributed)
            if isinstance(where, str):
                # A refused port or an unknown host in seconds, not after Dask's retries.
                why = probe(host, port, min(timeout, PROBE_S))
                if why is not None:
                    raise MeasureUnavailableError(f"cannot reach the Dask scheduler at {address}: "
                                                  f"{why}")
            try:
                client = distributed.Client(address, timeout=timeout, set_as_default=False,
                                            name="ansor-tuner")
            except (OSError, TimeoutError) as err:
                raise MeasureUnavailableError(
                    f"cannot reach the Dask scheduler at {address} within {timeout:g} s: "
                    f"{type(err).__name__}: {err}") from None
            cluster = cls(client, address, owned=True, key=key)
        cls._shared[key] = cluster
        cluster._users = 1
        return cluster

    def release(self) -> None:
        """One user is done; the last one closes the client (if it was opened here)."""
        self._users -= 1
        if self._users > 0:
            return
        if Cluster._shared.get(self._key) is self:
            del Cluster._shared[self._key]
        if self._owned:
            try:
                self.client.close(timeout=5)
            except Exception as err:  # noqa: BLE001 - a scheduler already gone: nothing to close
                logger.debug("closing the Dask client: %s", err)

    def alive(self) -> bool:
        """Whether the scheduler connection is up (a lost one cancels every task under way)."""
        return self.client.status == "running"

    def lost(self) -> MeasureUnavailableError:
        return MeasureUnavailableError(f"the Dask scheduler at {self.address} went away (the "
                                       f"client is {self.client.status})")

    def live_workers(self) -> dict[str, dict]:
        """The workers the scheduler lists as running: address -> its info (host, resources)."""
        if not self.alive():
            raise self.lost()
        try:
            info = self.client.sync(self.client.scheduler.identity, callback_timeout=RPC_TIMEOUT)
        except Exception as err:  # noqa: BLE001 - any failure to ask is the scheduler's
            if not self.alive():
                raise self.lost() from None
            raise MeasureUnavailableError(f"the Dask scheduler at {self.address} does not "
                                          f"answer: {type(err).__name__}: {err}") from None
        workers = info.get("workers", {}) if isinstance(info, dict) else {}
        return {a: w for a, w in workers.items()
                if isinstance(w, dict) and w.get("status", "running") == "running"}

    # ---- who may take part ----
    def _probe(self, workers: dict[str, dict]) -> None:
        """Ask every worker not asked yet for its facts (in parallel, bounded by PROBE_TIMEOUT);
        forget workers that left."""
        for gone in set(self._facts) - set(workers):
            del self._facts[gone]
        new = [a for a in workers if a not in self._facts]
        if not new:
            return
        answers: queue.Queue = queue.Queue()
        futures = {}
        for a in new:
            f = self.client.submit(worker_facts, key=f"ansor-facts-{uuid.uuid4().hex}",
                                   workers=[a], allow_other_workers=False, pure=False,
                                   priority=100)
            futures[f.key] = (a, f)
            f.add_done_callback(lambda fut: answers.put(fut.key))
        deadline = time.monotonic() + PROBE_TIMEOUT
        waiting = set(futures)
        while waiting and time.monotonic() < deadline:
            try:
                key = answers.get(timeout=min(POLL_S, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                if not self.alive():
                    raise self.lost() from None
                continue
            if key not in waiting:
                continue
            waiting.discard(key)
            a, f = futures[key]
            try:
                self._facts[a] = read_facts(a, f.result(timeout=RPC_TIMEOUT),
                                            workers[a].get("resources"))
            except Exception as err:  # noqa: BLE001 - a worker that cannot say what it is
                self._tell(a, f"did not report its facts ({type(err).__name__}: {err})")
        for key in waiting:
            a, f = futures[key]
            self._tell(a, f"did not report its facts within {PROBE_TIMEOUT:g} s; asked again "
                          "next batch")
        for a, f in futures.values():
            f.release()

    def _tell(self, address: str, why: str, level: int = logging.WARNING) -> None:
        if (address, why) not in self._told:
            self._told.add((address, why))
            logger.log(level, "Dask worker %s: %s", address, why)

    def admit(self, purpose: str, target: dict, threads: int | None = None,
              wait: float = 60.0) -> list[str]:
        """The addresses of the workers that may ``"build"`` or ``"measure"`` for ``target`` (a
        toolchain identity) now, waiting up to ``wait`` seconds for one if there is none (a
        worker restarting). Refused workers are logged once with the reason; with none left,
        ``MeasureUnavailableError`` lists every refusal and says how to start a good worker."""
        if purpose not in ("build", "measure"):
            raise ValueError(f"purpose must be 'build' or 'measure', got {purpose!r}")
        deadline = time.monotonic() + wait
        while True:
            workers = self.live_workers()
            self._probe(workers)
            admitted, refused = self._judge(workers, purpose, target, threads)
            if admitted:
                return admitted
            if time.monotonic() >= deadline:
                raise self._none_admitted(purpose, target, refused, bool(workers))
            time.sleep(POLL_S)  # waiting for workers to join: membership is polled

    def _judge(self, workers: dict[str, dict], purpose: str, target: dict,
               threads: int | None) -> tuple[list[str], dict[str, str]]:
        admitted: list[str] = []
        refused: dict[str, str] = {}
        measuring_host: dict[str, str] = {}
        for a in sorted(workers):
            f = self._facts.get(a)
            if f is None:
                refused[a] = "did not report its facts"
                continue
            why = identity_difference(f.identity, target)
            if why is None and purpose == "measure":
                if not f.measures:
                    refused[a] = f"it does not hold the '{MEASURE_RESOURCE}' resource (builds only)"
                    continue
                why = threads_conflict(f, threads or 1)
                if why is None and f.host in measuring_host:
                    why = (f"{measuring_host[f.host]} already measures on host {f.host}: one "
                           "measurement at a time per machine")
                if why is None and threads is not None and threads > f.usable_cpus:
                    self._tell(a, f"kernels run on {threads} threads but host {f.host} has "
                                  f"{f.usable_cpus} usable CPU(s): oversubscribed, slow timings")
            if why is not None:
                refused[a] = why
                verb = "building" if purpose == "build" else "measuring"
                self._tell(a, f"refused for {verb} (host {f.host}): {why}")
                continue
            if purpose == "measure":
                measuring_host[f.host] = a
            admitted.append(a)
        return admitted, refused

    def _none_admitted(self, purpose: str, target: dict, refused: dict[str, str],
                       any_worker: bool) -> MeasureUnavailableError:
        what = f"target (CPU {target.get('cpu')}, toolchain {str(target.get('key'))[:16]})"
        if not any_worker:
            detail = "it has no worker"
        else:
            detail = "; ".join(f"{a}: {why}" for a, why in sorted(refused.items())[:8])
            if len(refused) > 8:
                detail += f"; and {len(refused) - 8} more"
        hint = (f"start one on a machine of the tuning host's kind: {start_command(self.address)}"
                if purpose == "measure" else
                f"start workers on machines of the tuning host's kind: {start_command(self.address)}")
        verb = "measure" if purpose == "measure" else "build"
        return MeasureUnavailableError(f"no worker of the Dask cluster at {self.address} may "
                                       f"{verb} for this {what}: {detail}; {hint}")
