"""Cold timing (``LocalRunner(cache="cold")``): the rotation's size from the last-level cache, the
argument copies, a harness that really gives each call the next set, the same correctness verdicts
as warm, the mode in every result and in the settings a remote runner ships, and a memory-bound
kernel timed cold no faster than warm."""
from __future__ import annotations

import numpy as np
import pytest

from compute import expr as E
from measure import buffers, cluster_worker, target, timer
from measure.builder import LocalBuilder
from measure.measure import COLD, WARM, MeasureErrorNo, MeasureInput
from measure.runner import LocalRunner
from tests.measure import faults as F
from tests.measure.helpers import elementwise

FAST = dict(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0)


def test_rotation_sets_cover_twice_the_llc_within_the_caps():
    llc = 32 << 20
    assert timer.rotation_sets(4096, llc) == 2 * llc // 4096  # 64 MiB of 4 KiB sets
    assert timer.rotation_sets(5 << 20, llc) == 13  # ceil(64 / 5)
    assert timer.rotation_sets(100 << 20, llc) == 2  # bigger than the cache: two sets
    assert timer.rotation_sets(16, llc) == timer.MAX_ROTATION_SETS
    assert timer.rotation_sets(2 << 30, llc) == 1  # a second copy would pass the memory cap
    assert timer.rotation_sets(0, llc) == timer.MAX_ROTATION_SETS  # no bytes: still bounded


def _cache(root, cpu, index, level, kind, size, shared):
    d = root / f"cpu{cpu}" / "cache" / f"index{index}"
    d.mkdir(parents=True)
    for name, text in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
        (d / name).write_text(f"{text}\n")


def test_the_llc_is_read_from_sysfs_for_the_usable_cpus(tmp_path):
    for cpu in (0, 1, 2):
        _cache(tmp_path, cpu, 0, 1, "Data", "32K", str(cpu))
        _cache(tmp_path, cpu, 1, 1, "Instruction", "32K", str(cpu))
        _cache(tmp_path, cpu, 2, 2, "Unified", "1024K", str(cpu))
    _cache(tmp_path, 0, 3, 3, "Unified", "32768K", "0-1")
    _cache(tmp_path, 1, 3, 3, "Unified", "32768K", "0-1")
    _cache(tmp_path, 2, 3, 3, "Unified", "16M", "2-3")
    assert target.llc_from_sysfs({0, 1}, str(tmp_path)) == 32 << 20  # one shared L3, once
    assert target.llc_from_sysfs({1, 2}, str(tmp_path)) == 48 << 20  # two slices: both
    assert target.llc_from_sysfs({7}, str(tmp_path)) is None  # nothing said
    assert target.last_level_cache_bytes() >= 1 << 20


def test_argument_copies_are_aligned_filled_and_disjoint():
    a = np.arange(5, dtype=np.float32)
    b = np.arange(3, dtype=np.float64) + 0.5
    out = np.zeros(7, np.int32)
    slab, ptrs = buffers.argument_copies([a, b, out], 4)
    assert len(ptrs) == 4 and all(len(p) == 3 for p in ptrs)
    flat = [p for row in ptrs for p in row]
    assert len(set(flat)) == 12 and all(p % buffers.ALIGN_BYTES == 0 for p in flat)
    base = slab.ctypes.data
    for row in ptrs:
        for p, arr in zip(row, (a, b, out)):
            got = slab.reshape(-1)[p - base:p - base + arr.nbytes].view(arr.dtype)
            np.testing.assert_array_equal(got, arr)


def test_the_rotating_harness_gives_each_call_the_next_set_and_carries_the_cycle_on():
    n = 256
    k = elementwise(lambda x: x + E.const(1.0, "float32"), ["float32"], "float32", n)
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    slab, copies = buffers.argument_copies([x, out], 3)
    t = timer.Timer(k.address, k.arg_pointers(x, out), rotate=copies)
    assert t.sets == 4
    base = slab.ctypes.data

    def written(ptrs):
        o = ptrs[1] - base
        return bool(np.array_equal(slab.reshape(-1)[o:o + out.nbytes].view(np.float32), x + 1))

    t(1)  # set 0: the given arrays
    assert np.array_equal(out, x + 1) and not any(written(c) for c in copies)
    t(2)  # sets 1 and 2, not set 0 again
    assert [written(c) for c in copies] == [True, True, False]
    t(1)
    assert all(written(c) for c in copies)
    with pytest.raises(ValueError, match="2 pointers"):
        timer.Timer(k.address, k.arg_pointers(x, out), rotate=[[1]])


@pytest.fixture(scope="module")
def built():
    dag, s = F.gemm_tiled(64)
    inputs = [MeasureInput(F.task(dag), s), F.initial(F.wrong_answer_dag()), F.initial(F.add_dag(4096))]
    with LocalBuilder(timeout=30, n_parallel=1) as b:
        return inputs, b.build(inputs)


def test_cold_mode_gives_the_same_verdicts_and_says_so_in_every_result(built):
    inputs, results = built
    verdicts = {}
    for mode in (WARM, COLD):
        with LocalRunner(check_correctness=True, cache=mode, **FAST) as runner:
            res = runner.run(inputs, results)
        verdicts[mode] = [r.error_no for r in res]
        assert all(r.cache == mode for r in res)
    assert verdicts[WARM] == verdicts[COLD] == [MeasureErrorNo.NO_ERROR, MeasureErrorNo.WRONG_ANSWER,
                                                MeasureErrorNo.NO_ERROR]


def test_the_mode_is_a_setting_a_remote_runner_ships(monkeypatch):
    with LocalRunner(cache=COLD) as runner:
        settings = runner.settings()
    assert settings["cache"] == COLD
    assert LocalRunner(**settings).cache == COLD
    monkeypatch.setattr(cluster_worker, "_LOCAL", type(cluster_worker._LOCAL)())
    worker_side = cluster_worker._runner(settings, 60.0)  # what measure_on_worker times with
    try:
        assert worker_side.cache == COLD
        assert cluster_worker._runner({**settings, "cache": WARM}, 60.0).cache == WARM  # changed per job
    finally:
        worker_side.close()
    assert LocalRunner().cache == WARM  # the single-kernel default
    with pytest.raises(ValueError, match="LocalRunner cache must be one of 'warm', 'cold', 'network', 'handoff', got 'hot'"):
        LocalRunner(cache="hot")


@pytest.mark.slow
def test_a_memory_bound_kernel_bigger_than_l2_is_no_faster_cold(monkeypatch):
    """C = A + B over 3 x 2 MiB (bigger than any L2 here, within the L3): warm, the arrays stay
    in the L3; cold, every call streams them from memory. One thread, so the two modes compete
    for the same core; the best repeat of each."""
    monkeypatch.setenv("ANSOR_NUM_THREADS", "1")
    inputs = [F.initial(F.add_dag(1 << 19))]
    with LocalBuilder(timeout=30, n_parallel=1) as b:
        res = b.build(inputs)
    best = {}
    for mode in (WARM, COLD, WARM, COLD):
        with LocalRunner(cache=mode, number=5, repeat=5, min_repeat_ms=20, warmup_ms=50) as runner:
            r = runner.run(inputs, res)[0]
        assert r.ok, r.error_msg
        best[mode] = min(best.get(mode, 1.0), min(r.costs))
    assert best[COLD] >= best[WARM], best
