"""Why is a tuned kernel slow? Print the best schedule of a log and what its machine code does.

For each workload of a tuning log: the best record's loop structure (the ``State``), its
recorded time, and a summary of the generated x86 assembly - vector widths of the arithmetic
(zmm = 16 float32 lanes, ymm = 8, xmm = 4 or scalar ``ss``), FMA and multiply counts, broadcasts,
gathers, shuffles, spills to the stack and calls (libm, the thread pool). This is the first look when the
benchmark suite shows us behind a peer.

    python benchmarks/inspect_best.py LOG                     # every workload in the log
    python benchmarks/inspect_best.py LOG --asm               # and the hottest loop's assembly
    python benchmarks/inspect_best.py benchmarks/results/suite/logs/ours/dense_bias_relu.json
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Instruction classes counted in the summary: (label, regex on one instruction line).
CLASSES = [
    ("fma zmm", r"\bvfn?m(add|sub)\w*ps\s.*zmm"),
    ("fma ymm", r"\bvfn?m(add|sub)\w*ps\s.*ymm"),
    ("fma xmm", r"\bvfn?m(add|sub)\w*ps\s.*xmm"),
    ("fma scalar", r"\bvfn?m(add|sub)\w*ss\s"),
    ("mul/add zmm", r"\bv(mul|add|sub|max|min)ps\s.*zmm"),
    ("mul/add ymm/xmm", r"\bv(mul|add|sub|max|min)ps\s.*[xy]mm"),
    ("mul/add scalar", r"\bv(mul|add|sub|max|min)ss\s"),
    ("broadcast", r"\bvbroadcast|\bvpbroadcast"),
    ("gather", r"\bvgather|\bvpgather"),
    ("shuffle/permute", r"\bv(shuf|perm|unpck|insert|extract|blend|align)"),
    ("vector load/store", r"\bvmov(ups|aps|dqu|dqa)\w*\s"),
    ("scalar load/store", r"\bvmovss\s"),
    ("stack spill/reload", r"\(%rsp\)|\(%rbp\)"),
    ("call", r"\bcall"),
]


def summarize_asm(asm: str) -> Counter:
    counts: Counter = Counter()
    for line in asm.splitlines():
        text = line.strip()
        if not text or text.startswith((".", "#")) or text.endswith(":"):
            continue
        counts["instructions"] += 1
        for label, pat in CLASSES:
            if re.search(pat, text):
                counts[label] += 1
    return counts


def hottest_block(asm: str, limit: int = 60) -> str:
    """The loop body (instructions up to a backward jump) with the most FMAs, the shortest on
    ties: in a tuned compute-bound kernel that is the micro-kernel, where the time goes."""
    lines = asm.splitlines()
    labels = {ln.strip()[:-1]: i for i, ln in enumerate(lines) if ln.strip().endswith(":")}
    loops = []
    for i, ln in enumerate(lines):
        m = re.match(r"\s*j\w+\s+(\.\w+)", ln)
        if m and labels.get(m.group(1), i) < i:
            start = labels[m.group(1)]
            fmas = sum(1 for x in lines[start:i] if re.search(r"vfn?m(add|sub)", x))
            loops.append((-fmas, i - start, start, i))
    if not loops:
        return "(no loop found)"
    _, _, start, end = min(loops)
    body = lines[start:end + 1]
    more = [f"    ... ({len(body) - limit} more lines)"] if len(body) > limit else []
    return "\n".join(body[:limit] + more)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--asm", action="store_true", help="print the hottest loop's assembly")
    ap.add_argument("--ir", action="store_true", help="print the loop IR of the best schedule")
    ns = ap.parse_args(argv)
    if not Path(ns.log).is_file():
        ap.error(f"no such log file: {ns.log}")

    import ansor
    from ansor.records import best_record, summarize
    from measure.target import toolchain_key

    rows = summarize(ns.log)
    if not rows:
        print(f"{ns.log}: no records")
    for row in rows:
        best = best_record(ns.log, row.workload_key, target_key=toolchain_key())
        if best is None:
            print(f"=== {row.desc}: no valid record measured with this toolchain")
            continue
        inp, res = best
        flop = float(inp.task.flop_count)
        print(f"=== {row.desc}: best of the log {res.mean_cost * 1e3:.3f} ms "
              f"({flop / res.mean_cost / 1e9:.1f} GFLOPS recorded), {row.n_records} records")
        print(inp.state)
        if ns.ir:
            print(inp.task.compute_dag.lower(inp.state))
        asm = ansor.build(inp.state).assembly
        counts = summarize_asm(asm)
        print("assembly: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        if ns.asm:
            print(hottest_block(asm))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
