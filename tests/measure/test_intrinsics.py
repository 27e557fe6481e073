"""Accuracy of the generated math functions against float64 references, scalar and vectorized:
at most 4 ulp (float32 and float64) over dense sweeps of the whole float range plus the edge
cases (zeros, subnormals, huge, inf, nan, exp overflow/underflow thresholds, log domain)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from compute import expr as E

from .helpers import run, tiled_elementwise, ulp_error

MAX_ULP = 4.0
LANES = 16

EDGE32 = np.array([
    0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1.1754942e-38, 1.17549435e-38, -1.17549435e-38,
    3.4028235e38, -3.4028235e38, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 0.99999994,
    1.0000001, 88.72283, 88.722839, 88.7228394, 89.0, -87.33654, -87.336548, -103.972076,
    -103.972084, -104.0, -110.0, 0.5625, 0.56249994, 1.0, 0.99999994, 3.92, 3.9199998, 9.01, 44.0,
    -9.01, 1e-8, -1e-8, 0.35, -0.35, 0.7071067, 0.70710677, 1.4142135, 1.4142137, 16.635532,
], np.float32)


def _sweep32() -> np.ndarray:
    # Every 4093rd bit pattern (~1M values covering every binade and sign), a dense linear sweep
    # where the functions do their interesting work, and the edge cases.
    bits = np.arange(0, 2 ** 32, 4093, dtype=np.uint64).astype(np.uint32)
    dense = np.linspace(-12, 12, 400_001, dtype=np.float32)
    x = np.concatenate([bits.view(np.float32), dense, EDGE32])
    pad = (-len(x)) % LANES
    return np.concatenate([x, np.ones(pad, np.float32)]).astype(np.float32)


X32 = _sweep32()


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


REFS = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": _sigmoid, "erf": _erf}


def _kernel(fn: str, dtype: str, vectorized: bool, n: int):
    lanes = LANES if vectorized else 1
    return tiled_elementwise(lambda x: E.call(fn, x), [dtype], dtype, n // lanes, lanes,
                             name=f"{fn}_{'v' if vectorized else 's'}")


@pytest.mark.parametrize("vectorized", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("fn", list(REFS))
def test_float32_accuracy(fn, vectorized):
    k = _kernel(fn, "float32", vectorized, len(X32))
    got = run(k, X32)
    with np.errstate(all="ignore"):
        ref = REFS[fn](X32.astype(np.float64))
    err = ulp_error(got, ref, np.float32)
    worst = int(np.argmax(err))
    assert err.max() <= MAX_ULP, f"{fn}: {err.max()} ulp at x={X32[worst]!r}: got {got[worst]!r}, want {ref[worst]!r}"
    print(f"{fn} float32 {'vector' if vectorized else 'scalar'}: max {err.max():.3f} ulp")


def test_float32_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -1e-45, 1e-45, 100.0, -100.0, -200.0,
                  200.0, 1.0], np.float32)
    x = np.concatenate([x, np.zeros(LANES - len(x), np.float32)])
    nan = np.nan
    exact = {  # the special outputs, exactly (None: a finite value checked by ulps only)
        "exp": [1, 1, np.inf, 0, nan, None, 1, 1, np.inf, None, 0, np.inf, None],
        "log": [-np.inf, -np.inf, np.inf, nan, nan, nan, nan, None, None, nan, nan, None, 0],
        "tanh": [0, -0.0, 1, -1, nan, None, -1e-45, 1e-45, 1, -1, -1, 1, None],
        "sigmoid": [0.5, 0.5, 1, 0, nan, None, 0.5, 0.5, 1, None, 0, 1, None],
        "erf": [0, -0.0, 1, -1, nan, None, None, None, 1, -1, -1, 1, None],
    }
    for fn, want in exact.items():
        with np.errstate(all="ignore"):
            ref = REFS[fn](x.astype(np.float64))
        for vec in (False, True):
            got = run(_kernel(fn, "float32", vec, LANES), x)
            assert ulp_error(got, ref, np.float32).max() <= MAX_ULP, (fn, vec, got, ref)
            for g, w in zip(got, want):
                if w is None:
                    continue
                w32 = np.float32(w)
                assert (np.isnan(g) and np.isnan(w32)) or (g == w32 and np.signbit(g) == np.signbit(w32)), \
                    (fn, vec, got, want)


def _pow_inputs() -> tuple[np.ndarray, np.ndarray, int]:
    specials = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, np.nan,
                         1e-45, -1e-45, 1e30, -1e30, 2.5, -2.5, 16777216.0, -8.0, 0.25, 7.0, -7.0],
                        np.float32)
    X, Y = np.meshgrid(specials, specials)
    rng = np.random.default_rng(5)
    m = 300_000
    xr = (rng.standard_normal(m) * np.exp(rng.uniform(-20, 20, m))).astype(np.float32)
    yr = (rng.standard_normal(m) * rng.choice([0.5, 3, 30, 300], m)).astype(np.float32)
    yr[::3] = np.round(yr[::3])
    x = np.concatenate([X.ravel(), xr])
    y = np.concatenate([Y.ravel(), yr])
    pad = (-len(x)) % LANES
    x = np.concatenate([x, np.ones(pad, np.float32)]).astype(np.float32)
    y = np.concatenate([y, np.ones(pad, np.float32)]).astype(np.float32)
    return x, y, X.size


@pytest.mark.parametrize("vectorized", [False, True], ids=["scalar", "vector"])
def test_float32_pow(vectorized):
    x, y, n_special = _pow_inputs()
    lanes = LANES if vectorized else 1
    k = tiled_elementwise(lambda a, b: E.call("pow", a, b), ["float32"] * 2, "float32",
                          len(x) // lanes, lanes, name="powf")
    got = run(k, x, y)
    with np.errstate(all="ignore"):
        ref64 = np.power(x.astype(np.float64), y.astype(np.float64))
        ref32 = np.power(x, y)
    err = ulp_error(got, ref64, np.float32)
    worst = int(np.argmax(err))
    assert err.max() <= MAX_ULP, (x[worst], y[worst], got[worst], ref64[worst])
    # special cases exactly as numpy's float32 power (C powf): same class, same sign
    g, r = got[:n_special], ref32[:n_special]
    assert np.array_equal(np.isnan(g), np.isnan(r))
    fin = ~np.isnan(r)
    assert np.array_equal(np.isinf(g[fin]), np.isinf(r[fin]))
    assert np.array_equal(g[fin] == 0, r[fin] == 0)
    assert np.array_equal(np.signbit(g[fin]), np.signbit(r[fin]))
    print(f"pow float32 {'vector' if vectorized else 'scalar'}: max {err.max():.3f} ulp")


def _sweep64() -> np.ndarray:
    bits = np.arange(0, 2 ** 64 - 2 ** 52, 2 ** 64 // 600_011, dtype=np.uint64)
    dense = np.linspace(-30, 30, 100_001)
    edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 709.78, 709.79, -745.1, -745.2, -708.4,
                     5e-324, -5e-324, 2.2250738585072014e-308, 1.0, -1.0, 1.7976931348623157e308])
    x = np.concatenate([bits.view(np.float64), dense, edge])
    pad = (-len(x)) % 8
    return np.concatenate([x, np.ones(pad)])


@pytest.mark.parametrize("vectorized", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("fn", list(REFS))
def test_float64_accuracy(fn, vectorized):
    x = _sweep64()
    lanes = 8 if vectorized else 1
    k = tiled_elementwise(lambda v: E.call(fn, v), ["float64"], "float64", len(x) // lanes, lanes,
                          name=f"{fn}64")
    got = run(k, x)
    with np.errstate(all="ignore"):
        ref = REFS[fn](x)
    err = ulp_error(got, ref, np.float64)
    worst = int(np.argmax(err))
    assert err.max() <= MAX_ULP, (fn, x[worst], got[worst], ref[worst])
    print(f"{fn} float64 {'vector' if vectorized else 'scalar'}: max {err.max():.3f} ulp")
