"""Shared helpers for the backend tests: build small loop-IR kernels by hand and measure ulps."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from compute import expr as E
from compute import loop_ir as L
from measure.kernel import Kernel, build_func


def elementwise(fn: Callable[..., E.Expr], in_dtypes: Sequence[str], out_dtype: str, n: int,
                kind: str = "serial", name: str = "ew") -> Kernel:
    """``Out[i] = fn(In0[i], In1[i], ...)`` over one loop of ``kind``."""
    ins = [L.Buffer(f"In{k}", (n,), d) for k, d in enumerate(in_dtypes)]
    out = L.Buffer("Out", (n,), out_dtype)
    i = E.var("i")
    body = L.For(i, n, kind, L.Store(out, (i,), fn(*[b.load(i) for b in ins])))
    return build_func(L.PrimFunc(name, tuple(ins) + (out,), body))


def tiled_elementwise(fn: Callable[..., E.Expr], in_dtypes: Sequence[str], out_dtype: str,
                      outer: int, lanes: int, name: str = "tew") -> Kernel:
    """Same as ``elementwise`` over ``outer*lanes`` elements, inner loop vectorized."""
    n = outer * lanes
    ins = [L.Buffer(f"In{k}", (n,), d) for k, d in enumerate(in_dtypes)]
    out = L.Buffer("Out", (n,), out_dtype)
    o, v = E.var("o"), E.var("v")
    idx = o * lanes + v
    body = L.For(o, outer, "serial",
                 L.For(v, lanes, "vectorized", L.Store(out, (idx,), fn(*[b.load(idx) for b in ins]))))
    return build_func(L.PrimFunc(name, tuple(ins) + (out,), body))


def run(k: Kernel, *inputs: np.ndarray) -> np.ndarray:
    spec = k.args[-1]
    out = np.zeros(spec.shape, dtype=spec.dtype)
    k(*inputs, out)
    return out


def ulp_error(got: np.ndarray, ref: np.ndarray, dtype: type) -> np.ndarray:
    """|got - ref| in units of the last place of ``ref`` rounded to ``dtype`` (inf if the
    special-value classes differ: nan vs number, inf vs finite, sign of an infinity)."""
    with np.errstate(all="ignore"):  # signalling nans in the inputs come back unchanged
        ref = np.asarray(ref, np.float64)
        g = got.astype(np.float64)
        r = ref.astype(dtype)
        ulp = np.spacing(np.abs(r)).astype(np.float64)
        tiny = 2.0 ** -149 if dtype == np.float32 else 2.0 ** -1074
        ulp = np.maximum(ulp, tiny)
        err = np.abs(g - ref) / ulp
    same = (g == ref) | (np.isnan(g) & np.isnan(ref)) | (np.isinf(r) & (g == r))
    err = np.where(same, 0.0, err)
    return np.where(np.isnan(err), np.inf, err)


def two_pass(rows: int, cols: int, parallel: bool) -> L.PrimFunc:
    """Out[i, j] = 2 * A[rows-1-i, j] + 1 through a temporary T of rows x cols floats."""
    A = L.Buffer("A", (rows, cols), "float32")
    Out = L.Buffer("Out", (rows, cols), "float32")
    T = L.Buffer("T", (rows, cols), "float32")
    i, j, i2, j2 = E.var("i"), E.var("j"), E.var("i2"), E.var("j2")
    fill = L.For(i, rows, "serial", L.For(j, cols, "vectorized", L.Store(T, (i, j), A.load(i, j) * 2.0)))
    use = L.For(i2, rows, "serial", L.For(j2, cols, "vectorized",
                                         L.Store(Out, (i2, j2), T.load(rows - 1 - i2, j2) + 1.0)))
    body: L.Stmt = L.Allocate(T, L.seq(fill, use))
    if parallel:
        body = L.For(E.var("p"), 4, "parallel", body)
    return L.PrimFunc("two_pass", (A, Out), body)
