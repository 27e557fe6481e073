"""Names in the generated IR: user and record names made safe, the kernel's symbol, and the
symbols the module and the C runtime already own.

Names come from users and from record files (untrusted); nothing of a name reaches the IR text
except through ``sanitize``.
"""
from __future__ import annotations

import re

from ..thread_pool import ENTRY as POOL_ENTRY

NUM_THREADS_GLOBAL = "__ansor_num_threads"


def sanitize(name: str) -> str:
    """An LLVM identifier made of [A-Za-z0-9_.] that does not start with a digit.

    Names come from users and from record files (untrusted): nothing of a name reaches the IR text
    except through this function, so no name can end a comment, a string or an identifier."""
    s = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "_"
    return "_" + s if s[0].isdigit() else s


# Value and label names carry a loop's name only as a readable hint; the counter makes them unique.
MAX_HINT_LEN = 32
MAX_SYMBOL_LEN = 64
# Symbols the module itself declares or defines, the thread pool's (measure.thread_pool), and C
# library functions LLVM may emit calls to (memset for a zeroing loop, libm for math): a kernel
# named like one of them would clash with that declaration or be called in its place. OpenMP's
# names stay reserved: lightgbm loads libgomp into the same process.
_RESERVED_SYMBOLS = frozenset({
    NUM_THREADS_GLOBAL, "aligned_alloc", "free", "malloc", "calloc", "realloc", "posix_memalign",
    "memset", "memcpy", "memmove", "memcmp", "bcmp", "bzero", "abort", "exit", "system",
    POOL_ENTRY,
    *(f + sfx for f in ("exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "pow",
                        "sqrt", "cbrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin",
                        "acos", "atan", "atan2", "erf", "erfc", "floor", "ceil", "trunc",
                        "round", "rint", "nearbyint", "fabs", "fma", "fmin", "fmax", "fmod",
                        "ldexp", "frexp", "copysign", "sincos")
      for sfx in ("", "f", "l")),
})
_RESERVED_PREFIXES = ("llvm.", "__", "GOMP_", "omp_", "kmp_")


def _hint(name: str, limit: int = MAX_HINT_LEN) -> str:
    """A short sanitised form of a user name, for value and label names and comments."""
    return sanitize(name)[:limit]


def kernel_symbol(name: str) -> str:
    """The kernel function's symbol for a user-given name: sanitised, bounded, and never one of
    the symbols the module or the C runtime already use."""
    s = sanitize(name)[:MAX_SYMBOL_LEN]
    if s in _RESERVED_SYMBOLS or s.startswith(_RESERVED_PREFIXES):
        s = "kernel_" + s
    return s
