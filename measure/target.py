"""The host: LLVM target machines (one per thread and target), their identity, O3, machine facts.

The machine facts - CPU model name, usable cores (the process's affinity mask, not
``os.cpu_count()``), the thread count kernels run with, cache line and cache sizes (the last-level
cache as the usable CPUs see it, for cold timing) - are read here
and nowhere else; ``host_hardware_params()`` hands them to the search as data, the benchmark
report (``ansor.bench.timing.machine_info``) names them.

Code is built for the current target (``measure.targets``: ``native``, the host, unless a
``use_target`` block names a CPU). Everything that makes compiled code differ between machines
(llvmlite and LLVM versions, triple, CPU name and feature string, the target) is summarised by
``toolchain_identity()``; its ``key`` goes into every
cache key and measurement record, so results from another machine or toolchain are never reused.
LLVM initialisation is lazy so that importing ``measure`` stays cheap in processes that never
compile.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import threading
import time
from functools import lru_cache

import llvmlite
import llvmlite.binding as llvm

from sketch.hardware import CACHE_LINE_BYTES, HardwareParams

from .checks import MAX_THREADS
# The host's identity lives with the targets; re-exported here, where callers have always found it.
from .targets import (Target, current_target, get_target, host_cpu_features, host_cpu_name,  # noqa: F401
                      host_triple, init_llvm, use_target)

ENV_NUM_THREADS = "ANSOR_NUM_THREADS"
# Kernels keep the thread count in an i32 and the thread pool creates that many threads: far
# beyond any machine's core count a value is a typo, not a setting.
MAX_NUM_THREADS = MAX_THREADS  # one bound for the variable and the options (measure.checks)

# Code generation options of every target machine (with its target's CPU and features); part
# of the compile cache's key as ``PIPELINE`` is.
MACHINE_OPTIONS: dict = {"opt": 3, "jit": True}


def new_target_machine(target: Target | str | None = None) -> llvm.TargetMachine:
    """A fresh target machine for ``target`` (default: the current one, ``measure.targets``). An
    MCJIT engine takes ownership of the machine it is given, so every engine needs its own;
    compilation shares ``target_machine()``."""
    t = get_target(target)
    init_llvm()
    return llvm.Target.from_triple(host_triple()).create_target_machine(
        cpu=t.cpu, features=t.features, **MACHINE_OPTIONS)


_TLS = threading.local()


def target_machine(target: Target | str | None = None) -> llvm.TargetMachine:
    """The target machine used for optimisation and object emission, one per thread and target:
    llvmlite releases the GIL inside LLVM, and a TargetMachine must not be used by two threads
    at once."""
    t = get_target(target)
    machines = getattr(_TLS, "machines", None)
    if machines is None:
        machines = _TLS.machines = {}
    tm = machines.get(t)
    if tm is None:
        tm = machines[t] = new_target_machine(t)
    return tm


@lru_cache(maxsize=1)
def data_layout() -> str:
    return str(target_machine().target_data)


def toolchain_identity(target: Target | str | None = None) -> dict:
    """Versions and the description of ``target`` (default: the current one); ``key`` is a short
    hash of all other fields. ``native``'s names the host's CPU and features (as before targets
    existed, so its key is unchanged); another target's adds ``"target"``, its name, and its
    features are the CPU's own."""
    return dict(_identity(get_target(target)))


@lru_cache(maxsize=None)
def _identity(t: Target) -> dict:
    ident = {
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(str(v) for v in llvm.llvm_version_info),
        "triple": host_triple(),
        "cpu": t.cpu,
        "features": t.features if t.is_native else ",".join(f"+{f}" for f in sorted(t.enabled)),
    }
    if not t.is_native:
        ident["target"] = t.name
    blob = json.dumps(ident, sort_keys=True).encode()
    ident["key"] = hashlib.sha256(blob).hexdigest()[:16]
    return ident


def toolchain_key(target: Target | str | None = None) -> str:
    return _identity(get_target(target))["key"]


def has_feature(name: str) -> bool:
    """Whether the current target (``measure.targets``) has ``name`` (e.g. 'avx512f', 'fma')."""
    return current_target().has(name)


def vector_bits() -> int:
    """The current target's SIMD register width in bits: 512 with AVX-512F, 256 with AVX2, 128
    otherwise."""
    return current_target().vector_bits


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux: fall back to the machine's CPU count
        return logical_cpus()


def logical_cpus() -> int:
    """The machine's logical CPUs, whatever this process may use (``usable_cpus``), at least 1."""
    return max(1, os.cpu_count() or 1)


def num_threads() -> int:
    """Threads for parallel loops: ``$ANSOR_NUM_THREADS`` if set, else the CPUs usable here."""
    raw = os.environ.get(ENV_NUM_THREADS)
    if raw is not None and raw.strip() != "":
        try:
            n = int(raw.strip())
        except ValueError:
            raise ValueError(f"{ENV_NUM_THREADS}={raw!r} is not an integer; set it to a positive "
                             "thread count or unset it to use every available CPU") from None
        if n < 1:
            raise ValueError(f"{ENV_NUM_THREADS}={raw!r} must be a positive thread count")
        if n > MAX_NUM_THREADS:
            raise ValueError(f"{ENV_NUM_THREADS}={raw!r}: the thread count must be at most "
                             f"{MAX_NUM_THREADS} (this machine has {usable_cpus()} usable CPU(s))")
        return n
    return usable_cpus()


@lru_cache(maxsize=1)
def cpu_model_name() -> str:
    """The CPU's marketing name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _sysconf(name: str) -> int | None:
    """A positive ``os.sysconf`` value, or None where the platform does not report it."""
    try:
        v = os.sysconf(name)
    except (ValueError, OSError, AttributeError):
        return None
    return v if isinstance(v, int) and v > 0 else None


def cache_line_bytes() -> int:
    """The L1 data cache line size, ``sketch.hardware.CACHE_LINE_BYTES`` where not reported."""
    return _sysconf("SC_LEVEL1_DCACHE_LINESIZE") or CACHE_LINE_BYTES


def cache_bytes() -> dict[str, int | None]:
    """L1 data, L2 and L3 cache sizes in bytes (None where the OS does not report one)."""
    return {"l1d": _sysconf("SC_LEVEL1_DCACHE_SIZE"), "l2": _sysconf("SC_LEVEL2_CACHE_SIZE"),
            "l3": _sysconf("SC_LEVEL3_CACHE_SIZE")}


# Where sysfs describes each CPU's caches, and the last-level cache assumed where nothing says.
SYSFS_CPUS = "/sys/devices/system/cpu"
FALLBACK_LLC_BYTES = 32 << 20


def _size_bytes(text: str) -> int | None:
    """sysfs's ``32768K`` / ``1M`` / ``512`` in bytes, None if unreadable."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale if digits.isdigit() and int(digits) > 0 else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def llc_from_sysfs(cpus: "set[int] | list[int]", root: str = SYSFS_CPUS) -> int | None:
    """Bytes of the last-level data cache the CPUs ``cpus`` use, from sysfs: the highest-level
    data or unified cache of each, each distinct instance (its ``shared_cpu_list``) counted
    once, summed (CPUs spread over two L3 slices have both); None where sysfs says nothing."""
    found: dict[tuple[int, str], int] = {}
    for cpu in sorted(cpus):
        base = os.path.join(root, f"cpu{cpu}", "cache")
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if not name.startswith("index"):
                continue
            d = os.path.join(base, name)
            level, kind, size = _read(f"{d}/level"), _read(f"{d}/type"), _read(f"{d}/size")
            if not (level and level.isdigit()) or kind not in ("Data", "Unified") or size is None:
                continue
            nbytes = _size_bytes(size)
            if nbytes is not None:
                found[(int(level), _read(f"{d}/shared_cpu_list") or f"cpu{cpu}")] = nbytes
    if not found:
        return None
    top = max(level for level, _ in found)
    return sum(n for (level, _), n in found.items() if level == top)


@lru_cache(maxsize=1)
def last_level_cache_bytes() -> int:
    """The last-level cache of the CPUs this process may run on (its affinity mask), in bytes:
    sysfs (``llc_from_sysfs``), else what the OS reports for L3 or L2, else
    ``FALLBACK_LLC_BYTES``. (sysconf's L3 is not trusted first: on this Zen 4 VM it reports
    320 MiB, sysfs the 32 MiB the two CPUs share.) What a cold timing must exceed
    (``measure.runner``)."""
    try:
        cpus = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = set(range(logical_cpus()))
    caches = cache_bytes()
    return llc_from_sysfs(cpus) or caches["l3"] or caches["l2"] or FALLBACK_LLC_BYTES


def host_hardware_params(target: Target | str | None = None) -> HardwareParams:
    """This machine's HardwareParams for code built for ``target`` (default: the current one):
    cores = ``num_threads()`` (``ANSOR_NUM_THREADS`` if set, else the usable CPUs), the target's
    vector width and registers, cache line and sizes where the OS reports them. Computed afresh
    on each call (the thread count follows the environment); raises ``num_threads``'s ValueError
    for a bad ``ANSOR_NUM_THREADS``."""
    t = get_target(target)
    bits = t.vector_bits
    x86 = host_triple().startswith(("x86_64", "i386", "i686"))
    caches = cache_bytes()
    return HardwareParams(
        num_cores=num_threads(),
        vector_bits=bits,
        cache_line_bytes=cache_line_bytes(),
        # x86-64: 32 zmm registers with AVX-512, else 16 (ymm/xmm); unknown elsewhere.
        num_vector_registers=t.num_vector_registers if x86 else None,
        l1d_cache_bytes=caches["l1d"],
        l2_cache_bytes=caches["l2"],
        l3_cache_bytes=caches["l3"],
        target=f"{t.cpu} ({toolchain_key(t)})",
    )


# The optimisation pipeline, as data: ``optimize`` applies it and the compile cache
# (``measure.compile_cache``) keys object code by it, so changing a setting here misses old entries.
PIPELINE: dict = {
    "speed_level": 3,
    "loop_vectorization": True,
    "slp_vectorization": True,
    # The schedule decides unrolling (unroll annotations, auto_unroll_max_step -> unroll.full
    # metadata). Left to itself LLVM also unrolls every small constant-trip loop, cascading
    # through nests: one random schedule took 71 s to optimise that way, 0.05 s with this off.
    "loop_unrolling": False,
}


def optimize(module: llvm.ModuleRef) -> llvm.ModuleRef:
    """Run the O3 pipeline (``PIPELINE``: loop and SLP vectorisation, no unrolling) on ``module``
    in place; returns it."""
    tm = target_machine()
    pto = llvm.create_pipeline_tuning_options(speed_level=PIPELINE["speed_level"])
    pto.loop_vectorization = PIPELINE["loop_vectorization"]
    pto.slp_vectorization = PIPELINE["slp_vectorization"]
    pto.loop_unrolling = PIPELINE["loop_unrolling"]
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    return module


def parse(ir: str) -> llvm.ModuleRef:
    """``ir`` as a verified LLVM module."""
    init_llvm()
    mod = llvm.parse_assembly(ir)
    mod.verify()
    return mod


def compile_ir(ir: str, timings: dict | None = None) -> bytes:
    """LLVM IR text -> object code for the current target: parse, verify, optimise (``optimize``), emit. The one
    place IR becomes machine code; callers go through ``measure.compile_cache.object_code``,
    which skips this for a module compiled before. ``timings`` (if given) receives the seconds
    of each stage under "parse", "optimize" and "emit"."""
    t0 = time.perf_counter()
    mod = parse(ir)
    t1 = time.perf_counter()
    optimize(mod)
    t2 = time.perf_counter()
    obj = bytes(target_machine().emit_object(mod))
    if timings is not None:
        timings.update(parse=t1 - t0, optimize=t2 - t1, emit=time.perf_counter() - t2)
    return obj
