"""Persistent, sandboxed worker processes for building and running candidates.

A tuning run sends thousands of untrusted programs through compilation and execution; any of them
may crash, hang or eat memory. ``WorkerPool`` keeps N long-lived worker processes (so the Python,
numpy and LLVM start-up is paid once, not per candidate) and gives every job a hard deadline:

* a job that overruns its timeout gets its worker SIGKILLed and replaced; the job's outcome is
  ``TIMEOUT``;
* a worker that dies mid-job (segfault, abort, OOM kill) is replaced; the outcome is ``CRASH``;
* an exception inside the job comes back as ``ERROR`` with the traceback text;
* the caller never sees an exception from a job.

Workers are fresh interpreters (spawned, never forked: forking a process that already runs
LLVM or a BLAS thread pool copies locks held by threads that do not exist in the child). They
ignore SIGINT, so Ctrl-C reaches only the tuner, which then shuts the pool down cleanly; they exit
when the parent's end of the socket closes, and are killed if the tuner dies mid-job. An optional
RLIMIT_AS caps each worker's address space so a runaway candidate fails alone instead of taking
the machine down.

Jobs are ``(function, args)`` pairs; the function is pickled by reference, so it must be a
module-level function importable in a fresh interpreter (the worker gets the parent's
``sys.path``).
"""
from __future__ import annotations

import atexit
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import traceback
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Sequence

from .checks import MAX_THREADS, check_count, check_seconds

OK = "ok"
ERROR = "error"
TIMEOUT = "timeout"
CRASH = "crash"

# A cap on error texts: a traceback is useful, a megabyte of repr is not.
MAX_ERROR_CHARS = 4000
# Longest single wait for workers (seconds): the main thread comes back to act on Ctrl-C.
SIGNAL_SLICE = 0.25


@dataclass(frozen=True)
class Outcome:
    """What became of one job. ``value`` is the function's return value when ``status == OK``;
    ``error`` describes any other status; ``seconds`` is the wall time from dispatch to result."""

    status: str
    value: Any = None
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == OK


class WorkerStartError(RuntimeError):
    """A worker could not start (its initializer failed, or it died before becoming ready).

    Unlike a job failure this is a configuration problem (e.g. a memory limit too small to import
    numpy), so it is raised rather than reported per job."""


def _signal_name(exitcode: int | None) -> str:
    if exitcode is None:
        return "exit status unknown"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


def _clip(text: str) -> str:
    if len(text) <= MAX_ERROR_CHARS:
        return text
    half = MAX_ERROR_CHARS // 2
    return text[:half] + "\n[...]\n" + text[-half:]


# ---- the worker side ----------------------------------------------------------------------------

def _worker_main(conn: Connection, initializer: Callable[[], None] | None,
                 memory_limit_bytes: int | None) -> None:
    # Ctrl-C in a terminal signals the whole process group; only the parent should react.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if memory_limit_bytes is not None:
            import resource  # noqa: PLC0415 - POSIX only, and only needed with a limit

            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            soft = memory_limit_bytes if hard == resource.RLIM_INFINITY else min(memory_limit_bytes, hard)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        if initializer is not None:
            initializer()
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises WorkerStartError
        conn.send(("init_error", _clip(traceback.format_exc())))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            raw = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the parent went away: nothing more will come
        try:
            # Unpickled here, not inside recv(), so an unimportable function is a job error and
            # not a broken connection.
            job = pickle.loads(raw)
            if job is None:
                return
            fn, args = job
            reply = (OK, fn(*args))
        except BaseException:  # noqa: BLE001 - jobs never take the worker down with an exception
            reply = (ERROR, _clip(traceback.format_exc()))
        try:
            conn.send(reply)
        except Exception as e:  # noqa: BLE001 - e.g. an unpicklable return value
            conn.send((ERROR, f"the job's result could not be sent back: {type(e).__name__}: {e}"))


# ---- the parent side ----------------------------------------------------------------------------

_BOOT = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
         "import json, sys; sys.path[:0] = [p for p in json.loads(sys.argv[3]) if p not in sys.path]\n"
         "from measure.worker_pool import _bootstrap; _bootstrap(int(sys.argv[1]), int(sys.argv[2]))")


def _die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this worker when the tuner dies: a worker busy with a kernel that
    never ends would otherwise outlive a tuner killed with SIGKILL and spin forever. (Linux fires
    this when the *thread* that started the worker exits; pools should be used from long-lived
    threads.)"""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # noqa: PLC0415

    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def _bootstrap(fd: int, parent_pid: int) -> None:
    """Entry point of a worker interpreter: read the set-up message, then serve jobs."""
    _die_with_parent(parent_pid)
    conn = Connection(fd)
    try:
        initializer, memory_limit_bytes = pickle.loads(conn.recv_bytes())
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises WorkerStartError
        conn.send(("init_error", _clip(traceback.format_exc())))
        return
    _worker_main(conn, initializer, memory_limit_bytes)


class _Worker:
    """One worker process and the parent's end of its socket."""

    def __init__(self, initializer: Callable[[], None] | None, memory_limit_bytes: int | None):
        # A fresh interpreter through subprocess rather than multiprocessing's spawn: the same
        # clean process (never a fork), but without re-importing the parent's __main__ module,
        # which would re-run a tuning script that lacks an `if __name__ == "__main__"` guard and
        # make every worker (re)start pay for the script's imports.
        ours, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), str(os.getpid()),
                 json.dumps(sys.path)],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        finally:
            theirs.close()  # the worker's death must show up as EOF on our end
        self.conn = Connection(ours.detach())
        self.conn.send_bytes(pickle.dumps((initializer, memory_limit_bytes)))
        self.started = time.monotonic()
        self.ready = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def exitcode(self) -> int | None:
        try:
            return self.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            return None

    def check_ready(self, start_timeout: float) -> bool:
        """Whether the worker has finished starting (non-blocking); raises WorkerStartError if it
        failed to start or overran ``start_timeout``."""
        if self.ready:
            return True
        if not self.conn.poll(0):
            if self.proc.poll() is not None:
                raise WorkerStartError(f"worker died while starting ({_signal_name(self.exitcode)})")
            if time.monotonic() - self.started > start_timeout:
                self.kill()
                raise WorkerStartError(f"worker did not become ready within {start_timeout:.0f} s")
            return False
        try:
            kind, payload = self.conn.recv()
        except (EOFError, OSError):
            raise WorkerStartError(f"worker died while starting ({_signal_name(self.exitcode)})") from None
        if kind != "ready":
            self.kill()
            raise WorkerStartError(f"worker initialisation failed:\n{payload}")
        self.ready = True
        return True

    def wait_ready(self, start_timeout: float) -> None:
        """Block until the worker is ready (or raise WorkerStartError)."""
        deadline = self.started + start_timeout
        while not wait([self.conn], timeout=min(max(0.0, deadline - time.monotonic()), SIGNAL_SLICE)):
            if time.monotonic() >= deadline:
                break
        if not self.check_ready(start_timeout):
            self.kill()
            raise WorkerStartError(f"worker did not become ready within {start_timeout:.0f} s")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(5.0)
        except subprocess.TimeoutExpired:  # uninterruptible sleep in the kernel: leave it
            pass
        self.conn.close()

    def stop(self, grace: float) -> None:
        """Ask the worker to exit after its current job; kill it if it does not within ``grace``."""
        if self.proc.poll() is None:
            try:
                self.conn.send_bytes(pickle.dumps(None))
                self.proc.wait(grace)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        self.kill()


_LIVE_POOLS: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()


@atexit.register
def _close_live_pools() -> None:
    for pool in list(_LIVE_POOLS):
        pool.close()


class WorkerPool:
    """``n_workers`` persistent worker processes running jobs with hard per-job timeouts.

    ``initializer`` (a module-level function) runs once in every worker before it takes jobs, e.g.
    to import and initialise LLVM so the first job's timeout does not pay for it. Workers start in
    the background when the pool is created; a worker's start-up never counts against a job.
    A pool serves one caller at a time (it is not thread-safe).
    """

    def __init__(self, n_workers: int = 1, *, initializer: Callable[[], None] | None = None,
                 memory_limit_bytes: int | None = None, start_timeout: float = 120.0):
        n_workers = check_count("WorkerPool n_workers", n_workers, maximum=MAX_THREADS)
        if memory_limit_bytes is not None:
            memory_limit_bytes = check_count("WorkerPool memory_limit_bytes", memory_limit_bytes)
        self._initializer = initializer
        self._memory_limit = memory_limit_bytes
        self._start_timeout = check_seconds("WorkerPool start_timeout", start_timeout)
        self._workers: list[_Worker | None] = [None] * n_workers
        self.restarts = 0  # workers replaced after a timeout or a crash, over the pool's life
        self._closed = False
        for i in range(n_workers):
            self._workers[i] = self._spawn()
        _LIVE_POOLS.add(self)

    def _spawn(self) -> _Worker:
        return _Worker(self._initializer, self._memory_limit)

    @property
    def n_workers(self) -> int:
        return len(self._workers)

    def pids(self) -> list[int | None]:
        return [w.pid if w is not None else None for w in self._workers]

    def wait_ready(self) -> None:
        """Block until every worker has started (optional: jobs wait for their worker anyway)."""
        for i, w in enumerate(self._workers):
            if w is None:
                w = self._workers[i] = self._spawn()
            w.wait_ready(self._start_timeout)

    def _replace(self, i: int) -> None:
        w = self._workers[i]
        if w is not None:
            w.kill()
        self.restarts += 1
        # Started now so it boots while the remaining jobs run; readiness is awaited on next use.
        self._workers[i] = self._spawn()

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Outcome:
        """Run ``fn(*args)`` in a worker; never raises for anything the job does."""
        return self.map(fn, [args], timeout=timeout)[0]

    def map(self, fn: Callable[..., Any], args_list: Sequence[Sequence[Any]], *,
            timeout: float) -> list[Outcome]:
        """Run ``fn(*args)`` for every entry of ``args_list`` across the workers; the outcomes come
        back in input order. Each job gets ``timeout`` seconds from the moment its worker starts
        it; a worker still booting takes no job until it is ready."""
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        # A NaN deadline is never reached (the job is never killed) and makes every wait return
        # at once (the parent spins); an infinite one overflows the wait.
        timeout = check_seconds("WorkerPool job timeout", timeout)
        results: list[Outcome | None] = [None] * len(args_list)
        pending = list(range(len(args_list)))[::-1]  # popped from the end: jobs start in order
        busy: dict[int, tuple[int, float]] = {}  # worker -> (job, start)
        try:
            self._dispatch(fn, args_list, results, pending, busy, timeout)
        except BaseException:
            # Interrupted (Ctrl-C in the tuner): the busy workers' late answers must not be read
            # as the results of a later call, so those workers are replaced.
            for wi in list(busy):
                self._replace(wi)
            raise
        return [r if r is not None else Outcome(ERROR, error="job lost") for r in results]

    def _dispatch(self, fn: Callable[..., Any], args_list: Sequence[Sequence[Any]],
                  results: list[Outcome | None], pending: list[int],
                  busy: dict[int, tuple[int, float]], timeout: float) -> None:
        while pending or busy:
            for wi in range(self.n_workers):
                if not pending:
                    break
                w = self._workers[wi]
                if w is None:
                    w = self._workers[wi] = self._spawn()
                if wi in busy or not w.check_ready(self._start_timeout):
                    continue
                job = pending.pop()
                try:
                    payload = pickle.dumps((fn, tuple(args_list[job])))
                except Exception as e:  # noqa: BLE001 - the caller's arguments, reported per job
                    results[job] = Outcome(ERROR, error=f"cannot send the job: {type(e).__name__}: {e}")
                    continue
                try:
                    w.conn.send_bytes(payload)
                except (OSError, ValueError):
                    # Died while idle (e.g. killed from outside): not this job's fault; retry it.
                    self._replace(wi)
                    pending.append(job)
                    continue
                busy[wi] = (job, time.monotonic())
            self._collect(busy, results, timeout, booting=bool(pending))

    def _collect(self, busy: dict[int, tuple[int, float]], results: list[Outcome | None],
                 timeout: float, booting: bool) -> None:
        """Wait until a busy job finishes or overruns, or (if ``booting``) a worker becomes ready;
        record finished jobs' outcomes and free their workers."""
        handles: dict[Any, int] = {}
        deadlines = [start + timeout for _, start in busy.values()]
        for wi, w in enumerate(self._workers):
            assert w is not None
            if wi in busy or (booting and not w.ready):
                handles[w.conn] = wi  # EOF when the worker dies: it holds the only other end
                if wi not in busy:
                    deadlines.append(w.started + self._start_timeout)
        wait_for = max(0.0, min(deadlines) - time.monotonic()) if deadlines else 0.0
        # In slices: a Ctrl-C the kernel hands to another thread of this process (a BLAS or
        # kernel thread pool's) only sets a flag, which the main thread acts on when it runs Python
        # again; one long wait would hold the tuner in a hung build until its timeout.
        ready = wait(list(handles), timeout=min(wait_for, SIGNAL_SLICE))
        done: set[int] = set()
        # Results first: a job that answered just before its deadline is not a timeout.
        for h in ready:
            wi = handles[h]
            if wi in done or wi not in busy:
                continue  # a booting worker: check_ready() picks it up on the next dispatch
            w = self._workers[wi]
            assert w is not None
            job, start = busy[wi]
            outcome: Outcome | None = None
            if w.conn.poll():
                try:
                    status, payload = w.conn.recv()
                    outcome = (Outcome(OK, value=payload, seconds=time.monotonic() - start)
                               if status == OK else
                               Outcome(status, error=payload, seconds=time.monotonic() - start))
                except (EOFError, OSError):
                    outcome = None
                except Exception as e:  # noqa: BLE001 - a result that does not unpickle here
                    outcome = Outcome(ERROR, error=f"cannot read the job's result: {type(e).__name__}: {e}",
                                      seconds=time.monotonic() - start)
            if outcome is None:
                outcome = Outcome(CRASH, error=f"worker {_signal_name(w.exitcode)}",
                                  seconds=time.monotonic() - start)
                self._replace(wi)
            results[job] = outcome
            done.add(wi)
        now = time.monotonic()
        for wi, (job, start) in busy.items():
            if wi not in done and now >= start + timeout:
                results[job] = Outcome(TIMEOUT, error=f"no result within {timeout:g} s",
                                       seconds=now - start)
                self._replace(wi)
                done.add(wi)
        for wi in done:
            del busy[wi]

    def close(self, grace: float = 2.0) -> None:
        """Stop every worker (idempotent). Safe to call from atexit."""
        if self._closed:
            return
        self._closed = True
        for w in self._workers:
            if w is not None:
                w.stop(grace)
        self._workers = [None] * len(self._workers)
        _LIVE_POOLS.discard(self)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close(grace=0.0)
        except Exception:  # noqa: BLE001 - interpreter shutdown: modules may be half gone
            pass
