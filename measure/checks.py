"""Checks for numeric options: counts, durations, seeds.

Every number a user can give (a ``LocalRunner``'s timeout, ``TuningOptions.seed``, a CLI flag) is
checked here, where it enters, so that a bad value is a clear error naming the option and the
value rather than a failure deep inside (``--timeout nan`` used to disable the timeout and
busy-spin the parent; ``--timeout inf`` overflowed ``select``; ``--seed -1`` failed in numpy).
The functions raise ``ValueError`` (``TypeError`` for a non-number); the CLI wraps them as
argparse types so that a bad flag exits 2 with ``argument --NAME: ...``.
"""
from __future__ import annotations

import math
import numbers

# One day: no single build or measurement should take longer, and far larger values (1e10, inf)
# overflow the waits they feed.
MAX_TIMEOUT_S = 86400.0
# Seeds go to numpy's generators, LightGBM and ``random``; numpy's legacy seeding, the
# narrowest of them, takes 0 <= seed < 2**32.
MAX_SEED = 2**32 - 1
# Upper bounds of the counts a user gives (issue 40: ``--population 1000000000000`` was accepted
# and grew memory for minutes without measuring anything). They are far above any useful value
# and low enough that what they size (lists of candidates, rounds, repeats) fits in memory and
# starts at once; ``measure.checks`` is their one home (the CLI's argtypes and the library's
# option classes read them here).
MAX_TRIALS = 1_000_000  # a million measurements: weeks of tuning at ~1 s each
MAX_PER_ROUND = 4096  # candidates built and measured in one batch (default 64)
MAX_REPEAT = 10_000  # timed calls or repeats of one measurement
MAX_ROUNDS = 1000  # rounds of a comparison, each a fresh process per system
MAX_THREADS = 4096  # builders/threads (as ANSOR_NUM_THREADS: measure.target.MAX_NUM_THREADS)
MAX_EXTENT = 2**31 - 1  # a shape argument: the kernels index with 32-bit integers


def _who(name: str) -> str:
    # An empty name leaves the subject to the caller (argparse prefixes "argument --NAME: ").
    return f"{name} " if name else ""


def _real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{_who(name)}must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{_who(name)}must be a finite number, got {v!r}")
    return v


def check_positive(name: str, value: object, maximum: float | None = None,
                   unit: str = "") -> float:
    """A finite number > 0 (and <= ``maximum`` if given); returned as a float."""
    v = _real(name, value)
    if v <= 0:
        raise ValueError(f"{_who(name)}must be positive, got {v:g}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{_who(name)}must be at most {maximum:g}{unit}, got {v:g}")
    return v


def check_seconds(name: str, value: object, maximum: float = MAX_TIMEOUT_S) -> float:
    """A positive, finite duration in seconds, at most ``maximum``; returned as a float."""
    return check_positive(name, value, maximum, " s")


def check_nonnegative(name: str, value: object, maximum: float | None = None) -> float:
    """A finite number >= 0 (and <= ``maximum`` if given); returned as a float."""
    v = _real(name, value)
    if v < 0:
        raise ValueError(f"{_who(name)}must be >= 0, got {v:g}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{_who(name)}must be at most {maximum:g}, got {v:g}")
    return v


def check_fraction(name: str, value: object) -> float:
    """A share in (0, 1]; returned as a float."""
    v = _real(name, value)
    if not 0.0 < v <= 1.0:
        raise ValueError(f"{_who(name)}must be in (0, 1], got {v:g}")
    return v


def check_count(name: str, value: object, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer (any ``numbers.Integral`` but bool) >= ``minimum`` (and <= ``maximum`` if
    given); returned as an int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{_who(name)}must be an integer, got {value!r}")
    v = int(value)
    if v < minimum:
        raise ValueError(f"{_who(name)}must be an integer >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{_who(name)}must be at most {maximum}, got {fmt_count(v)}")
    return v


def fmt_count(v: int) -> str:
    """An integer for a message: a 4000-digit value is shortened to stay one readable line."""
    text = str(v)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"


def check_seed(name: str, value: object) -> int | None:
    """None, or an integer in [0, 2**32 - 1]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{_who(name)}must be an integer or None, got {value!r}")
    v = int(value)
    if not 0 <= v <= MAX_SEED:
        raise ValueError(f"{_who(name)}must be in [0, {MAX_SEED}], got {v}")
    return v


def check_memory_limit_gb(owner: str, value: object) -> float | None:
    """A worker's address-space cap in GiB: None (no cap) or a positive finite number."""
    if value is None:
        return None
    return check_positive(f"{owner} memory_limit_gb", value, maximum=1 << 20, unit=" GiB")
