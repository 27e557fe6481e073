"""Machine facts are read in one place (``measure.target``): the usable cores follow the affinity
mask, the benchmark report and the thread count take them from there, and the cache-line size is
one constant (``sketch.hardware.CACHE_LINE_BYTES``) wherever it must not vary, the machine's own
where it may."""
from __future__ import annotations

import os

from measure import buffers, runtime, target, timer
from sketch.hardware import CACHE_LINE_BYTES, HardwareParams


def test_usable_cpus_follow_the_affinity_mask_not_the_cpu_count(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.delenv(target.ENV_NUM_THREADS, raising=False)
    assert target.usable_cpus() == 2 and target.logical_cpus() == 16
    assert target.num_threads() == 2 and target.host_hardware_params().num_cores == 2


def test_the_benchmark_report_takes_the_facts_from_target(monkeypatch):
    from ansor.bench import timing

    monkeypatch.setattr(target, "usable_cpus", lambda: 3)
    monkeypatch.setattr(target, "logical_cpus", lambda: 12)
    monkeypatch.setattr(target, "cpu_model_name", lambda: "Test CPU 9000")
    info = timing.machine_info()
    assert (info["usable_cpus"], info["logical_cpus"], info["cpu"]) == (3, 12, "Test CPU 9000")
    assert info["llvm_cpu"] == target.host_cpu_name()
    assert timing.cpu_name() == "Test CPU 9000"


def test_cpu_model_name_is_the_cpuinfo_model_name():
    name = target.cpu_model_name()
    assert name and name.isprintable()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            models = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        if models:
            assert name == models[0]


def test_the_thread_count_has_one_home():
    # ``measure.runtime`` re-exports the target's, it does not compute its own.
    assert runtime.num_threads is target.num_threads and runtime.usable_cpus is target.usable_cpus


def test_one_cache_line_constant_where_the_size_must_not_vary():
    from cost_model import feature_schema

    assert buffers.ALIGN_BYTES == feature_schema.CACHE_LINE == CACHE_LINE_BYTES
    assert HardwareParams(num_cores=1).cache_line_bytes == CACHE_LINE_BYTES


def test_the_machines_cache_line_where_it_may(monkeypatch):
    monkeypatch.setattr(target, "_sysconf", lambda name: None)  # the OS reports nothing
    assert target.cache_line_bytes() == CACHE_LINE_BYTES
    assert target.host_hardware_params().l1d_cache_bytes is None
    monkeypatch.setattr(target, "cache_line_bytes", lambda: 128)
    assert "add i64 %off, 128" in timer.flush_ir()  # clflush steps one real line at a time
    assert target.host_hardware_params().cache_line_bytes == 128
