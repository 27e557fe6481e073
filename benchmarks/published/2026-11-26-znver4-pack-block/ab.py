"""The blocked copy of a transposing pack against the lane-by-lane copy, on the same programs.

For each dense layer: random packed programs whose pack transposes (sampled with
``block_transposing_packs=False``: the lanes loop vectorized), and each one's twin with the copy
blocked by ``sketch.pack_block`` (the pack's vectorize annotation dropped, the block steps added;
nothing else differs). With ``--log``, the log's best programs are used instead of samples. Both
twins are built, checked against each other, and timed alternately in this process, 3 rounds of
the median of 7 repeats (>= 50 ms each); the figure is the lane-by-lane time over the blocked time.

    python ab.py                                   # the default dense layers, 8 programs each
    python ab.py --log LOG.json --workload dense_bias_relu:128,1024,1024 --top 3
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np  # noqa: E402

import ansor  # noqa: E402
from ansor.records import load_records  # noqa: E402
from measure.target import host_hardware_params  # noqa: E402
from sketch.init_population import sample_initial_population  # noqa: E402
from sketch.pack_block import block_transposing_packs, transposes  # noqa: E402
from sketch.replay import replay  # noqa: E402
from sketch.search_params import SearchParams  # noqa: E402
from sketch.sketch_rules import generate_sketches  # noqa: E402
from sketch.transform_steps import AnnotationStep, PackStep  # noqa: E402

DEFAULT = ["dense_bias_relu:128,1024,1024", "dense:128,3072,768", "dense:128,768,3072",
           "dense:77,512,512"]


def pack_id(state) -> int | None:
    for i, st in enumerate(state.stages):
        if transposes(st.op) and st.op.axes[-1].extent > 1:
            return i
    return None


def twin(task, state, params):
    """``state`` with its pack's annotations dropped and the copy blocked."""
    pid = pack_id(state)
    steps = [s for s in state.steps if not (isinstance(s, AnnotationStep) and s.stage_id == pid)]
    base = replay(task.compute_dag, steps)
    return block_transposing_packs(base, None, params)


def seconds(kernel, args) -> float:
    return kernel.benchmark(*args, repeat=7)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", action="append")
    ap.add_argument("--log")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--programs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    hw = host_hardware_params()
    params = SearchParams().with_hardware(hw)
    print(f"# CPU {hw}")
    for w in a.workload or DEFAULT:
        name, args = w.split(":")
        task = ansor.SearchTask(func=name, args=tuple(int(x) for x in args.split(",")))
        if a.log:
            rows = sorted(((min(r.costs), i.state) for i, r in load_records(a.log) if r.error_no == 0),
                          key=lambda x: x[0])
            states = [replay(task.compute_dag, s.steps) for _, s in rows[:a.top]]
        else:
            sk = [x for x in generate_sketches(task.compute_dag, hardware_params=hw)
                  if any(isinstance(st, PackStep) for st in x.steps)]
            off = SearchParams(block_transposing_packs=False).with_hardware(hw)
            pop = sample_initial_population(sk, 4 * a.programs, random.Random(0), off)
            states = [s for s in pop if pack_id(s) is not None][:a.programs]
        ratios = []
        for k, st in enumerate(states):
            if pack_id(st) is None:
                continue
            ka, kb = ansor.build(st), ansor.build(twin(task, st, params))
            ins = ka.random_args()
            outs_a, outs_b = [np.array(x) for x in ins], [np.array(x) for x in ins]
            ka(*outs_a)
            kb(*outs_b)
            np.testing.assert_allclose(outs_a[-1], outs_b[-1], rtol=1e-4, atol=1e-4)
            ta, tb = [], []
            for _ in range(a.rounds):
                ta.append(seconds(ka, ins))
                tb.append(seconds(kb, ins))
            ma, mb = statistics.median(ta), statistics.median(tb)
            v = st.stages[pack_id(st)].op.axes[-1].extent
            ratios.append(ma / mb)
            print(f"{w} program {k} ({v} lanes): lane by lane {ma * 1e3:.3f} ms, blocked {mb * 1e3:.3f} ms, "
                  f"{ma / mb:.2f}x", flush=True)
        if ratios:
            print(f"== {w}: {len(ratios)} programs, blocked speed-up median {statistics.median(ratios):.2f}x "
                  f"(min {min(ratios):.2f}, max {max(ratios):.2f})", flush=True)


if __name__ == "__main__":
    main()
