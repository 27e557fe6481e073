"""The search is deterministic: a fixed-seed tuning proposes the same candidates in the same order.

A fixed-seed tuning of GEMM 512x512x512 (64 trials, 4 rounds of 16, the random cost model, the
default search parameters, no untuned schedule first: ``measure_untuned_first=False``) runs with
measurement replaced by a deterministic fake: nothing is compiled, each candidate's "cost" is a
hash of its step list mapped into [1e-4, 2e-3] s. The measured costs still steer the search (the
best measured states seed the next rounds), so the fake must be deterministic too. The sequence
of proposed step lists must equal the golden file ``data/candidate_order_gemm512.json``.

A refactoring must leave this test passing unchanged. When a change is MEANT to alter the search
(new sketch rules, other mutation odds, another random draw order), regenerate the golden file
and commit it with that change, saying why the candidates changed:

    ANSOR_REGEN_GOLDEN=1 python -m pytest tests/ansor/test_candidate_order.py -q
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

import ansor
from cost_model.cost_model import RandomModel
from measure.builder import LocalBuilder
from measure.measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult
from measure.runner import LocalRunner
from measure.target import host_hardware_params
from measure.record import encode_record

GOLDEN = Path(__file__).parent / "data" / "candidate_order_gemm512.json"
SEED = 0
TRIALS = 64
PER_ROUND = 16
# The fake costs lie in [COST_LO, COST_LO + COST_SPAN] seconds.
COST_LO, COST_SPAN = 1e-4, 1.9e-3


def steps_json(inp: MeasureInput) -> list:
    """The candidate's step list as a record stores it (the form that outlives refactorings)."""
    line = encode_record(inp, MeasureResult((1.0,), int(MeasureErrorNo.NO_ERROR)))
    return json.loads(line)["input"]["steps"]


def fake_cost(inp: MeasureInput) -> float:
    """A cost fixed by the step list alone (no clock, no machine)."""
    text = json.dumps(steps_json(inp), sort_keys=True, separators=(",", ":"))
    h = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return COST_LO + COST_SPAN * (h / 2.0 ** 64)


class FakeBuilder(LocalBuilder):
    """Builds nothing: every candidate "builds" instantly (no worker pool is started)."""

    def build(self, inputs: Sequence[MeasureInput], verbose: int = 0) -> list[BuildResult]:
        return [BuildResult(None, int(MeasureErrorNo.NO_ERROR), "", 0.0) for _ in inputs]


class FakeRunner(LocalRunner):
    """Runs nothing: records the order it is asked to measure candidates in and returns
    ``fake_cost`` for each."""

    def __init__(self) -> None:
        super().__init__()
        self.measured: list[list] = []

    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult],
            verbose: int = 0) -> list[MeasureResult]:
        out = []
        for inp in inputs:
            self.measured.append(steps_json(inp))
            out.append(MeasureResult((fake_cost(inp),), int(MeasureErrorNo.NO_ERROR), "",
                                     all_cost=0.0, timestamp=0.0))
        return out


def test_fixed_seed_candidate_order() -> None:
    # Every machine fact the search reads is pinned (cores, vector width, registers), so the
    # golden holds on any host; the target string stays this host's (the fakes run here).
    hw = dataclasses.replace(host_hardware_params(), num_cores=2, vector_bits=512, num_vector_registers=32)
    task = ansor.SearchTask(func="matmul", args=(512, 512, 512), hardware_params=hw)
    runner = FakeRunner()
    # The search's own candidates only: the rule-based untuned schedule a tuning measures first
    # (``measure_untuned_first``, tested in test_untuned_first.py) is not the search's.
    result = task.tune(ansor.TuningOptions(num_measure_trials=TRIALS,
                                           num_measures_per_round=PER_ROUND, seed=SEED, verbose=0,
                                           builder=FakeBuilder(), runner=runner,
                                           measure_untuned_first=False),
                       cost_model=RandomModel(seed=SEED))
    # The default schedule is timed first (for the speed-up figure; once or twice), then the
    # trials.
    assert result.trials == TRIALS and result.errors == 0
    default = steps_json(MeasureInput(task, task.compute_dag.init_state()))
    assert len(runner.measured) > TRIALS
    assert all(s == default for s in runner.measured[:-TRIALS])
    candidates = runner.measured[-TRIALS:]
    if os.environ.get("ANSOR_REGEN_GOLDEN"):
        GOLDEN.write_text(json.dumps(candidates, separators=(",", ":")) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert len(golden) == TRIALS
    for i, (got, want) in enumerate(zip(candidates, golden)):
        assert got == want, f"candidate {i} differs from the golden file {GOLDEN.name}"
