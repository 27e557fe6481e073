"""The kernels' thread pool (``measure.thread_pool``): every iteration runs exactly once for any
extent and thread count, threads really run at once, many callers and nested calls never block,
a forked child gets a working pool, idle workers sleep instead of spinning, and parallel kernels
no longer load libgomp.

Most tests drive ``ansor_parallel_for`` through a small hand-written IR module (bodies that
count, nest or meet at a barrier), linked by MCJIT exactly as kernels are."""
import ctypes
import multiprocessing as mp
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import llvmlite.binding as llvm

from compute import expr as E
from measure import runtime, target, thread_pool
from tests.measure.helpers import elementwise

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEET_PAUSES = 200_000_000  # a barrier gives up after this many pauses (seconds)

_BODIES = f"""
declare void @{thread_pool.ENTRY}(ptr, ptr, i64, i32)
declare void @llvm.x86.sse2.pause()

; counters[i] += 1 (atomically) for i in [b, e)
define void @count(ptr %c, i64 %b, i64 %e) {{
entry:
  br label %head
head:
  %i = phi i64 [ %b, %entry ], [ %i1, %body ]
  %more = icmp slt i64 %i, %e
  br i1 %more, label %body, label %out
body:
  %p = getelementptr inbounds i64, ptr %c, i64 %i
  %old = atomicrmw add ptr %p, i64 1 monotonic, align 8
  %i1 = add i64 %i, 1
  br label %head
out:
  ret void
}}

define void @run_count(ptr %c, i64 %n, i32 %nt) {{
  call void @{thread_pool.ENTRY}(ptr @count, ptr %c, i64 %n, i32 %nt)
  ret void
}}

; closure {{ counters, inner, nt }}: outer iteration i counts row i with a parallel call of its own
define void @nest(ptr %clo, i64 %b, i64 %e) {{
entry:
  %c = load ptr, ptr %clo, align 8
  %ip = getelementptr inbounds i64, ptr %clo, i64 1
  %inner = load i64, ptr %ip, align 8
  %tp = getelementptr inbounds i64, ptr %clo, i64 2
  %nt64 = load i64, ptr %tp, align 8
  %nt = trunc i64 %nt64 to i32
  br label %head
head:
  %i = phi i64 [ %b, %entry ], [ %i1, %body ]
  %more = icmp slt i64 %i, %e
  br i1 %more, label %body, label %out
body:
  %off = mul i64 %i, %inner
  %row = getelementptr inbounds i64, ptr %c, i64 %off
  call void @{thread_pool.ENTRY}(ptr @count, ptr %row, i64 %inner, i32 %nt)
  %i1 = add i64 %i, 1
  br label %head
out:
  ret void
}}

define void @run_nest(ptr %clo, i64 %outer, i32 %nt) {{
  call void @{thread_pool.ENTRY}(ptr @nest, ptr %clo, i64 %outer, i32 %nt)
  ret void
}}

; state {{ arrived, gave_up, expected }}: each iteration arrives, then waits (bounded) for all
define void @meet(ptr %st, i64 %b, i64 %e) {{
entry:
  %gp = getelementptr inbounds i64, ptr %st, i64 1
  %xp = getelementptr inbounds i64, ptr %st, i64 2
  %want = load i64, ptr %xp, align 8
  br label %head
head:
  %i = phi i64 [ %b, %entry ], [ %i1, %next ]
  %more = icmp slt i64 %i, %e
  br i1 %more, label %arrive, label %out
arrive:
  %a = atomicrmw add ptr %st, i64 1 seq_cst, align 8
  br label %spin
spin:
  %k = phi i64 [ 0, %arrive ], [ %k1, %pause ]
  %v = load atomic i64, ptr %st acquire, align 8
  %all = icmp sge i64 %v, %want
  br i1 %all, label %next, label %pause
pause:
  call void @llvm.x86.sse2.pause()
  %k1 = add i64 %k, 1
  %tired = icmp sge i64 %k1, {MEET_PAUSES}
  br i1 %tired, label %give_up, label %spin
give_up:
  %g = atomicrmw add ptr %gp, i64 1 seq_cst, align 8
  br label %next
next:
  %i1 = add i64 %i, 1
  br label %head
out:
  ret void
}}

define void @run_meet(ptr %st, i64 %n, i32 %nt) {{
  call void @{thread_pool.ENTRY}(ptr @meet, ptr %st, i64 %n, i32 %nt)
  ret void
}}
"""

_RUN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32)
_ENGINES = []


@pytest.fixture(scope="module")
def fns():
    runtime.ensure_loaded()
    head = f'target datalayout = "{target.data_layout()}"\ntarget triple = "{target.host_triple()}"\n'
    mod = llvm.parse_assembly(head + _BODIES)
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, target.new_target_machine("native"))
    engine.finalize_object()
    _ENGINES.append(engine)  # the code lives as long as the process
    return {name: _RUN(engine.get_function_address(name)) for name in ("run_count", "run_nest", "run_meet")}


def _count(fns, n: int, nt: int) -> np.ndarray:
    c = np.zeros(n + 2, np.int64)  # one guard element on each side
    fns["run_count"](c[1:].ctypes.data, n, nt)
    assert c[0] == 0 and c[-1] == 0, "a body ran outside [0, extent)"
    return c[1:-1]


EXTENTS = [0, 1, 2, 3, 4, 5, 7, 8, 13, 31, 64, 97, 1000, 65537]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nt", [1, 2, 3, 4, 9])
def test_every_iteration_runs_exactly_once(fns, nt):
    for n in EXTENTS:
        c = _count(fns, n, nt)
        assert (c == 1).all(), f"extent {n}, {nt} threads: counts {np.unique(c)}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nt", [2, 3])
def test_threads_really_run_at_once(fns, nt):
    """``nt`` iterations that each wait for all ``nt`` to have started: only ``nt`` threads
    running them at the same time get through without giving up."""
    for _ in range(20):
        st = np.array([0, 0, nt], np.int64)
        fns["run_meet"](st.ctypes.data, nt, nt)
        assert st[0] == nt and st[1] == 0, f"{st[1]} of {nt} iterations waited in vain: fewer threads ran"


@pytest.mark.timeout(120)
def test_nested_calls_run_inline(fns):
    """A body calling the pool again (from the caller and from workers) runs it inline."""
    outer, inner = 13, 29
    for nt in (2, 3):
        c = np.zeros(outer * inner, np.int64)
        clo = np.array([c.ctypes.data, inner, nt], np.int64)
        fns["run_nest"](clo.ctypes.data, outer, nt)
        assert (c == 1).all()


@pytest.mark.timeout(120)
def test_many_callers_at_once(fns):
    """Python threads calling at once: one owns the pool, the others run inline; no hang."""
    wrong, errors = [], []
    start = threading.Barrier(8)

    def work(t):
        try:
            start.wait()
            for k in range(300):
                n = EXTENTS[(t + k) % len(EXTENTS)]
                c = _count(fns, n, 2 + (t + k) % 3)
                if not (c == 1).all():
                    wrong.append((t, k, n))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(90)
    assert not any(t.is_alive() for t in ts), "a caller hung"
    assert not errors and not wrong, (errors, wrong[:5])


def _child_meets(fns, conn):
    st = np.array([0, 0, 2], np.int64)
    fns["run_meet"](st.ctypes.data, 2, 2)
    conn.send((int(st[0]), int(st[1]), bool((_count(fns, 1000, 2) == 1).all())))
    conn.close()


def _forks_work(fns, busy_parent: bool) -> None:
    """Children forked from a parent whose pool has its worker (and, ``busy_parent``, is owned
    by another thread at random moments of the forks) run 2 threads at once and count right."""
    _count(fns, 1000, 2)
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            _count(fns, 5000, 2)

    bg = threading.Thread(target=busy, daemon=True)
    if busy_parent:
        bg.start()
    ctx = mp.get_context("fork")
    try:
        for _ in range(4):
            recv, send = ctx.Pipe(duplex=False)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # fork of a threaded process
                p = ctx.Process(target=_child_meets, args=(fns, send))
                p.start()
            assert recv.poll(60), "the child hung"
            arrived, gave_up, counted = recv.recv()
            p.join(30)
            assert (arrived, gave_up, counted) == (2, 0, True)
    finally:
        stop.set()
        if busy_parent:
            bg.join(30)


@pytest.mark.timeout(120)
def test_forked_child_has_a_working_pool(fns):
    _forks_work(fns, busy_parent=True)


@pytest.mark.timeout(300)
def test_forked_child_without_wipe_on_fork():
    """Where MADV_WIPEONFORK is refused (Linux < 4.14; here an invalid advice), the owner's
    getpid() check gives a child its own workers."""
    code = f"""
import sys
sys.path.insert(0, {ROOT!r})
from measure import thread_pool
thread_pool._MADV_WIPEONFORK = 0x7fff  # EINVAL: the static block and the pid check
import tests.measure.test_thread_pool as t
fns = {{"run_count": t._standalone(), "run_meet": t._standalone("run_meet")}}
t._forks_work(fns, busy_parent=False)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0 and out.stdout.split() == ["ok"], out.stderr


def _cpu_during_pause(env_spin: str | None, pause_s: float) -> tuple[float, float]:
    code = f"""
import ctypes, time, numpy as np, sys
sys.path.insert(0, {ROOT!r})
from tests.measure.test_thread_pool import _standalone
run = _standalone()
c = np.zeros(4096, np.int64)
for _ in range(50):
    run(c.ctypes.data, 4096, 2)
c0, t0 = time.process_time(), time.perf_counter()
time.sleep({pause_s})
print(time.process_time() - c0, time.perf_counter() - t0)
"""
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop(thread_pool.ENV_SPIN_US, None)
    if env_spin is not None:
        env[thread_pool.ENV_SPIN_US] = env_spin
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    cpu, wall = map(float, out.stdout.split())
    return cpu, wall


def _standalone(name: str = "run_count"):
    """``name`` of the test module, in a fresh process (for the subprocess tests)."""
    runtime.ensure_loaded()
    head = f'target datalayout = "{target.data_layout()}"\ntarget triple = "{target.host_triple()}"\n'
    mod = llvm.parse_assembly(head + _BODIES)
    engine = llvm.create_mcjit_compiler(mod, target.new_target_machine("native"))
    engine.finalize_object()
    _ENGINES.append(engine)
    return _RUN(engine.get_function_address(name))


@pytest.mark.timeout(300)
def test_idle_workers_sleep_instead_of_spinning():
    """After a parallel call, a pause costs (almost) no CPU: the worker spun ``SPIN_US`` and
    went to sleep (libgomp's spinning workers would burn a core for milliseconds). With
    ``ANSOR_SPIN_US`` longer than the pause the worker spins through it instead."""
    cpu, wall = _cpu_during_pause(None, 0.1)
    assert cpu < 0.05 * wall, f"{cpu * 1e3:.1f} ms of CPU during a {wall * 1e3:.0f} ms pause"
    # A spinning worker gets its share of a core even on a loaded machine (2 cores, load 9: ~20%).
    cpu, wall = _cpu_during_pause("400000", 0.1)
    assert cpu > 0.08 * wall, f"only {cpu * 1e3:.1f} ms of CPU with a 400 ms spin over a {wall * 1e3:.0f} ms pause"


# ---- kernels --------------------------------------------------------------------------------

@pytest.mark.timeout(300)
def test_parallel_kernels_match_serial_for_any_extent_and_thread_count():
    for n in (1, 2, 3, 7, 64, 1001):
        k = elementwise(lambda a, b: a * 2.0 + b, ["float32", "float32"], "float32", n, kind="parallel",
                        name=f"pax{n}")
        assert f"@{thread_pool.ENTRY}(" in k.llvm_ir
        rng = np.random.default_rng(n)
        a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        for nt in (1, 2, 3, 4, 9):
            k.num_threads = nt
            out = np.zeros(n, np.float32)
            k(a, b, out)
            np.testing.assert_array_equal(out, a * np.float32(2.0) + b)


@pytest.mark.timeout(300)
def test_parallel_kernel_from_many_threads():
    n = 4096
    k = elementwise(lambda a: E.binary("max", a, E.const(0.0)), ["float32"], "float32", n, kind="parallel", name="prelu")
    k.num_threads = 2
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(n).astype(np.float32) for _ in range(8)]
    wrong = []

    def work(t):
        out = np.empty(n, np.float32)
        for _ in range(300):
            k(xs[t], out)
            if not np.array_equal(out, np.maximum(xs[t], 0)):
                wrong.append(t)

    ts = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts), "a caller hung"
    assert not wrong


def test_parallel_kernels_do_not_load_libgomp():
    code = """
import numpy as np
from tests.measure.helpers import elementwise
k = elementwise(lambda a: a + 1.0, ["float32"], "float32", 256, kind="parallel", name="p1")
k.num_threads = 2
x = np.ones(256, np.float32); out = np.empty_like(x); k(x, out)
assert (out == 2).all()
print(any("libgomp" in line for line in open("/proc/self/maps")))
"""
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]


def test_a_bad_spin_setting_is_named_once(monkeypatch):
    """The pool reads ``ANSOR_SPIN_US`` natively and falls back to its default on a bad value;
    the start of a command says so, once."""
    monkeypatch.setattr(runtime, "_warned_spin", False)
    monkeypatch.setenv(thread_pool.ENV_SPIN_US, "20")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runtime.check_num_threads()  # a good value: nothing said
    monkeypatch.setenv(thread_pool.ENV_SPIN_US, "fast")
    with pytest.warns(RuntimeWarning, match=r"ANSOR_SPIN_US='fast' is not a whole number of microseconds"):
        runtime.check_num_threads()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runtime.check_num_threads()  # said once per process
