"""How tuning prints times, throughputs, speed-ups and durations (progress lines, summaries).

One place, so that ``SearchTask.tune``, the task scheduler's table and the CLI write a time the
same way; ``ansor.tuning`` re-exports these names.
"""
from __future__ import annotations

__all__ = ["format_duration", "format_gflops", "format_seconds", "format_speedup", "gflops_part"]


def format_seconds(sec: float) -> str:
    """A kernel time with 3 significant digits: ``52.3 us``, ``0.52 ms``, ``1.23 s``."""
    if sec < 1e-4:
        return f"{sec * 1e6:.3g} us"
    if sec < 1:
        return f"{sec * 1e3:.3g} ms"
    return f"{sec:.3g} s"


def format_gflops(gf: float) -> str:
    return f"{gf:.0f}" if gf >= 100 else f"{gf:.3g}"


def format_speedup(x: float) -> str:
    return f"{x:.0f}x" if x >= 100 else f"{x:.3g}x"


def format_duration(sec: float) -> str:
    """A wall-clock span: ``41 s``, ``12 min 3 s``, ``2 h 05 min``."""
    sec = max(0.0, sec)
    if sec < 100:
        return f"{sec:.0f} s" if sec >= 10 else f"{sec:.1f} s"
    m, s = divmod(int(round(sec)), 60)
    if m < 60:
        return f"{m} min {s} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def gflops_part(gf: float | None) -> str:
    return "" if gf is None else f" {format_gflops(gf)} GFLOPS"
