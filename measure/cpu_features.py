"""Does this CPU have the instruction-set features a compiled module needs? Standard library only.

A module built for a named CPU (``measure.targets``) records the LLVM names of the features its
code may use; before any of that code runs, the loader compares them with what this CPU reports
and refuses with one line naming what is missing - never an illegal instruction later. This file
imports nothing beyond the standard library (no llvmlite, numpy or this package), so a standalone
loader can copy or import it as it is: ``refusal(where, target, required)`` is the whole check.

The host's features come from the ``flags`` line of ``/proc/cpuinfo`` (Linux), translated to LLVM
feature names by ``CPUINFO_FLAG``. Only the features in that table are checked: they are the
instruction sets generated code can use; LLVM's other features (tuning hints, system
instructions) are not reported by the kernel under a name of their own.
"""
from __future__ import annotations

from typing import Iterable

# LLVM feature name -> the Linux /proc/cpuinfo flag that reports it.
CPUINFO_FLAG: dict[str, str] = {
    "cmov": "cmov", "cx8": "cx8", "fxsr": "fxsr", "mmx": "mmx", "sse": "sse", "sse2": "sse2",
    "64bit": "lm", "cx16": "cx16", "sahf": "lahf_lm", "popcnt": "popcnt", "sse3": "pni",
    "ssse3": "ssse3", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "sse4a": "sse4a",
    "avx": "avx", "avx2": "avx2", "bmi": "bmi1", "bmi2": "bmi2", "f16c": "f16c", "fma": "fma",
    "fma4": "fma4", "lzcnt": "abm", "movbe": "movbe", "xsave": "xsave", "aes": "aes",
    "pclmul": "pclmulqdq", "vpclmulqdq": "vpclmulqdq", "vaes": "vaes", "gfni": "gfni",
    "sha": "sha_ni", "adx": "adx", "rdrnd": "rdrand", "rdseed": "rdseed",
    "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512cd": "avx512cd",
    "avx512dq": "avx512dq", "avx512vl": "avx512vl", "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni",
    "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
    "avx512vp2intersect": "avx512_vp2intersect", "avxvnni": "avx_vnni",
    "amx-tile": "amx_tile", "amx-int8": "amx_int8", "amx-bf16": "amx_bf16",
    "amx-fp16": "amx_fp16", "amx-complex": "amx_complex",
}
CHECKABLE = frozenset(CPUINFO_FLAG)


def checkable(features: Iterable[str]) -> list[str]:
    """The features of ``features`` a loader can check here, sorted (what a module records)."""
    return sorted(f for f in set(features) if f in CHECKABLE)


def host_features(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str] | None:
    """This CPU's checkable features (LLVM names), or None where ``cpuinfo`` cannot be read (not
    Linux): the check is then skipped, as nothing can be said."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return frozenset(llvm for llvm, flag in CPUINFO_FLAG.items() if flag in flags)
    except OSError:
        return None
    return None


def missing_features(required: Iterable[str], host: Iterable[str]) -> list[str]:
    """The checkable features of ``required`` that ``host`` lacks, in ``required``'s order."""
    have = set(host)
    out: list[str] = []
    for f in required:
        if f in CHECKABLE and f not in have and f not in out:
            out.append(f)
    return out


def refusal(where: str, target: str, required: Iterable[str],
            host: Iterable[str] | None = None, prefix: str = "ansor: ") -> str | None:
    """The one-line refusal to load ``where`` (built for ``target``, needing ``required``) on a
    CPU with ``host`` features (default: this one's, ``host_features()``), e.g. ``ansor: net/:
    built for x86-64-v4, this CPU lacks avx512f, avx512bw``; None when it may run (or when the
    host's features are unknown). ``prefix`` starts the line (a caller whose errors are printed
    with their own prefix passes "")."""
    have = host_features() if host is None else frozenset(host)
    if have is None:
        return None
    lacking = missing_features(required, have)
    if not lacking:
        return None
    return f"{prefix}{where}: built for {target}, this CPU lacks {', '.join(lacking)}"
