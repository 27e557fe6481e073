"""The exported library's own CPU check, as LLVM IR: ``ansor_create`` refuses a CPU that lacks a
feature the code was built for with one line naming them, instead of an illegal instruction in
the first kernel (a C program has no Python loader to check /proc/cpuinfo first).

``@.cpu_missing(ptr buf, i64 size)`` reads ``cpuid`` (and ``xgetbv`` for the OS's saving of
the AVX and AVX-512 registers) and writes the missing features' names, comma-separated, into
``buf``; it returns whether any is missing. Feature names are LLVM's (``required_features``);
one not in ``CPUID_BITS`` is not checked here (the Python loader still checks it).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

# LLVM feature -> (leaf, subleaf, register index eax=0 ebx=1 ecx=2 edx=3, bit).
CPUID_BITS: dict[str, tuple[int, int, int, int]] = {
    "sse": (1, 0, 3, 25), "sse2": (1, 0, 3, 26), "sse3": (1, 0, 2, 0), "ssse3": (1, 0, 2, 9),
    "fma": (1, 0, 2, 12), "cx16": (1, 0, 2, 13), "sse4.1": (1, 0, 2, 19), "sse4.2": (1, 0, 2, 20),
    "movbe": (1, 0, 2, 22), "popcnt": (1, 0, 2, 23), "avx": (1, 0, 2, 28), "f16c": (1, 0, 2, 29),
    "bmi": (7, 0, 1, 3), "avx2": (7, 0, 1, 5), "bmi2": (7, 0, 1, 8), "avx512f": (7, 0, 1, 16),
    "avx512dq": (7, 0, 1, 17), "avx512ifma": (7, 0, 1, 21), "avx512cd": (7, 0, 1, 28),
    "avx512bw": (7, 0, 1, 30), "avx512vl": (7, 0, 1, 31), "avx512vbmi": (7, 0, 2, 1),
    "avx512vbmi2": (7, 0, 2, 6), "gfni": (7, 0, 2, 8), "vaes": (7, 0, 2, 9),
    "vpclmulqdq": (7, 0, 2, 10), "avx512vnni": (7, 0, 2, 11), "avx512bitalg": (7, 0, 2, 12),
    "avx512vpopcntdq": (7, 0, 2, 14), "avx512fp16": (7, 0, 3, 23), "avxvnni": (7, 1, 0, 4),
    "avx512bf16": (7, 1, 0, 5), "lzcnt": (0x80000001, 0, 2, 5),
}
# XCR0 bits the OS must set: SSE and AVX state; AVX-512 adds opmask and the upper registers.
_XCR0_AVX, _XCR0_AVX512 = 0x6, 0xE6
_CPUID = ('asm sideeffect "cpuid", "={ax},={bx},={cx},={dx},{ax},{cx},~{dirflag},~{fpsr},~{flags}"')


def _needs_xcr0(feature: str) -> int:
    if feature.startswith("avx512"):
        return _XCR0_AVX512
    if feature.startswith(("avx", "fma", "f16c", "vaes", "vpclmulqdq")):
        return _XCR0_AVX
    return 0


def cpu_check_ir(features: Sequence[str], cstr: Callable[[str], str]) -> list[str]:
    """The definition of ``@.cpu_missing`` for ``features`` (``cstr``: a string constant's symbol)."""
    checked = [f for f in features if f in CPUID_BITS]
    lines = ["declare ptr @strncat(ptr, ptr, i64)",
             "define internal i1 @.cpu_missing(ptr %buf, i64 %size) #0 {",
             "entry:",
             "  store i8 0, ptr %buf, align 1",
             f"  %l0 = call {{ i32, i32, i32, i32 }} {_CPUID}(i32 0, i32 0)",
             "  %max = extractvalue { i32, i32, i32, i32 } %l0, 0",
             f"  %e0 = call {{ i32, i32, i32, i32 }} {_CPUID}(i32 -2147483648, i32 0)",
             "  %emax = extractvalue { i32, i32, i32, i32 } %e0, 0"]
    regs: dict[tuple[int, int, int], str] = {}
    for leaf, sub in sorted({CPUID_BITS[f][:2] for f in checked}):
        tag = f"{leaf:x}_{sub}"
        top = "%emax" if leaf >= 0x80000000 else "%max"
        lf = leaf - (1 << 32) if leaf >= 1 << 31 else leaf  # as an i32 constant
        lines += [f"  %r{tag} = call {{ i32, i32, i32, i32 }} {_CPUID}(i32 {lf}, i32 {sub})",
                  f"  %has{tag} = icmp uge i32 {top}, {lf}"]
        for r in range(4):
            lines += [f"  %v{tag}_{r} = extractvalue {{ i32, i32, i32, i32 }} %r{tag}, {r}",
                      f"  %g{tag}_{r} = select i1 %has{tag}, i32 %v{tag}_{r}, i32 0"]
            regs[(leaf, sub, r)] = f"%g{tag}_{r}"
    # xgetbv only where the OS enabled it (OSXSAVE, leaf 1 ecx bit 27); else no AVX state.
    lines += [f"  %l1 = call {{ i32, i32, i32, i32 }} {_CPUID}(i32 1, i32 0)",
              "  %ecx1 = extractvalue { i32, i32, i32, i32 } %l1, 2",
              "  %osx = and i32 %ecx1, 134217728",
              "  %hasosx = icmp ne i32 %osx, 0",
              "  br i1 %hasosx, label %xget, label %xdone",
              "xget:",
              '  %xr = call { i32, i32 } asm sideeffect "xgetbv", "={ax},={dx},{cx},~{dirflag},~{fpsr},~{flags}"(i32 0)',
              "  %xlo = extractvalue { i32, i32 } %xr, 0",
              "  br label %xdone",
              "xdone:",
              "  %xcr0 = phi i32 [ 0, %entry ], [ %xlo, %xget ]",
              "  br label %f0"]
    for k, f in enumerate(checked):
        leaf, sub, reg, bit = CPUID_BITS[f]
        need = _needs_xcr0(f)
        lines += [f"f{k}:",
                  f"  %b{k} = and i32 {regs[(leaf, sub, reg)]}, {1 << bit if bit < 31 else -(1 << 31)}",
                  f"  %c{k} = icmp ne i32 %b{k}, 0",
                  f"  %x{k} = and i32 %xcr0, {need}",
                  f"  %o{k} = icmp eq i32 %x{k}, {need}",
                  f"  %ok{k} = and i1 %c{k}, %o{k}",
                  f"  br i1 %ok{k}, label %f{k + 1}, label %m{k}",
                  f"m{k}:",
                  f"  %s{k} = call ptr @strncat(ptr %buf, ptr {cstr(' ' + f)}, i64 32)",
                  f"  br label %f{k + 1}"]
    lines += [f"f{len(checked)}:",
              "  %first = load i8, ptr %buf, align 1",
              "  %missing = icmp ne i8 %first, 0",
              "  ret i1 %missing",
              "}", ""]
    return lines
