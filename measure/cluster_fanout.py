"""Fan a batch of jobs out to admitted Dask workers and collect every result, whatever happens to
the workers.

Each job is one Dask task restricted to the workers admitted for it (``Cluster.admit``), with
optional resources (``measure=1``: one measurement at a time per measuring worker). Results are
taken as soon as each task finishes (a done-callback feeds a queue, so the tuner waits on an
event, never on a fixed sleep), which keeps what was measured even if its worker dies a moment
later. What can go wrong, and what becomes of the job:

* a worker dies (killed, its machine gone): Dask runs its tasks again on the other admitted
  workers; when none of a task's admitted workers is left, the task is cancelled and submitted
  again to the workers admitted now (waiting for a restarted or new worker, which is checked
  first); a job lost ``max_attempts`` times is an error result;
* Dask gives up on a task whose workers kept dying (``KilledWorker``): an error result;
* no task finishes for ``stall_timeout`` seconds while workers are up (a wedged worker): every
  job still out is an error result, and the batch ends;
* the scheduler goes away: ``MeasureUnavailableError``; the tuner stops with its log intact.

Every wait has a timeout. Ctrl-C (or any error) drops the tasks still out.
"""
from __future__ import annotations

import logging
import queue
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .cluster import POLL_S, RPC_TIMEOUT, Cluster
from .worker_pool import MAX_ERROR_CHARS

logger = logging.getLogger("ansor.cluster")

OK = "ok"
FAILED = "failed"    # the job raised on the worker, or Dask gave up on it (KilledWorker)
STALLED = "stalled"  # no task of the batch finished for stall_timeout seconds
LOST = "lost"        # its workers went away max_attempts times

MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Remote:
    """What became of one job: ``value`` if ``kind`` is OK, else ``error`` says what."""

    kind: str
    value: Any = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == OK


def _text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:MAX_ERROR_CHARS]


def fan_out(cluster: Cluster, fn: Callable[..., Any], args_list: Sequence[tuple], *,
            pick_workers: Callable[[], list[str]], stall_timeout: float, label: str,
            resources: dict | None = None, on_result: Callable[[int, Any], None] | None = None,
            max_attempts: int = MAX_ATTEMPTS) -> list[Remote]:
    """Run ``fn(*args)`` for every entry of ``args_list`` on the workers ``pick_workers()``
    admits; one ``Remote`` per entry, in order. ``on_result(i, value)`` is called (in this
    thread) as each job's value arrives."""
    return _Batch(cluster, fn, args_list, pick_workers, stall_timeout, label, resources,
                  on_result, max_attempts).run()


class _Batch:
    def __init__(self, cluster: Cluster, fn: Callable[..., Any], args_list: Sequence[tuple],
                 pick_workers: Callable[[], list[str]], stall_timeout: float, label: str,
                 resources: dict | None, on_result: Callable[[int, Any], None] | None,
                 max_attempts: int):
        self.cluster, self.fn, self.args_list = cluster, fn, args_list
        self.pick_workers, self.stall_timeout, self.label = pick_workers, stall_timeout, label
        self.resources, self.on_result, self.max_attempts = resources, on_result, max_attempts
        self.results: list[Remote | None] = [None] * len(args_list)
        self.attempts = [0] * len(args_list)
        self.pending: dict[str, tuple[Any, int, frozenset[str]]] = {}  # key -> (future, job, workers)
        self.done: queue.Queue = queue.Queue()
        self.workers: list[str] = []

    def run(self) -> list[Remote]:
        if not self.args_list:
            return []
        try:
            self.workers = self.pick_workers()
            for i in range(len(self.args_list)):
                self._submit(i)
            self._collect()
        finally:
            self._cancel_pending()
        return [r if r is not None else Remote(LOST, error="no result") for r in self.results]

    def _submit(self, i: int) -> None:
        f = self.cluster.client.submit(
            self.fn, *self.args_list[i], key=f"ansor-{self.label}-{uuid.uuid4().hex}",
            workers=list(self.workers), allow_other_workers=False, resources=self.resources,
            pure=False)
        self.pending[f.key] = (f, i, frozenset(self.workers))
        f.add_done_callback(lambda fut: self.done.put(fut.key))

    def _again(self, i: int, why: str) -> None:
        """Submit job ``i`` again, unless it was lost too often."""
        self.attempts[i] += 1
        if self.attempts[i] >= self.max_attempts:
            self.results[i] = Remote(LOST, error=f"lost {self.attempts[i]} times on the cluster "
                                                 f"(last: {why})")
            return
        logger.info("%s job %d submitted again: %s", self.label, i, why)
        self._submit(i)

    def _collect(self) -> None:
        last_progress = last_check = time.monotonic()
        while self.pending:
            try:
                key = self.done.get(timeout=POLL_S)
            except queue.Empty:
                key = None
            if key is not None and key in self.pending:
                self._take(key)
                last_progress = time.monotonic()
            now = time.monotonic()
            if key is not None and now - last_check < POLL_S:
                continue  # results are flowing: check membership at most every POLL_S
            last_check = now
            if not self.cluster.alive():
                raise self.cluster.lost()
            if self._requeue_orphans():
                last_progress = time.monotonic()  # fresh tasks on fresh workers: their clock
            if self.pending and time.monotonic() - last_progress > self.stall_timeout:
                for f, i, _ in list(self.pending.values()):
                    self.results[i] = Remote(STALLED, error=f"no result from the cluster within "
                                                            f"{self.stall_timeout:g} s")
                logger.warning("%s: no task finished for %g s; %d job(s) given up", self.label,
                               self.stall_timeout, len(self.pending))
                return

    def _take(self, key: str) -> None:
        f, i, _ = self.pending.pop(key)
        try:
            if f.status == "finished":
                try:
                    value = self._fetch(f)
                except Exception as err:  # noqa: BLE001 - its worker died before we fetched it
                    if not self.cluster.alive():
                        raise self.cluster.lost() from None
                    self._again(i, f"its result could not be fetched: {_text(err)}")
                    return
                self.results[i] = Remote(OK, value)
                if self.on_result is not None:
                    self.on_result(i, value)
            elif f.status == "error":
                try:
                    err = f.exception(timeout=RPC_TIMEOUT)
                except Exception as e:  # noqa: BLE001 - the error itself could not be fetched
                    err = e
                self.results[i] = Remote(FAILED, error=_text(err))
            else:  # cancelled: by the scheduler going away, or by someone else
                if not self.cluster.alive():
                    raise self.cluster.lost()
                self._again(i, f"the task was {f.status}")
        finally:
            f.release()

    def _fetch(self, f: Any) -> Any:
        """A finished task's value. If the worker holding it dies first, Dask marks the value
        lost and would wait for a recomputation that may never come (its workers gone): fetch in
        growing slices (a large value on a slow link gets the time it needs) and give up as soon
        as the value is no longer there (RuntimeError)."""
        deadline = time.monotonic() + RPC_TIMEOUT
        wait = POLL_S
        while True:
            try:
                return f.result(timeout=min(wait, max(0.01, deadline - time.monotonic())))
            except TimeoutError:
                if f.status != "finished":
                    raise RuntimeError(f"its result was lost with its worker ({f.status})") from None
                if time.monotonic() >= deadline:
                    raise
                wait *= 2

    def _requeue_orphans(self) -> bool:
        """Submit again the jobs none of whose admitted workers is left (Dask would wait for them
        forever); True if any was."""
        live = set(self.cluster.live_workers())
        orphans = [k for k, (_, _, ws) in self.pending.items() if not ws & live]
        if not orphans:
            return False
        # Admits the workers that joined meanwhile (a restarted one is checked as a new one),
        # waiting for one if none is left; raises if none comes.
        self.workers = self.pick_workers()
        for k in orphans:
            f, i, ws = self.pending.pop(k)
            f.release()  # the scheduler forgets a task no client holds: no blocking cancel call
            self._again(i, f"every worker it could run on left ({', '.join(sorted(ws))})")
        return True

    def _cancel_pending(self) -> None:
        """Drop the tasks still out (a task no client holds is forgotten by the scheduler, which
        stops it on its worker): a message, not a call that could wait on a dead scheduler."""
        for f, _, _ in self.pending.values():
            f.release()
        self.pending.clear()
