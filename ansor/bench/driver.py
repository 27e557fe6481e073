"""The suite's driver: tune every selected workload with each tuner (resuming logs), compute the
references, time every system over alternating rounds (each in a fresh process), summarise,
and write the reports; or, with ``--curve``, tune and write the tuning curves.
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from measure.target import host_cpu_name

from . import timing
from .inputs import INPUT_SEED, make_dag
from .peers_tvm import tvm_curve
from .report import plot_curve, plot_suite, render_markdown
from .sessions import add_session, ours_curve, tuning_summary
from .workloads import SYSTEM_LABELS, BenchWorkload

TIMING_TIMEOUT = 1800.0  # one timing worker (torch.compile's first compile is the slow part)
# A hung TVM tuning run must not hold the suite forever (MetaSchedule takes ~5 s a trial here).
TVM_TUNE_TIMEOUT_BASE, TVM_TUNE_TIMEOUT_PER_TRIAL = 900.0, 30.0


@dataclass
class Options:
    workloads: list[BenchWorkload]
    out: Path
    log_dir: Path
    trials: int = 200
    threads: int = 2
    rounds: int = 5
    tvm: bool = True
    torch_compile: bool = True
    seed: int | None = None
    per_round: int = 64
    timing: dict = field(default_factory=lambda: {
        "repeat": timing.DEFAULT_REPEAT, "min_repeat_ms": timing.DEFAULT_MIN_REPEAT_MS,
        "warmup_s": timing.DEFAULT_WARMUP_S})
    curve: bool = False
    quiet: bool = False


def say(opts: Options, text: str) -> None:
    if not opts.quiet:
        print(text, file=sys.stderr, flush=True)


def _suite_job(job: dict, threads: int, stream: bool = False, timeout: float | None = None,
               env: dict | None = None) -> dict:
    return timing.run_fresh(["-m", "ansor.bench.workers", json.dumps(job)], threads,
                            timeout=timeout, stream=stream, env=timing.worker_env(env))


def _tvm_job(job: dict, threads: int, stream: bool = False,
             timeout: float | None = None) -> dict:
    return timing.run_fresh(["-m", "ansor.bench.peers_tvm", json.dumps(job)], threads,
                            timeout=timeout, stream=stream, env=timing.worker_env())


def _ours_paths(opts: Options, wl: BenchWorkload) -> tuple[Path, Path]:
    d = opts.log_dir / "ours"
    return d / f"{wl.name}.json", d / f"{wl.name}.sessions.json"


def _tvm_dir(opts: Options, wl: BenchWorkload) -> Path:
    return opts.log_dir / "tvm" / wl.name


def probe_tvm(opts: Options) -> dict:
    """TVM's versions, or ``{"unavailable": why}``."""
    res = _tvm_job({"job": "probe"}, opts.threads, timeout=300)
    if "error" in res or "unavailable" in res:
        return {"unavailable": res.get("unavailable") or res["error"]}
    return res


def tune_all(opts: Options, tvm_info: dict) -> dict:
    """Tune every workload with each tuner (resuming logs). Returns per workload and tuner the
    tuning summary, or an ``unavailable``/``error`` note."""
    out: dict = {}
    for i, wl in enumerate(opts.workloads, 1):
        entry = out[wl.name] = {}
        log, sessions = _ours_paths(opts, wl)
        log.parent.mkdir(parents=True, exist_ok=True)
        say(opts, f"== [{i}/{len(opts.workloads)}] {wl.name}: tuning with ansor-py "
                  f"({opts.trials} trials, log {log})")
        res = _suite_job({"job": "tune", "system": "ours", "workload": wl.workload,
                          "args": list(wl.args), "log": str(log), "trials": opts.trials,
                          "per_round": opts.per_round, "seed": opts.seed}, opts.threads,
                         stream=not opts.quiet)
        if "error" in res:
            entry["ours"] = {"error": f"tuning failed: {res['error']}"}
        else:
            if res.get("trials"):
                add_session(sessions, {k: res[k] for k in ("start", "end", "trials",
                                                            "wall_seconds", "search_seconds",
                                                            "measure_seconds") if k in res})
            entry["ours"] = tuning_summary(sessions, res["existing"] + res.get("trials", 0))
            entry["ours"]["this_run_trials"] = res.get("trials", 0)
        if not opts.tvm:
            entry["tvm"] = {"unavailable": "disabled (--no-tvm)"}
            continue
        if "unavailable" in tvm_info:
            entry["tvm"] = {"unavailable": tvm_info["unavailable"]}
            continue
        work = _tvm_dir(opts, wl)
        say(opts, f"== [{i}/{len(opts.workloads)}] {wl.name}: tuning with TVM MetaSchedule "
                  f"({opts.trials} trials, work dir {work})")
        res = _tvm_job({"job": "tune", "workload": wl.workload, "args": list(wl.args),
                        "work_dir": str(work), "trials": opts.trials, "threads": opts.threads,
                        "mcpu": host_cpu_name(), "seed": opts.seed, "per_round": opts.per_round},
                       opts.threads, stream=not opts.quiet,
                       timeout=TVM_TUNE_TIMEOUT_BASE + TVM_TUNE_TIMEOUT_PER_TRIAL * opts.trials)
        if "error" in res or "unavailable" in res:
            entry["tvm"] = {"unavailable": "tuning failed: "
                            + str(res.get("unavailable") or res.get("error"))}
        else:
            if res.get("trials"):
                add_session(work / "sessions.json", {k: res[k] for k in (
                    "start", "end", "trials", "wall_seconds") if k in res})
            entry["tvm"] = tuning_summary(work / "sessions.json", res.get("trials_in_log"))
            entry["tvm"]["this_run_trials"] = res.get("trials", 0)
    return out


def _systems(opts: Options) -> list[str]:
    out = ["ours", "numpy", "torch"]
    if opts.torch_compile:
        out.append("torch_compile")
    if opts.tvm:
        out.append("tvm")
    return out


def time_all(opts: Options, tuning: dict, tvm_info: dict, refs: dict) -> dict:
    """The timing rounds: every (workload, system) once per round, each in a fresh process."""
    systems = _systems(opts)
    raw: dict = {wl.name: {s: [] for s in systems} for wl in opts.workloads}
    dead: dict = {}  # (workload, system) -> why it is not timed (any more)
    for wl in opts.workloads:
        if "error" in tuning[wl.name].get("ours", {}):
            dead[(wl.name, "ours")] = {"error": tuning[wl.name]["ours"]["error"]}
        if "tvm" in systems and "unavailable" in tuning[wl.name].get("tvm", {}):
            dead[(wl.name, "tvm")] = {"skipped": tuning[wl.name]["tvm"]["unavailable"]}
        if "error" in refs[wl.name]:
            for s in systems:
                dead[(wl.name, s)] = {"error": f"no reference: {refs[wl.name]['error']}"}
    compile_env = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    for r in range(opts.rounds):
        order = systems[r % len(systems):] + systems[:r % len(systems)]
        for wl in opts.workloads:
            for s in order:
                if (wl.name, s) in dead:
                    continue
                job = {"job": "time", "system": s, "workload": wl.workload, "args": list(wl.args),
                       "ref": refs[wl.name]["path"], "threads": opts.threads,
                       "timing": opts.timing}
                if s == "tvm":
                    job.update(work_dir=str(_tvm_dir(opts, wl)), mcpu=host_cpu_name())
                    res = _tvm_job(job, opts.threads, timeout=TIMING_TIMEOUT)
                else:
                    if s == "ours":
                        job["log"] = str(_ours_paths(opts, wl)[0])
                    res = _suite_job(job, opts.threads, timeout=TIMING_TIMEOUT,
                                     env=compile_env if s == "torch_compile" else None)
                res["round"] = r + 1
                raw[wl.name][s].append(res)
                if "seconds" not in res:
                    dead[(wl.name, s)] = res  # skipped or failed: not timed again
        say(opts, f"timing round {r + 1}/{opts.rounds} done")
    return {"raw": raw, "dead": dead}


def _status(results: list, dead: dict | None) -> str:
    if dead is not None and "seconds" not in dead:
        if "skipped" in dead:
            return f"unavailable: {dead['skipped']}"
        if "unavailable" in dead:
            return f"unavailable: {dead['unavailable']}"
        return f"error: {dead.get('error', '?')}"
    if not results:
        return "not run"
    return "ok"


def summarize(opts: Options, tuning: dict, timed: dict, refs: dict) -> dict:
    workloads = {}
    for wl in opts.workloads:
        flop = refs[wl.name].get("flop")
        systems = {}
        for s, results in timed["raw"][wl.name].items():
            status = _status(results, timed["dead"].get((wl.name, s)))
            entry: dict = {"status": status, "rounds": results}
            if status == "ok":
                sec = statistics.median(x["seconds"] for x in results)
                entry["seconds"] = sec
                entry["ms"] = sec * 1e3
                entry["gflops"] = flop / sec / 1e9 if flop else None
                entry["round_seconds"] = [x["seconds"] for x in results]
            systems[s] = entry
        ours = systems.get("ours", {}).get("seconds")
        peers = {s: e["seconds"] for s, e in systems.items() if s != "ours" and "seconds" in e}
        best_peer = min(peers, key=peers.get) if peers else None
        workloads[wl.name] = {
            "label": wl.label, "workload": wl.workload, "args": list(wl.args),
            "flop": flop, "unit": "ms" if wl.memory_bound else "GFLOPS",
            "systems": systems, "tuning": tuning.get(wl.name, {}),
            "best_peer": best_peer,
            "ours_over_best_peer": (peers[best_peer] / ours if ours and best_peer else None),
        }
    return workloads


def compute_references(opts: Options, tmp: Path) -> dict:
    refs = {}
    for wl in opts.workloads:
        path = tmp / f"{wl.name}.npy"
        res = _suite_job({"job": "ref", "workload": wl.workload, "args": list(wl.args),
                          "ref": str(path)}, opts.threads, timeout=TIMING_TIMEOUT)
        refs[wl.name] = dict(res, path=str(path))
    return refs


def run_suite(opts: Options) -> dict:
    opts.out.mkdir(parents=True, exist_ok=True)
    info = timing.machine_info()
    tvm_info = probe_tvm(opts) if opts.tvm else {"unavailable": "disabled (--no-tvm)"}
    info["versions"]["tvm"] = tvm_info.get("tvm")
    info["versions"]["tvm_ffi"] = tvm_info.get("tvm_ffi")
    info["versions"]["tvm_llvm"] = tvm_info.get("llvm")
    if "unavailable" in tvm_info and opts.tvm:
        say(opts, f"TVM: unavailable: {tvm_info['unavailable']}")
    t0 = time.time()
    tuning = tune_all(opts, tvm_info)
    tuning_s = time.time() - t0
    with tempfile.TemporaryDirectory(prefix="ansor-bench-ref-") as tmp:
        refs = compute_references(opts, Path(tmp))
        timed = time_all(opts, tuning, tvm_info, refs)
    report = {
        "suite": "ansor-py benchmark suite (issue 8)",
        **info,
        "settings": {"trials": opts.trials, "threads": opts.threads, "rounds": opts.rounds,
                     "timing": opts.timing, "seed": opts.seed, "per_round": opts.per_round,
                     "systems": _systems(opts), "dtype": "float32", "batch": 1,
                     "log_dir": str(opts.log_dir), "input_seed": INPUT_SEED},
        "tvm": tvm_info,
        "tuning_wall_seconds_this_run": tuning_s,
        "workloads": summarize(opts, tuning, timed, refs),
    }
    (opts.out / "suite.json").write_text(json.dumps(report, indent=1))
    md = render_markdown(report)
    (opts.out / "suite.md").write_text(md)
    png = plot_suite(report, opts.out / "suite.png")
    print(md)
    print(f"JSON: {opts.out / 'suite.json'}\nMarkdown: {opts.out / 'suite.md'}")
    print(f"PNG: {png}" if isinstance(png, Path) else f"PNG: not written ({png})")
    return report


def run_curve(opts: Options) -> dict:
    """Tune (resuming the logs) and plot best GFLOPS against trials and seconds, us and TVM."""
    opts.out.mkdir(parents=True, exist_ok=True)
    info = timing.machine_info()
    tvm_info = probe_tvm(opts) if opts.tvm else {"unavailable": "disabled (--no-tvm)"}
    tuning = tune_all(opts, tvm_info)
    out = {}
    for wl in opts.workloads:
        flop = float(make_dag(wl.workload, wl.args).flop_count)
        curves: dict = {"ours": ours_curve(*_ours_paths(opts, wl), wl)}
        if "unavailable" in tuning[wl.name].get("tvm", {"unavailable": "-"}):
            curves["tvm"] = {"unavailable": tuning[wl.name].get("tvm", {}).get("unavailable")}
        else:
            curves["tvm"] = tvm_curve(_tvm_dir(opts, wl), flop)
        data = {"workload": wl.name, "label": wl.label, "registered": wl.workload,
                "args": list(wl.args), "flop": flop, "trials": opts.trials,
                "threads": opts.threads, **info, "tvm_versions": tvm_info,
                "tuning": tuning[wl.name], "curves": curves}
        jpath = opts.out / f"curve_{wl.name}.json"
        jpath.write_text(json.dumps(data, indent=1))
        png = plot_curve(data, opts.out / f"curve_{wl.name}.png")
        print(f"{wl.name}: " + "; ".join(
            f"{SYSTEM_LABELS[s]} best {_last(c.get('best_gflops')):.1f} GFLOPS after "
            f"{len(c['trials'])} trials, {c['seconds'][-1]:.0f} s" if c.get("trials")
            else f"{SYSTEM_LABELS[s]}: {c.get('unavailable', 'no trials')}"
            for s, c in curves.items()))
        print(f"JSON: {jpath}\n" + (f"PNG: {png}" if isinstance(png, Path)
                                     else f"PNG: not written ({png})"))
        out[wl.name] = data
    return out


def _last(vals: Sequence[float | None] | None) -> float:
    for v in reversed(vals or []):
        if v is not None:
            return v
    return float("nan")
