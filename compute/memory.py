"""How much memory a plan may ask for, checked before anything is allocated.

A shape in a model file, a record or an option is untrusted: ``[100000, 100000]`` is 40 GB of
float32 and numpy would either raise a ``MemoryError`` deep inside a run or, worse, succeed and
push the machine into swap. Every place that is about to allocate a size it read from input
(a network's buffers, a workload's arguments, a folded constant) asks ``check_bytes`` first and
gets one ``MemoryBudgetError`` naming the tensor and both sizes.

The budget is the memory available now (``MemAvailable``, bounded by a cgroup limit) unless
``ANSOR_MAX_MEMORY`` sets one (bytes, or with a K/M/G/T suffix).
"""
from __future__ import annotations

import math
import os
import re
from typing import Sequence

from .errors import InputError

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class MemoryBudgetError(InputError):
    """A tensor or plan larger than the memory this process may use."""


def fmt_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps it at least 1."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise InputError(f"ANSOR_MAX_MEMORY={text!r}: not a size (bytes, or a number with K/M/G/T)")
    return int(float(m.group(1)) * _SUFFIX[m.group(2).upper()])


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            return int(text)
    return None


def available_bytes() -> int:
    """The memory this process may still allocate: ``ANSOR_MAX_MEMORY`` if set, else the
    kernel's ``MemAvailable`` (bounded by the cgroup's limit), else total physical memory."""
    env = os.environ.get("ANSOR_MAX_MEMORY", "").strip()
    if env:
        return _parse_size(env)
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            avail = 1 << 62  # no way to know: do not refuse
    limit = _cgroup_limit()
    return min(avail, limit) if limit else avail


def nbytes_of(shape: Sequence[int], itemsize: int) -> int:
    """Bytes of a dense tensor (Python ints: no overflow)."""
    return math.prod(int(n) for n in shape) * int(itemsize)


def check_bytes(nbytes: int, what: str, budget: int | None = None) -> None:
    """Raise ``MemoryBudgetError`` if ``nbytes`` (what ``what`` would allocate) exceeds
    ``budget`` (default: ``available_bytes()``)."""
    limit = available_bytes() if budget is None else budget
    if nbytes > limit:
        raise MemoryBudgetError(
            f"{what} needs {fmt_bytes(nbytes)}, more than the {fmt_bytes(limit)} of memory available "
            "(ANSOR_MAX_MEMORY sets the budget)")
