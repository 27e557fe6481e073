"""Codegen is safe for any name: hostile loop, buffer, kernel and axis names never reach the IR.

The DSL and the record readers reject names outside ``compute.names``' rule, but the backend
does not rely on that (loop IR can be built directly, and a name check can regress): every name
it writes into the IR text goes through ``sanitize`` and is bounded, and the kernel symbol never
takes the name of a symbol the module or the C runtime uses.
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import ansor
from compute import expr as E
from compute import loop_ir as L
from compute import names as N
from compute import te
from compute import tensor as T
from measure.codegen import kernel_symbol
from measure.kernel import build_func
from sketch.loop_state import State

HOSTILE = [
    "k\n  call void @abort()\n;",
    'a"b',
    "x@y",
    "x!y",
    "{b}",
    "a;b",
    "\u00fcn\u00efc\u00f6de",
    "\u202etxt",
    "$x",
    "%t1",
    "",
    "1abc",
    "\u00e9" * 300,
    "n" * 5000,
]


def _raw_fragments(name: str) -> list[str]:
    """Substrings of ``name`` that must not appear in the IR (the name minus safe characters
    would be too weak a check for short names; a fragment with a special character is not)."""
    specials = set("\n\"@!{};$\u202e") | {c for c in name if ord(c) > 127}
    return [name] if any(c in specials for c in name) else []


@pytest.mark.parametrize("name", HOSTILE, ids=lambda s: repr(s[:12]))
def test_hostile_names_in_every_loop_kind_stay_out_of_the_ir(name):
    n = 8
    A = L.Buffer(name, (n, n), "float32")
    Out = L.Buffer(name + "o", (n, n), "float32")
    Acc = L.Buffer(name + "acc", (n,), "float32")
    i, j, r, u, v = (E.var(name + s) for s in ("i", "j", "r", "u", "v"))
    body = L.seq(
        # parallel loop holding a vectorized loop whose body cannot be vectorised (nested loop):
        # the scalar fallback comment carries the loop's name.
        L.For(i, n, "parallel", L.Allocate(Acc, L.seq(
            L.For(v, n, "vectorized", L.seq(
                L.Store(Acc, (v,), E.const(0.0)),
                L.For(r, n, "serial", L.Store(Acc, (v,), Acc.load(v) + A.load(i, r) * 2.0)))),
            L.For(j, n, "unrolled", L.Store(Out, (i, j), Acc.load(j) + A.load(i, j)))))),
        L.For(u, n, "serial", L.Store(Out, (u, u), Out.load(u, u) + 1.0)),
    )
    k = build_func(L.PrimFunc(name, (A, Out), body))
    ir = k.llvm_ir
    assert "scalar fallback" in ir and "@ansor_parallel_for(" in ir
    for frag in _raw_fragments(name):
        assert frag not in ir
    assert "@abort" not in ir
    idents = re.findall(r"[%@][-A-Za-z$._0-9]+|^[-A-Za-z$._0-9]+:", ir, re.M)
    assert max(map(len, idents)) <= 100  # no unbounded identifiers
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    out = np.zeros((n, n), np.float32)
    k(a, out)
    expected = (a.sum(axis=1) * 2.0)[:, None] + a
    expected[np.arange(n), np.arange(n)] += 1.0
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, symbol", [
    ("free", "kernel_free"), ("erf", "kernel_erf"), ("memset", "kernel_memset"),
    ("llvm.foo", "kernel_llvm.foo"), ("__ansor_num_threads", "kernel___ansor_num_threads"),
    ("GOMP_parallel", "kernel_GOMP_parallel"), ("ansor_parallel_for", "kernel_ansor_parallel_for"),
    ("my-kernel 1", "my_kernel_1"),
    ("matmul", "matmul"), ("x" * 500, "x" * 64),
])
def test_kernel_symbol_avoids_runtime_symbols(name, symbol):
    assert kernel_symbol(name) == symbol


def test_kernel_named_like_a_libm_function_it_calls_builds():
    """erf in float64 calls libm's ``erf``: a kernel of that name used to clash with it."""
    n = 4
    X = L.Buffer("X", (n,), "float64")
    Y = L.Buffer("Y", (n,), "float64")
    i = E.var("i")
    k = build_func(L.PrimFunc("erf", (X, Y), L.For(i, n, "serial",
                                                    L.Store(Y, (i,), E.call("erf", X.load(i))))))
    assert k.name == "kernel_erf"
    x = np.linspace(-2, 2, n)
    y = np.zeros(n)
    k(x, y)
    import math
    np.testing.assert_allclose(y, [math.erf(t) for t in x], rtol=1e-12)


def test_full_pipeline_with_unchecked_names_is_safe(monkeypatch, tmp_path):
    """With the DSL's name check switched off, an IR payload as a reduce-axis name goes through
    split -> rfactor -> vectorize (the scalar fallback) and codegen still keeps it out."""
    from tests.ansor.test_hostile_records import ir_payload

    monkeypatch.setattr(T, "check_name", lambda name, what: name)
    marker = str(tmp_path / "pwned")
    payload = ir_payload(marker)
    a = te.placeholder((4, 16), "float32", payload + "A")
    kax = te.reduce_axis((0, 16), payload)
    c = te.compute((4,), lambda i: te.sum(a[i, kax], axis=kax), payload + "C")
    s = State.initial(ansor.ComputeDAG([a, c]))
    s = s.split(1, 1, [4]).rfactor(1, 2).vectorize(1, 0)
    kern = ansor.build(s)
    assert "scalar fallback" in kern.llvm_ir
    assert "@creat" not in kern.llvm_ir and payload not in kern.llvm_ir
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    out = np.zeros(4, np.float32)
    kern(x, out)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert not os.path.exists(marker)


@pytest.mark.parametrize("name", ["k\nx", 'a"b', "a b", "x@y", "{b}", "\u00e9", "", "1k",
                                  "k" * (N.MAX_NAME_LEN + 1)])
def test_dsl_rejects_names_outside_the_rule(name):
    with pytest.raises((ValueError, TypeError), match="name"):
        te.reduce_axis((0, 4), name)
    with pytest.raises((ValueError, TypeError), match="name"):
        te.placeholder((4,), "float32", name)
    a = te.placeholder((4,), "float32", "A")
    with pytest.raises((ValueError, TypeError), match="name"):
        te.compute((4,), lambda i: a[i], name)


def test_dsl_accepts_the_names_the_library_and_scheduler_use():
    for name in ("A", "conv2d_nhwc_pad", "C.rf", "k.0.1", "my-op", "_t", "x" * N.MAX_NAME_LEN):
        assert N.is_valid_name(name)
    a = te.placeholder((4,), "float32", "A.in-put")
    b = te.compute((4,), lambda α: a[α], "B")  # a non-ASCII parameter name is a label
    assert b.op.axes[0].name == "i0"


def test_compute_rejects_hostile_tags_and_attrs():
    a = te.placeholder((4,), "float32", "A")
    with pytest.raises(ValueError, match="tag"):
        te.compute((4,), lambda i: a[i], "B", tag="x\ny")
    with pytest.raises(ValueError, match="attrs"):
        te.compute((4,), lambda i: a[i], "B", attrs={"k": "line\nbreak"})
    with pytest.raises(ValueError, match="attrs key"):
        te.compute((4,), lambda i: a[i], "B", attrs={"bad key": 1})
    te.compute((4,), lambda i: a[i], "B", tag="elemwise", attrs={"axes": [1, 0], "f": True})
