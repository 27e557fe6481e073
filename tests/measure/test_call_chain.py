"""The call chain (``measure.call_chain``): one native call making a fixed sequence of kernel
calls, in order, each on its own pointers; how a compiled network runs."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from compute import expr as E
from compute import loop_ir as L
from measure.call_chain import chain_for, chain_ir
from measure.kernel import build_func


def _kernel(op: str):
    """y = x + 1 (op "inc") or y = 2 * x (op "dbl") over 5 floats, one kernel each."""
    X = L.Buffer("X", (5,), "float32")
    Y = L.Buffer("Y", (5,), "float32")
    i = E.var("i")
    value = X.load(i) + 1.0 if op == "inc" else X.load(i) * 2.0
    return build_func(L.PrimFunc(op, (X, Y), L.For(i, 5, "serial", L.Store(Y, (i,), value))))


def test_the_ir_loads_each_steps_function_then_its_pointers():
    ir = chain_ir([2, 0, 1])
    assert ir.count("call void %f") == 3
    assert "call void %f1()" in ir
    assert "getelementptr inbounds ptr, ptr %t, i64 4" in ir  # f0 a0 a1 | f1 | f2 a0: f2 at 4
    assert chain_for([2, 0, 1]) is chain_for((2, 0, 1))  # one compile per arity list


def test_steps_run_in_order_on_their_own_buffers():
    inc, dbl = _kernel("inc"), _kernel("dbl")
    a = np.arange(5, dtype=np.float32)
    b = np.zeros(5, np.float32)
    c = np.zeros(5, np.float32)
    d = np.zeros(5, np.float32)
    calls = [(inc.address, inc.arg_pointers(a, b)), (dbl.address, dbl.arg_pointers(b, c)),
             (inc.address, inc.arg_pointers(c, d))]
    table = chain_for([2, 2, 2]).table(calls)
    table.run()
    np.testing.assert_array_equal(d, (a + 1) * 2 + 1)


def test_a_table_must_match_its_chain_and_have_no_null():
    inc = _kernel("inc")
    a, b = np.zeros(5, np.float32), np.zeros(5, np.float32)
    with pytest.raises(ValueError, match="arities"):
        chain_for([3]).table([(inc.address, inc.arg_pointers(a, b))])
    with pytest.raises(ValueError, match="null"):
        chain_for([2]).table([(0, inc.arg_pointers(a, b))])


def test_one_chain_runs_many_tables_from_many_threads():
    inc = _kernel("inc")
    chain = chain_for([2] * 3)
    errors = []

    def work(k: int) -> None:
        bufs = [np.full(5, k, np.float32)] + [np.zeros(5, np.float32) for _ in range(3)]
        table = chain.table([(inc.address, inc.arg_pointers(bufs[i], bufs[i + 1])) for i in range(3)])
        for _ in range(200):
            table.run()
            if not np.array_equal(bufs[3], np.full(5, k + 3, np.float32)):
                errors.append(k)
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_profile_times_each_call_in_the_sequence():
    inc = _kernel("inc")
    a, b, c = (np.zeros(5, np.float32) for _ in range(3))
    table = chain_for([2, 2]).table([(inc.address, inc.arg_pointers(a, b)),
                                     (inc.address, inc.arg_pointers(b, c))])
    seconds = table.profile(passes=7)
    assert seconds.shape == (7, 2)
    assert (seconds >= 0).all() and (seconds < 1.0).all()
    np.testing.assert_array_equal(c, a + 2)  # the profiled variant makes the same calls
    assert "clock_gettime" in chain_ir([2, 2], profiled=True)
    assert "clock_gettime(i32" not in chain_ir([2, 2]).split("define")[1]  # unprofiled: no clock
