"""numpy's ``a @ b`` (OpenBLAS) for an n^3 float32 GEMM: the figure the default job and the quick
start (``ansor tune``) print next to ours.

Timed with the benchmark suite's method (``ansor.bench.timing``): warm-up, then repeats of a
calibrated number of calls. The quick start times it in a fresh process
(``python -m ansor.cli.numpy_matmul N``, started by ``timing.run_fresh``) so that numpy's
OpenBLAS threads and the kernels' pool threads never share a process (idle threads that spin
steal each other's cores).
"""
from __future__ import annotations

import sys
from typing import Callable, Sequence

import numpy as np

from ansor.bench import timing

# Warm the cores up first, as Kernel.benchmark does.
WARMUP_S = 0.3
REPEATS = 7
FRESH_TIMEOUT_S = 120.0


def _matmul(n: int) -> Callable[[], np.ndarray]:
    a = np.random.rand(n, n).astype("float32")
    b = np.random.rand(n, n).astype("float32")
    return lambda: a @ b


def median_seconds(n: int) -> float:
    """The median of ``REPEATS`` timings of ``a @ b``, in this process."""
    return float(timing.time_callable(_matmul(n), repeat=REPEATS, warmup_s=WARMUP_S)["seconds"])


def best_seconds(n: int, repeats: int = REPEATS, min_repeat_s: float = 0.1) -> float:
    """The fastest of ``repeats`` timings (each >= ``min_repeat_s``) of ``a @ b``, after a
    warm-up. The best of several, because the tuned figure it is compared with is the best of many
    candidates: on a busy machine a median would charge numpy for noise the tuner escaped."""
    res = timing.time_callable(_matmul(n), repeat=repeats, min_repeat_ms=min_repeat_s * 1e3,
                               warmup_s=WARMUP_S)
    return min(res["repeats"])


def best_seconds_in_fresh_process(n: int, threads: int) -> tuple[float | None, str]:
    """``best_seconds(n)`` measured in a fresh interpreter with ``threads`` threads for OpenBLAS
    (the same number as our kernels get). Returns (seconds, "") or (None, why)."""
    res = timing.run_fresh(["-m", "ansor.cli.numpy_matmul", str(n)], threads,
                           timeout=FRESH_TIMEOUT_S, env=timing.worker_env())
    if "seconds" not in res:
        return None, str(res.get("error", "returned no figure"))
    return float(res["seconds"]), ""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ansor.cli.numpy_matmul N``: emit ``{"seconds": best_seconds(N)}``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    timing.emit_result({"seconds": best_seconds(int(argv[0])), "blas": timing.blas_kernels()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
