"""Kernel loading and calling: argument checks, pickling to a worker process, introspection,
benchmark plumbing, and the host target description."""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import pickle

import numpy as np
import pytest

from compute import expr as E
from compute import loop_ir as L
from measure import target
from measure.kernel import CompiledObject, build_func, compile_object, load


def _axpy() -> L.PrimFunc:
    X = L.Buffer("X", (4, 8), "float32")
    Y = L.Buffer("Y", (4, 8), "float32")
    Z = L.Buffer("Z", (4, 8), "float32")
    i, j = E.var("i"), E.var("j")
    body = L.For(i, 4, "serial", L.For(j, 8, "vectorized",
                                       L.Store(Z, (i, j), X.load(i, j) * 2.0 + Y.load(i, j))))
    return L.PrimFunc("axpy", (X, Y, Z), body)


@pytest.fixture(scope="module")
def axpy():
    return build_func(_axpy())


def _args():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    return x, np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32)


def test_call_and_written_args(axpy):
    x, y, z = _args()
    axpy(x, y, z)
    np.testing.assert_array_equal(z, x * 2 + y)
    assert [a.written for a in axpy.args] == [False, False, True]


def test_argument_count(axpy):
    x, y, _ = _args()
    with pytest.raises(TypeError, match=r"takes 3 arrays \(X, Y, Z\), got 2"):
        axpy(x, y)


def test_argument_type(axpy):
    x, y, z = _args()
    with pytest.raises(TypeError, match=r"argument 1 \(Y\) must be a numpy.ndarray, got list"):
        axpy(x, y.tolist(), z)


def test_argument_dtype(axpy):
    x, y, z = _args()
    with pytest.raises(ValueError, match=r"argument 0 \(X\) must have dtype float32, got float64"):
        axpy(x.astype(np.float64), y, z)


def test_argument_shape(axpy):
    x, y, z = _args()
    with pytest.raises(ValueError, match=r"argument 2 \(Z\) must have shape \(4, 8\), got \(8, 4\)"):
        axpy(x, y, z.reshape(8, 4))


def test_argument_non_contiguous(axpy):
    x, y, z = _args()
    big = np.zeros((4, 16), np.float32)
    with pytest.raises(ValueError, match=r"argument 1 \(Y\) must be C-contiguous"):
        axpy(x, big[:, ::2], z)
    with pytest.raises(ValueError, match=r"argument 0 \(X\) must be C-contiguous"):
        axpy(np.ones((8, 4), np.float32).T, y, z)


def test_argument_read_only_output(axpy):
    x, y, z = _args()
    z.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 2 \(Z\) is written by the kernel but the array is read-only"):
        axpy(x, y, z)
    x.flags.writeable = False  # read-only inputs are fine
    z2 = np.zeros_like(y)
    axpy(x, y, z2)


def test_argument_overlap(axpy):
    x, y, _ = _args()
    with pytest.raises(ValueError, match=r"argument 2 \(Z\) is written by the kernel and overlaps argument 0 \(X\)"):
        axpy(x, y, x)
    buf = np.zeros(64, np.float32)
    a, b = buf[:32].reshape(4, 8), buf[16:48].reshape(4, 8)
    with pytest.raises(ValueError, match="overlaps argument 1"):
        axpy(x, a, b)


def test_introspection(axpy):
    assert axpy.llvm_ir.startswith("; ModuleID")
    assert "define void @axpy(" in axpy.optimized_ir
    assert "axpy:" in axpy.assembly
    assert axpy.compiled.compile_seconds > 0
    assert set(axpy.compiled.timings) == {"codegen", "parse", "optimize", "emit"}


def test_benchmark(axpy):
    t = axpy.benchmark(min_repeat_ms=5, repeat=3)
    assert 0 < t < 1e-3
    x, y, z = _args()
    t2 = axpy.benchmark(x, y, z, number=10, repeat=2)
    assert t2 > 0
    np.testing.assert_array_equal(z, x * 2 + y)


def _run_in_worker(blob: bytes) -> list:
    obj = pickle.loads(blob)
    k = load(obj)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    z = np.zeros((4, 8), np.float32)
    k(x, np.ones_like(x), z)
    return z.tolist()


def test_compiled_object_pickles_and_runs_elsewhere():
    obj = compile_object(_axpy())
    blob = pickle.dumps(obj)
    assert isinstance(pickle.loads(blob), CompiledObject)
    k = load(pickle.loads(blob))  # same process, new engine
    x, y, z = _args()
    k(x, y, z)
    np.testing.assert_array_equal(z, x * 2 + y)
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        got = ex.submit(_run_in_worker, blob).result(timeout=120)
    np.testing.assert_array_equal(np.array(got, np.float32), x * 2 + y)


def test_foreign_toolchain_is_refused():
    obj = compile_object(_axpy())
    obj.toolchain_key = "0000000000000000"
    with pytest.raises(ValueError, match="toolchain"):
        load(obj)


def test_target_identity():
    ident = target.toolchain_identity()
    assert {"llvmlite", "llvm", "triple", "cpu", "features", "key"} <= set(ident)
    assert len(ident["key"]) == 16 and ident["key"] == target.toolchain_key()
    assert target.vector_bits() in (128, 256, 512)
    if "+avx512f" in ident["features"].split(","):
        assert target.vector_bits() == 512


def test_compile_from_several_threads():
    with cf.ThreadPoolExecutor(2) as ex:
        objs = list(ex.map(lambda _: compile_object(_axpy()), range(4)))
    assert len({o.object_code for o in objs}) == 1  # deterministic, and no crash
    k = load(objs[-1])
    x, y, z = _args()
    k(x, y, z)
    np.testing.assert_array_equal(z, x * 2 + y)
