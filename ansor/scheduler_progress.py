"""Progress of a ``TaskScheduler`` run: the callback hooks, the table printed each round and the
estimated-latency history file (written, read back, plotted).

Kept apart from the run loop: what is shown or recorded about a run never steers it. The callbacks
only read the scheduler (its tasks, costs, trials and clock); ``LogEstimatedLatency`` writes one
tab-separated row per round so that a long tuning run (and its resumptions on the same log) can
be followed and plotted as one curve.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import tempfile
import time
from typing import TYPE_CHECKING, Any

from .scheduler_policy import NO_COST
from .tuning import format_duration

if TYPE_CHECKING:
    from .task_scheduler import TaskScheduler

logger = logging.getLogger("ansor.task_scheduler")

__all__ = ["HISTORY_HEADER", "LogEstimatedLatency", "PrintTableInfo", "TaskSchedulerCallback",
           "plot_latency_history", "read_latency_history"]


class TaskSchedulerCallback:
    """Hooks around each round: ``pre_tune`` before the task ``task_id`` is tuned (the previous
    round's results are in), ``post_tune`` after, ``finish`` once at the end."""

    def pre_tune(self, scheduler: "TaskScheduler", task_id: int) -> None:
        pass

    def post_tune(self, scheduler: "TaskScheduler", task_id: int) -> None:
        pass

    def finish(self, scheduler: "TaskScheduler") -> None:
        pass



def _ms(c: float | None) -> str:
    return "-" if c is None else f"{c * 1e3:.4g}"


class PrintTableInfo(TaskSchedulerCallback):
    """Before each round (so after the previous one): the table ``| ID | task | latency (ms) |
    GFLOPS | trials |``, the estimated total latency, trials done / budget, elapsed time, ETA and
    the next task; at the end the same table with why the run stopped."""

    def __init__(self, file: Any = None):
        self.file = file

    def _print(self, text: str) -> None:
        print(text, file=self.file, flush=True)

    def table(self, s: "TaskScheduler") -> str:
        rows = [("ID", "task", "latency (ms)", "GFLOPS", "trials")]
        for i, t in enumerate(s.tasks):
            c = s.best_cost(i)
            gf = "-" if c is None or not s.flops[i] else f"{s.flops[i] / c / 1e9:.2f}"
            st = s.state[i]
            trials = str(s.task_trials(i)) + ("" if st.tuned else " (not tuned)") + \
                (" (done)" if st.dead else "")
            rows.append((str(i), t.desc, _ms(c), gf, trials))
        widths = [max(len(r[k]) for r in rows) for k in range(5)]
        lines = []
        for n, r in enumerate(rows):
            lines.append("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |")
            if n == 0:
                lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        return "\n".join(lines)

    def status(self, s: "TaskScheduler") -> str:
        est = s.estimated_latency()
        missing = sum(1 for c in s.costs() if c >= NO_COST)
        est_s = (f"{est * 1e3:.4g} ms" if est is not None
                 else f"- ({missing} task(s) without a valid schedule)")
        elapsed = time.monotonic() - s.t_start
        budget = s.budget()
        eta = "-"
        if s.trials and budget > s.trials:
            eta = format_duration(elapsed / s.trials * (budget - s.trials))
        restored = f" (+{s.restored} restored)" if s.restored else ""
        remeasured = f" | bests re-measured: {s.remeasured}" if s.remeasured else ""
        return (f"estimated total latency: {est_s} | trials: {s.trials}/{budget}{restored}"
                f"{remeasured} | elapsed: {format_duration(elapsed)} | ETA: {eta}")

    def pre_tune(self, scheduler: "TaskScheduler", task_id: int) -> None:
        if scheduler.options is None or scheduler.options.verbose < 1:
            return
        self._print(self.table(scheduler))
        self._print(f"{self.status(scheduler)} | next task: {task_id}")

    def finish(self, scheduler: "TaskScheduler") -> None:
        if scheduler.options is None or scheduler.options.verbose < 1:
            return
        self._print(self.table(scheduler))
        self._print(self.status(scheduler))
        self._print(f"tuning finished: {getattr(scheduler, 'stop_reason', '')}")


HISTORY_HEADER = ["round", "trials", "elapsed_s", "estimated_latency_ms"]


class LogEstimatedLatency(TaskSchedulerCallback):
    """Appends ``round, trials, elapsed_s, estimated_latency_ms`` (tab-separated, a header first)
    to ``path`` after each round, flushed at once. ``trials`` counts the log's measurements too
    and a resumed run continues the file's round count and clock, so the history of several
    runs on one log is one curve. The latency is ``nan`` until every task has a valid cost."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._round0 = 0
        self._t0 = 0.0
        self._opened = False
        self.error: str | None = None  # why the file could not be written (then no more rows)

    def _open(self) -> None:
        self._opened = True
        if not os.path.isfile(self.path) or os.path.getsize(self.path) == 0:
            with open(self.path, "w", encoding="utf-8") as f:
                f.write("\t".join(HISTORY_HEADER) + "\n")
            return
        rows = read_latency_history(self.path)  # raises naming the file and line when foreign
        if rows:
            self._round0 = int(rows[-1]["round"])
            self._t0 = float(rows[-1]["elapsed_s"])

    def post_tune(self, scheduler: "TaskScheduler", task_id: int) -> None:
        if self.error is not None:
            return
        try:
            self._append(scheduler)
        except OSError as err:  # a side output: a full disk here must not end the tuning run
            self.error = f"{err.strerror or err}"
            logger.warning("the latency history %r could not be written (%s); tuning goes on "
                           "without it", self.path, self.error)

    def _append(self, scheduler: "TaskScheduler") -> None:
        if not self._opened:
            self._open()
        est = scheduler.estimated_latency()
        trials = sum(scheduler.task_trials(i) for i in range(len(scheduler.tasks)))
        row = [str(self._round0 + scheduler.rounds_done), str(trials),
               f"{self._t0 + time.monotonic() - scheduler.t_start:.3f}",
               "nan" if est is None else f"{est * 1e3:.6g}"]
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("\t".join(row) + "\n")
            f.flush()


def read_latency_history(path: str | os.PathLike) -> list[dict[str, float]]:
    """The rows of a ``LogEstimatedLatency`` file as dicts of floats. A file that is not one (no
    such header, a malformed row) raises ValueError naming the file and line; a last line cut
    short by a killed run is skipped."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if not lines or lines[0].split("\t") != HISTORY_HEADER:
        raise ValueError(f"{path}, line 1: not an estimated-latency history (expected the header "
                         f"{' '.join(HISTORY_HEADER)})")
    complete = lines[1:-1]  # the text after the last newline is "" or a row cut short
    rows = []
    for n, text in enumerate(complete, start=2):
        parts = text.split("\t")
        try:
            if len(parts) != len(HISTORY_HEADER):
                raise ValueError(f"{len(parts)} fields")
            rows.append({k: float(v) for k, v in zip(HISTORY_HEADER, parts)})
        except ValueError as err:
            raise ValueError(f"{path}, line {n}: malformed history row ({err})") from None
    return rows


def plot_latency_history(path: str | os.PathLike, out: str | os.PathLike) -> bool:
    """Plot a ``LogEstimatedLatency`` history (estimated latency against trials and against
    seconds) into the image ``out``. Returns False when matplotlib is not installed. The image
    is written to a temporary file beside ``out`` and renamed: a failed write (a full disk)
    raises and leaves neither a partial image nor the temporary file."""
    try:
        # Optional: plotting is a convenience, not a dependency of tuning.
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    rows = [r for r in read_latency_history(path) if math.isfinite(r["estimated_latency_ms"])]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    y = [r["estimated_latency_ms"] for r in rows]
    a.plot([r["trials"] for r in rows], y, marker=".")
    a.set_xlabel("trials")
    a.set_ylabel("estimated latency (ms)")
    b.plot([r["elapsed_s"] for r in rows], y, marker=".")
    b.set_xlabel("seconds")
    for ax in (a, b):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    out = os.fspath(out)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out)}.", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(out)))
    try:
        mask = os.umask(0o022)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # as open() would make it (mkstemp's is 0600)
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format=os.path.splitext(out)[1].lstrip(".") or "png")
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        plt.close(fig)
    return True
