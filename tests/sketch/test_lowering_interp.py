"""Lowering alone, without LLVM: random schedules run by the loop-IR interpreter match the reference.

When a compiled schedule disagrees with the reference, this test tells whether lowering or codegen
is at fault.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import ansor
from compute import reference
from compute.tensor import ComputeOp
from sketch.loop_state import InvalidStepError
from sketch.lower import lower
from tests.loop_ir_interp import run
from tests.workloads import CASES

from .random_schedules import random_state

SMALL = [c for c in CASES if sum(int(np.prod(t.shape)) for t in c.make()) <= 1200]
MAX_DYNAMIC_STORES = 60_000  # the interpreter runs ~100k stores/s; larger schedules go to LLVM tests


def _dynamic_stores(s) -> int:
    from compute import loop_ir as L

    if isinstance(s, L.For):
        return s.extent * _dynamic_stores(s.body)
    if isinstance(s, L.Seq):
        return sum(_dynamic_stores(x) for x in s.stmts)
    if isinstance(s, L.IfThenElse):
        return _dynamic_stores(s.then_case)
    if isinstance(s, L.Allocate):
        return _dynamic_stores(s.body)
    return 1


@pytest.mark.parametrize("case", SMALL, ids=[c.id for c in SMALL])
def test_lowered_random_schedules_interpret_to_reference(case):
    dag = ansor.ComputeDAG(case.make())
    inputs = case.make_inputs(0)
    expected = reference.evaluate(dag, inputs)
    for seed in range(2):
        state = random_state(dag.init_state(), random.Random(1000 + seed), 12)
        try:
            func = lower(state)
        except InvalidStepError:
            continue
        if _dynamic_stores(func.body) > MAX_DYNAMIC_STORES:
            continue
        it = iter(inputs)
        args, outs = [], []
        for t in dag.tensors:
            if isinstance(t.op, ComputeOp):
                outs.append(np.full(t.shape, np.nan if np.dtype(t.dtype).kind == "f" else 77, t.dtype))
                args.append(outs[-1])
            else:
                args.append(next(it))
        run(func, args)
        for e, g in zip(expected, outs):
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol,
                                       err_msg=f"{case.id} steps={[s.to_json() for s in state.steps]}")
