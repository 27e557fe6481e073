"""``NetworkModule.run`` from many threads (issue 43 item 3): every concurrent call gets the
output of its own input (each run has its own buffers: a context from the module's pool), a
loaded module is as safe, and no more runs execute at once than the module's concurrency limit
(its kernels' threads would otherwise fight for the cores)."""
import threading

import numpy as np
import pytest

import ansor
from ansor.graph import GraphBuilder, run
from ansor.graph import module_contexts

THREADS, CALLS = 8, 200


def _net():
    """conv+relu, max pool, dense, softmax: five kernels, intermediates of several sizes."""
    rng = np.random.default_rng(1)
    b = GraphBuilder("threads")
    x = b.input("x", (1, 8, 8, 3))
    w = b.constant(rng.standard_normal((3, 3, 3, 8)).astype(np.float32), "w")
    y = b.max_pool2d(b.relu(b.conv2d(x, w, padding=1, name="conv")), 2, strides=2)
    d = b.constant(rng.standard_normal((10, 128)).astype(np.float32), "d")
    return b.build(b.softmax(b.dense(b.reshape(y, (1, 128)), d), axis=1))


@pytest.fixture(scope="module")
def net():
    g = _net()
    rng = np.random.default_rng(0)
    xs = [[rng.standard_normal((1, 8, 8, 3)).astype(np.float32) for _ in range(CALLS)] for _ in range(THREADS)]
    refs = [[run(g, {"x": x})["softmax"] for x in row] for row in xs]
    return g, xs, refs


def _compile(g, monkeypatch, threads="1"):
    # One thread per kernel (kernels read the count when loaded): on a small machine the
    # default limit then still lets runs overlap, which is what this test is about.
    monkeypatch.setenv("ANSOR_NUM_THREADS", threads)
    return ansor.compile_network(g, verbose=False)


def _hammer(lib, xs, refs):
    """THREADS threads, CALLS calls each on different inputs; the calls whose output is wrong."""
    wrong, errors = [], []
    start = threading.Barrier(THREADS)

    def work(t):
        try:
            start.wait()
            for i, x in enumerate(xs[t]):
                y = lib.run({"x": x})["softmax"]
                if not np.allclose(y, refs[t][i], rtol=1e-4, atol=1e-6):
                    wrong.append((t, i))
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    return wrong


@pytest.mark.parametrize("limit, threads", [(None, "1"), (THREADS, "1"), (THREADS, "2")])
def test_concurrent_runs_each_get_their_own_output(net, monkeypatch, limit, threads):
    """With 2 threads per kernel, concurrent runs share the one thread pool: one run's kernel
    owns it, the others run inline on their own thread."""
    g, xs, refs = net
    lib = _compile(g, monkeypatch, threads)
    assert any("@ansor_parallel_for(" in s.kernel.llvm_ir for s in lib._steps)
    if limit is not None:  # every thread's run at once: the most sharing there could be
        lib.max_concurrent_runs = limit
    wrong = _hammer(lib, xs, refs)
    assert not wrong, f"{len(wrong)} of {THREADS * CALLS} outputs wrong, first {wrong[:5]}"
    assert lib.num_contexts <= lib.max_concurrent_runs


def test_loaded_module_is_as_safe(net, monkeypatch, tmp_path):
    g, xs, refs = net
    _compile(g, monkeypatch).export(tmp_path / "mod")
    lib = ansor.load_module(tmp_path / "mod")
    lib.max_concurrent_runs = THREADS
    assert not _hammer(lib, xs, refs)


def test_default_limit_fits_the_kernels_threads_in_the_cores(net, monkeypatch):
    from measure.target import usable_cpus

    g = net[0]
    for threads in (1, usable_cpus(), 2 * usable_cpus()):
        lib = _compile(g, monkeypatch, str(threads))
        assert lib.max_concurrent_runs == max(1, usable_cpus() // threads)
    with pytest.raises(ValueError, match="positive"):
        lib.max_concurrent_runs = 0


@pytest.mark.parametrize("limit", [1, 3])
def test_concurrent_runs_never_exceed_the_limit(net, monkeypatch, limit):
    g, xs, refs = net
    lib = _compile(g, monkeypatch)
    lib.max_concurrent_runs = limit
    lock, active, peak = threading.Lock(), [0], [0]
    execute = module_contexts.Context.execute

    def counted(ctx):  # a run's kernel calls, counted while they execute (slowed to overlap)
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            threading.Event().wait(0.002)
            execute(ctx)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(module_contexts.Context, "execute", counted)
    short = [row[:20] for row in xs]
    assert not _hammer(lib, short, refs)
    assert peak[0] == limit  # reached (8 threads wanting it) and never exceeded
    assert lib.num_contexts == limit


def test_a_failed_run_gives_its_context_back(net, monkeypatch):
    g, xs, refs = net
    lib = _compile(g, monkeypatch)
    lib.max_concurrent_runs = 1
    with pytest.raises(ansor.graph.GraphError, match="expected shape"):
        lib.run({"x": xs[0][0][:, :4]})
    np.testing.assert_allclose(lib.run({"x": xs[0][0]})["softmax"], refs[0][0], rtol=1e-4, atol=1e-6)


def test_contexts_share_constants_and_own_the_rest(net, monkeypatch):
    lib = _compile(net[0], monkeypatch)
    other = lib._new_context().buffers
    own = {i for i, sp in enumerate(lib._specs) if sp[0] in ("input", "alloc")}
    assert own and any(sp[0] == "const" for sp in lib._specs)
    for i, (a, b) in enumerate(zip(lib._buffers, other)):
        if i in own:
            assert not np.shares_memory(a, b)
        elif lib._specs[i][0] == "const":
            assert a is b  # weights are not copied per context
    assert lib.context_nbytes == sum(lib._buffers[i].nbytes for i in own)


def test_profile_times_every_kernel_inside_the_network(net, monkeypatch):
    g, xs, refs = net
    module = _compile(g, monkeypatch)
    prof = module.profile(min_repeat_ms=5, warmup_ms=1)
    assert len(prof) == module.num_kernels
    assert all(p["seconds"] > 0 for p in prof)
    assert [p["symbol"] for p in prof] == [s.kernel.compiled.name for s in module._steps]
    # profiling runs the network: a run afterwards still answers its own input
    np.testing.assert_allclose(module.run({"x": xs[0][0]})["softmax"], refs[0][0], rtol=1e-4, atol=1e-6)


def test_pick_kernel_threads_keeps_one_thread_only_where_clearly_faster(monkeypatch):
    """The rule, on canned timings: one thread must beat all of them by the margin."""
    from ansor.graph import module_benchmark as mb

    class Fake:  # a kernel whose time per call depends on its thread count
        def __init__(self, one, two):
            self.num_threads, self.address, self.times = 2, 0, {1: one, 2: two}

    fakes = [Fake(1.0, 2.0), Fake(1.0, 1.05), Fake(3.0, 1.0)]
    monkeypatch.setattr(mb.timer, "Timer", lambda addr, ptrs: ptrs)
    monkeypatch.setattr(mb.timer, "time_calls", lambda run, **kw: mb.timer.Timing((run[0].times[run[0].num_threads],), 1))
    assert mb.pick_threads([(k, [k]) for k in fakes], 2) == [1, 2, 2]
    assert [k.num_threads for k in fakes] == [1, 2, 2]


def test_pick_kernel_threads_on_a_network(net, monkeypatch):
    g, xs, refs = net
    lib = _compile(g, monkeypatch, "2")
    chosen = lib.pick_kernel_threads(rounds=1)
    assert set(chosen) == {s.name for s in lib._steps} and set(chosen.values()) <= {1, 2}
    assert chosen == lib.kernel_threads
    np.testing.assert_allclose(lib.run({"x": xs[0][0]})["softmax"], refs[0][0], rtol=1e-4, atol=1e-6)


def test_one_thread_choice_survives_export_and_load(net, monkeypatch, tmp_path):
    g, xs, refs = net
    lib = _compile(g, monkeypatch, "2")

    def one_faster(kernels, threads, rounds):  # as if one thread had been measured faster for all
        for k, _ in kernels:
            k.num_threads = 1
        return [1] * len(kernels)

    monkeypatch.setattr("ansor.graph.network_module.pick_threads", one_faster)
    assert set(lib.pick_kernel_threads(rounds=1).values()) == {1}
    assert all(s.one_thread for s in lib._steps)
    lib.export(tmp_path / "mod")
    again = ansor.load_module(tmp_path / "mod")
    assert set(again.kernel_threads.values()) == {1} and all(s.one_thread for s in again._steps)
    np.testing.assert_allclose(again.run({"x": xs[0][0]})["softmax"], refs[0][0], rtol=1e-4, atol=1e-6)
    plain = _compile(g, monkeypatch, "2")  # a module nobody picked for keeps its count
    plain.export(tmp_path / "plain")
    assert set(ansor.load_module(tmp_path / "plain").kernel_threads.values()) == {2}


def test_library_runs_a_one_thread_kernel_on_one_thread():
    from ansor.graph.entry_point import Call, EntryPoint, _run

    e = EntryPoint("x86_64-unknown-linux-gnu", "", 64, 64, 0, [], [],
                   [Call("__ansor_k0", [("arena", 0)], True), Call("__ansor_k1", [("arena", 0)])],
                   {"__ansor_k0": 1, "__ansor_k1": 1}, "{}", "")
    body = [line.strip() for line in _run(e)]
    k0 = next(i for i, line in enumerate(body) if "@__ansor_k0(" in line)
    k1 = next(i for i, line in enumerate(body) if "@__ansor_k1(" in line)
    assert body[k0 - 1] == "store i32 1, ptr %ntg, align 4" and body[k0 + 1] == "store i32 %nt, ptr %ntg, align 4"
    assert "store" not in body[k1 - 1]
