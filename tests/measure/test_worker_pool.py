"""WorkerPool: results in order, errors/timeouts/crashes as values, restarts, SIGINT immunity,
the address-space limit, start-up failures and shutdown."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from measure.worker_pool import CRASH, ERROR, OK, TIMEOUT, WorkerPool, WorkerStartError
from tests.measure import faults as F


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its state in /proc tells.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(2) as p:
        yield p


def test_results_in_input_order(pool):
    # Later jobs finish first; the outcomes still line up with the inputs.
    jobs = [(0.3, "a"), (0.05, "b"), (0.2, "c"), (0.0, "d")]
    out = pool.map(F.sleep_then, jobs, timeout=5)
    assert [o.status for o in out] == [OK] * 4
    assert [o.value for o in out] == ["a", "b", "c", "d"]
    squares = pool.map(F.square, [(i,) for i in range(10)], timeout=5)
    assert [o.value for o in squares] == [i * i for i in range(10)]


def test_exception_comes_back_as_an_error_value(pool):
    out = pool.run(F.fail, "no luck", timeout=5)
    assert out.status == ERROR and not out.ok
    assert "ValueError: no luck" in out.error


def test_unpicklable_result_and_argument(pool):
    assert pool.run(F.unpicklable, timeout=5).status == ERROR
    bad = pool.run(F.square, lambda: 1, timeout=5)
    assert bad.status == ERROR and "cannot send the job" in bad.error


def test_timeout_kills_and_replaces_the_worker():
    with WorkerPool(1) as p:
        before = p.pids()[0]
        t0 = time.monotonic()
        # The replacement worker's first job imports this test module (and ansor) inside its
        # timeout: 0.5 s was too tight for that on a slow or busy machine.
        out = p.map(F.sleep_then, [(30, "late"), (0, "next")], timeout=2.0)
        assert time.monotonic() - t0 < 8
        assert out[0].status == TIMEOUT and 2.0 <= out[0].seconds < 4
        assert out[1].status == OK and out[1].value == "next"
        assert p.restarts == 1 and p.pids()[0] != before
        assert not _alive(before)


def test_crash_is_reported_and_other_results_survive():
    with WorkerPool(2) as p:
        out = p.map(F.crash_or_square, [(1, False), (2, True), (3, False), (4, True), (5, False)],
                    timeout=10)
        assert [o.status for o in out] == [OK, CRASH, OK, CRASH, OK]
        assert [o.value for o in out if o.ok] == [1, 9, 25]
        assert "SIGSEGV" in out[1].error
        assert p.restarts == 2
        assert p.run(F.square, 7, timeout=5).value == 49


def test_workers_ignore_sigint():
    with WorkerPool(1) as p:
        facts = p.run(F.worker_facts, timeout=10).value
        assert facts["sigint_ignored"]
        os.kill(facts["pid"], signal.SIGINT)
        time.sleep(0.1)
        again = p.run(F.worker_facts, timeout=10)
        assert again.ok and again.value["pid"] == facts["pid"] and p.restarts == 0


def test_memory_limit_applies_in_the_worker():
    limit = 1 << 30
    with WorkerPool(1, memory_limit_bytes=limit) as p:
        facts = p.run(F.worker_facts, timeout=10).value
        assert facts["rlimit_as"][0] == limit
        big = p.run(F.allocate, 2 * limit, timeout=10)
        assert big.status == ERROR and "MemoryError" in big.error
        assert p.run(F.allocate, 1 << 20, timeout=10).value == 1 << 20  # the worker survived
        assert p.restarts == 0


def test_start_up_is_not_charged_to_the_first_job():
    with WorkerPool(1, initializer=F.slow_initializer) as p:
        out = p.run(F.square, 3, timeout=0.3)  # the initializer alone takes 0.5 s
        assert out.ok and out.value == 9


def test_failing_initializer_raises():
    with WorkerPool(1, initializer=F.failing_initializer) as p:
        with pytest.raises(WorkerStartError, match="initializer refuses"):
            p.run(F.square, 2, timeout=5)


def test_close_stops_the_workers():
    p = WorkerPool(2)
    p.wait_ready()
    pids = p.pids()
    p.close()
    p.close()  # idempotent
    assert not any(_alive(pid) for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        p.run(F.square, 1, timeout=1)


class _Interrupts:
    """An argument whose pickling raises KeyboardInterrupt: Ctrl-C in the middle of map()."""

    def __reduce__(self):
        raise KeyboardInterrupt


def test_interrupted_map_does_not_leak_late_results():
    with WorkerPool(2) as p:
        p.wait_ready()
        with pytest.raises(KeyboardInterrupt):
            p.map(F.sleep_then, [(2, "stale"), (_Interrupts(), None)], timeout=10)
        # The worker busy with the first job was replaced: its answer cannot surface here.
        out = p.map(F.sleep_then, [(0, "fresh"), (0, "fresh too")], timeout=10)
        assert [o.value for o in out] == ["fresh", "fresh too"]


_ORPHAN_SCRIPT = """
import sys
from measure.worker_pool import WorkerPool
from tests.measure import faults as F
pool = WorkerPool(1)
pool.wait_ready()
print(pool.pids()[0], flush=True)
pool.run(F.sleep_then, 3600, None, timeout=3600)
"""


def test_worker_busy_with_a_job_dies_with_a_killed_tuner():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tuner = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT], stdout=subprocess.PIPE,
                             text=True, cwd=root, env=dict(os.environ, PYTHONPATH=root))
    try:
        worker = int(tuner.stdout.readline())
        time.sleep(0.2)  # the job is running
        assert _alive(worker)
        tuner.kill()
        tuner.wait(5)
        deadline = time.monotonic() + 5
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker)
    finally:
        tuner.kill()
        tuner.wait(5)
