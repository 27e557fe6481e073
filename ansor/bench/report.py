"""The suite's reports: the Markdown table, the bar chart of a suite run and the plot of a tuning
curve (PNG, with matplotlib when it is installed).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .workloads import SYSTEM_LABELS


def fmt_ms(seconds: float | None) -> str:
    """Seconds as milliseconds with 3 decimals, ``-`` when missing (tables of the benchmarks)."""
    return f"{seconds * 1e3:.3f}" if seconds else "-"


def fmt_ratio(a: float | None, b: float | None) -> str:
    """``a / b`` with 2 decimals, ``-`` when either is missing."""
    return f"{a / b:.2f}" if a and b else "-"


def write_markdown(path, lines) -> str:
    """Join ``lines`` into a Markdown document, write it to ``path`` and print it; returns it."""
    md = "\n".join(lines) + "\n"
    path.write_text(md)
    print(md)
    return md


def emit(report: dict, text: str, json_path: str | os.PathLike | None) -> None:
    """A benchmark script's ending: ``text`` (its table) on stdout and, if ``json_path``, every
    figure of ``report`` written there as JSON."""
    print(text, flush=True)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1)


def _fmt_figure(entry: dict, unit: str) -> str:
    if "seconds" not in entry:
        return "-"
    if unit == "ms":
        ms = entry["ms"]
        return f"{ms:.3f} ms" if ms < 10 else f"{ms:.1f} ms"
    g = entry.get("gflops")
    return "-" if g is None else f"{g:.1f}"


def _fmt_spt(t: dict) -> str:
    v = t.get("seconds_per_trial") if isinstance(t, dict) else None
    return "-" if v is None else f"{v:.2f}"


def render_markdown(report: dict) -> str:
    st = report["settings"]
    tm = st["timing"]
    systems = st["systems"]
    peers = [s for s in systems if s != "ours"]
    lines = [
        "## ansor-py benchmark suite",
        "",
        f"{report['cpu']} ({report['machine']}, LLVM CPU `{report['llvm_cpu']}`), "
        f"{st['threads']} thread(s), float32, batch 1, {st['trials']} tuning trials per tuner; "
        f"{report['date']}.",
        "",
        f"Each system runs in a fresh process, systems alternate over {st['rounds']} round(s) "
        f"and the figure is the median over rounds of the median of {tm['repeat']} repeats "
        f"of >= {tm['min_repeat_ms']:g} ms (after {tm['warmup_s']:g} s of warm-up), on random "
        "inputs, each output checked against the numpy reference first. "
        "**Units: GFLOPS (higher is better) in rows marked [GFLOPS], milliseconds per call "
        "(lower is better) in rows marked [ms]** (softmax and layer norm: their FLOP counts are "
        "tiny). FLOPs are counted once per workload (`ComputeDAG.flop_count`) and used for "
        "every system. *ours / best peer* = the fastest peer's time / our time (> 1: ours is "
        "faster). Tuning s/trial = tuning wall time / trials measured.",
        "",
    ]
    head = (["workload [unit]", "ours"] + [SYSTEM_LABELS[s] for s in peers]
            + ["ours / best peer", "our tuning s/trial"]
            + (["TVM s/trial"] if "tvm" in systems else []))
    lines.append("| " + " | ".join(head) + " |")
    lines.append("| --- " + "| ---: " * (len(head) - 1) + "|")
    notes: dict = {}
    for name, w in report["workloads"].items():
        unit = w["unit"]
        row = [f"{w['label']} [{unit}]"]
        for s in systems:
            e = w["systems"].get(s, {})
            row.append(_fmt_figure(e, unit))
            if e.get("status", "ok") != "ok":
                notes.setdefault((s, e["status"]), []).append(name)
        ratio = w.get("ours_over_best_peer")
        best = w.get("best_peer")
        row.append(f"{ratio:.2f} ({SYSTEM_LABELS[best]})" if ratio else "-")
        row.append(_fmt_spt(w["tuning"].get("ours", {})))
        if "tvm" in systems:
            row.append(_fmt_spt(w["tuning"].get("tvm", {})))
        lines.append("| " + " | ".join(row) + " |")
    if notes:
        lines += ["", "Not measured:", ""]
        for (s, status), names in notes.items():
            lines.append(f"- {SYSTEM_LABELS.get(s, s)} on {', '.join(names)}: {status}")
    v = report["versions"]
    vers = ", ".join(f"{k} {v[k]}" for k in ("python", "numpy", "torch", "tvm", "tvm_ffi",
                                             "llvmlite", "llvm", "tvm_llvm") if v.get(k))
    lines += ["", f"Versions: {vers}.", ""]
    return "\n".join(lines)


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot_suite(report: dict, path: Path) -> Path | str:
    """Grouped bars: each system's speed relative to the fastest system on each workload."""
    plt = _pyplot()
    if plt is None:
        return "matplotlib is not installed (pip install 'ansor-py[plot]')"
    systems = report["settings"]["systems"]
    names = list(report["workloads"])
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(names) + 3), 4.5))
    width = 0.8 / len(systems)
    for k, s in enumerate(systems):
        vals = []
        for n in names:
            secs = {x: e["seconds"] for x, e in report["workloads"][n]["systems"].items()
                    if "seconds" in e}
            vals.append(min(secs.values()) / secs[s] if s in secs else 0.0)
        xs = [i + (k - (len(systems) - 1) / 2) * width for i in range(len(names))]
        ax.bar(xs, vals, width, label=SYSTEM_LABELS[s])
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([report["workloads"][n]["label"] for n in names], rotation=30,
                       ha="right", fontsize=8)
    ax.set_ylabel("speed relative to the fastest system")
    st = report["settings"]
    ax.set_title(f"ansor-py vs peers: {report['cpu']}, {st['threads']} thread(s), "
                 f"{st['trials']} trials", fontsize=9)
    ax.axhline(1.0, color="grey", linewidth=0.5)
    ax.set_ylim(0, 1.25)
    ax.legend(fontsize=8, ncol=len(systems), loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_curve(data: dict, path: Path) -> Path | str:
    plt = _pyplot()
    if plt is None:
        return "matplotlib is not installed (pip install 'ansor-py[plot]')"
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for s, c in data["curves"].items():
        if not c.get("trials"):
            continue
        ys = [0.0] + [v or 0.0 for v in c["best_gflops"]]  # nothing found before the first trial
        kw = dict(label=SYSTEM_LABELS[s], drawstyle="steps-post")
        a1.plot([0] + c["trials"], ys, **kw)
        a2.plot([0.0] + c["seconds"], ys, **kw)
    a1.set_xlabel("trials")
    a2.set_xlabel("tuning wall-clock seconds")
    for a in (a1, a2):
        a.set_ylabel("best GFLOPS so far")
        a.grid(alpha=0.3)
        a.legend()
    fig.suptitle(f"{data['label']}: tuning curves ({data['cpu']}, {data['threads']} "
                 "thread(s))", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
