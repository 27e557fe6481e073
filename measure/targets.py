"""The CPU code is built for: ``Target``, made from a name (``native``, ``x86-64-v3``, ``znver4``...).

``native`` is the host (its LLVM CPU name and full feature string: what every build did before
targets existed, so its toolchain key is unchanged). Any other name is an LLVM CPU name - the
x86-64 psABI levels ``x86-64-v2``/``-v3``/``-v4`` and CPUs such as ``haswell``,
``skylake-avx512``, ``znver3``, ``znver4`` - built with the CPU's own default features: the
target machine gets an empty feature string and the IR's functions carry ``"target-cpu"`` alone,
so nothing of the host's leaks in (an x86-64-v3 build has no zmm register).

llvmlite can name the host's features but not a named CPU's, which the derived facts (vector
width, AVX-512) and the load-time check (``measure.cpu_features``) need. They are asked of LLVM
itself: LLVM's x86 inliner inlines a callee only into a caller whose CPU has every feature of the
callee, so a module with one caller on the CPU per feature ``f`` and one callee needing ``+f``,
run through the inliner, says which features the CPU has (``_probe_features``, ~0.1 s per CPU,
once per process). An unknown name is found the same way LLVM reports it: "not a recognized
processor" on stderr when a target machine is made.

The target of a build is a dynamic scope: ``use_target(t)`` around code generation and
compilation (``measure.target.compile_ir``, ``measure.codegen``); outside any, ``native``.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import llvmlite.binding as llvm

from compute.errors import InputError

from . import cpu_features

NATIVE = "native"
# The names the documentation and error messages offer (any other LLVM CPU name works too).
KNOWN_NAMES = (NATIVE, "x86-64-v2", "x86-64-v3", "haswell", "x86-64-v4", "skylake-avx512",
               "znver3", "znver4")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

_LOCK = threading.Lock()
_STDERR_LOCK = threading.Lock()
_INITIALISED = False


def init_llvm() -> None:
    global _INITIALISED
    if _INITIALISED:
        return
    with _LOCK:
        if not _INITIALISED:
            # llvm.initialize() raises on llvmlite >= 0.45; these two are all a native JIT needs.
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _INITIALISED = True


@lru_cache(maxsize=1)
def host_cpu_name() -> str:
    init_llvm()
    return llvm.get_host_cpu_name()


@lru_cache(maxsize=1)
def host_cpu_features() -> str:
    init_llvm()
    try:
        return llvm.get_host_cpu_features().flatten()
    except RuntimeError:  # some virtualised hosts cannot report features: the CPU name must do
        return ""


@lru_cache(maxsize=1)
def host_triple() -> str:
    init_llvm()
    return llvm.get_process_triple()


def _enabled(feature_string: str) -> frozenset[str]:
    return frozenset(f[1:] for f in feature_string.split(",") if f.startswith("+"))


class TargetError(InputError):
    """An unknown target name, or a target this CPU cannot run; the message is one line."""


@dataclass(frozen=True)
class Target:
    """A CPU to build for. ``name``: as asked (``native`` or an LLVM CPU name); ``cpu``: the LLVM
    CPU name; ``features``: the feature string given to LLVM (the host's for ``native``, empty -
    the CPU's defaults - otherwise); ``enabled``: the LLVM names of the features the CPU has."""

    name: str
    cpu: str
    features: str
    enabled: frozenset

    @property
    def is_native(self) -> bool:
        return self.name == NATIVE

    def has(self, feature: str) -> bool:
        return feature in self.enabled

    @property
    def vector_bits(self) -> int:
        """SIMD register width the code uses: 512 with AVX-512F, 256 with AVX2, 128 otherwise."""
        return 512 if self.has("avx512f") else 256 if self.has("avx2") else 128

    @property
    def num_vector_registers(self) -> int:
        """x86-64: 32 (zmm) with AVX-512, else 16 (ymm/xmm)."""
        return 32 if self.has("avx512f") else 16

    @property
    def required_features(self) -> list[str]:
        """The features a loader checks before running this target's code (sorted LLVM names)."""
        return cpu_features.checkable(self.enabled)

    def missing_here(self) -> list[str]:
        """The required features this CPU lacks (none for ``native``)."""
        if self.is_native:
            return []
        return cpu_features.missing_features(self.required_features, _enabled(host_cpu_features())
                                             or cpu_features.host_features() or ())

    def check_runnable(self, what: str = "code") -> None:
        """TargetError (one line) when this CPU cannot run code built for this target."""
        lacking = self.missing_here()
        if lacking:
            raise TargetError(f"{what} built for {self.name} cannot run here: this CPU "
                              f"({host_cpu_name()}) lacks {', '.join(lacking)}")

    def __str__(self) -> str:
        return self.name if self.name == self.cpu else f"{self.name} ({self.cpu})"


def _llvm_target() -> llvm.Target:
    init_llvm()
    return llvm.Target.from_triple(host_triple())


def _is_known_cpu(cpu: str) -> bool:
    """Whether LLVM knows ``cpu``: it says so only on stderr, which is captured for the call."""
    llvm_target = _llvm_target()
    with _STDERR_LOCK, tempfile.TemporaryFile() as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            llvm_target.create_target_machine(cpu=cpu, features="", opt=0)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return b"not a recognized processor" not in tmp.read()


def _feature_universe() -> list[str]:
    init_llvm()
    try:
        names = list(llvm.get_host_cpu_features().keys())
    except RuntimeError:
        names = []
    return sorted(set(names) | cpu_features.CHECKABLE)


@lru_cache(maxsize=None)
def _probe_features(cpu: str) -> frozenset[str]:
    """The LLVM features ``cpu`` has, asked of LLVM's inliner (see the module docstring)."""
    feats = _feature_universe()
    lines = [f'target triple = "{host_triple()}"', "@g = global i32 0"]
    for i, f in enumerate(feats):
        # The callee has a side effect, else the call would be deleted rather than inlined.
        lines += [f"define internal void @c{i}() #{2 * i + 1} {{ store volatile i32 1, ptr @g ret void }}",
                  f"define void @p{i}() #{2 * i + 2} {{ call void @c{i}() ret void }}",
                  f'attributes #{2 * i + 1} = {{ nounwind "target-cpu"="x86-64" "target-features"="+{f}" }}',
                  f'attributes #{2 * i + 2} = {{ nounwind "target-cpu"="{cpu}" }}']
    mod = llvm.parse_assembly("\n".join(lines))
    tm = _llvm_target().create_target_machine(cpu=cpu, features="", opt=2)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
    pb.getModulePassManager().run(mod, pb)
    # (a call left may have become ``tail call fastcc void @cN()``)
    calls_left = {m.group(1) for m in re.finditer(r"\bcall\b[^@\n]*@c(\d+)\(", str(mod))}
    return frozenset(f for i, f in enumerate(feats) if str(i) not in calls_left)


def _cpu_name(name: str) -> str:
    """``name`` without TVM's spelling around it: ``llvm -mcpu=haswell`` -> ``haswell``."""
    s = name.strip()
    m = re.fullmatch(r"llvm(?:\s+.*?)?\s+-mcpu=(\S+)(?:\s+.*)?", s)
    if m:
        return m.group(1)
    return NATIVE if s == "llvm" else s


@lru_cache(maxsize=None)
def _resolve(name: str) -> Target:
    cpu = _cpu_name(name)
    if cpu == NATIVE or cpu == "host":
        host = host_cpu_features()
        return Target(NATIVE, host_cpu_name(), host,
                      _enabled(host) or _probe_features(host_cpu_name()))
    if not _NAME_RE.fullmatch(cpu) or not _is_known_cpu(cpu):
        raise TargetError(f"unknown target {name!r}: give native, {', '.join(KNOWN_NAMES[1:])} "
                          "or another LLVM CPU name")
    return Target(cpu, cpu, "", _probe_features(cpu))


def get_target(target: "Target | str | None" = None) -> Target:
    """``target`` as a Target: a Target as is, a name resolved (TargetError, one line, for an
    unknown one), None: the current one (``current_target``)."""
    if target is None:
        return current_target()
    if isinstance(target, Target):
        return target
    if not isinstance(target, str):
        raise TypeError(f"a target is a name such as 'x86-64-v3' or a Target, got {type(target).__name__}")
    return _resolve(target)


_CURRENT: ContextVar[Target | None] = ContextVar("ansor_target", default=None)


def current_target() -> Target:
    """The target code is built for here: ``use_target``'s, else ``native``."""
    t = _CURRENT.get()
    return t if t is not None else _resolve(NATIVE)


@contextlib.contextmanager
def use_target(target: "Target | str | None") -> Iterator[Target]:
    """Build for ``target`` inside the block (None: leave the current one)."""
    t = get_target(target)
    token = _CURRENT.set(t)
    try:
        yield t
    finally:
        _CURRENT.reset(token)
