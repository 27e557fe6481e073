"""The persistent compile cache (measure.compile_cache): hits, misses, bad entries, sharing.

LLVM compiles are counted by a spy on ``target.compile_ir``, the one place IR becomes object
code. Every test points ``ANSOR_CACHE_DIR`` at its own empty directory.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from compute import expr as E
from measure import compile_cache, target

from .helpers import elementwise, run

ROOT = Path(__file__).resolve().parents[2]


def module(name: str) -> str:
    """A small LLVM module of its own (``name`` makes its text, and so its key, distinct)."""
    return (f"define void @{name}(ptr %p) {{\n  store float 1.0, ptr %p\n  ret void\n}}\n")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory, and the count of LLVM compiles (``calls``) made from now on."""
    root = tmp_path / "cache"
    monkeypatch.setenv("ANSOR_CACHE_DIR", str(root))
    calls: list[str] = []
    real = target.compile_ir

    def spy(ir: str, timings: dict | None = None) -> bytes:
        calls.append(ir)
        return real(ir, timings)

    monkeypatch.setattr(target, "compile_ir", spy)
    return root, calls


def entries(root: Path) -> list[Path]:
    return sorted(root.rglob("output.pkl"))


def test_second_compile_of_a_module_hits(cache):
    root, calls = cache
    add = lambda a, b: a + b  # noqa: E731
    a, b = np.arange(8, dtype=np.float32), np.ones(8, dtype=np.float32)
    first = elementwise(add, ["float32", "float32"], "float32", 8, name="cache_add")
    assert len(calls) == 1 and len(entries(root)) == 1
    second = elementwise(add, ["float32", "float32"], "float32", 8, name="cache_add")
    assert len(calls) == 1, "the second compile of the same module ran LLVM again"
    assert "cache" in second.compiled.timings and "optimize" in first.compiled.timings
    assert second.compiled.object_code == first.compiled.object_code
    np.testing.assert_array_equal(run(second, a, b), a + b)  # the cached object code runs
    elementwise(lambda a, b: a * b, ["float32", "float32"], "float32", 8, name="cache_add")
    assert len(calls) == 2  # another computation is another module


def test_another_toolchain_or_pipeline_misses(cache, monkeypatch):
    root, calls = cache
    ir = module("tc")
    obj = compile_cache.object_code(ir)
    assert compile_cache.object_code(ir) == obj and len(calls) == 1
    other = dict(target.toolchain_identity(), llvm="0.0.0")
    monkeypatch.setattr(target, "toolchain_identity", lambda: other)
    compile_cache.object_code(ir)
    assert len(calls) == 2, "a module compiled by another LLVM was reused"
    monkeypatch.setattr(target, "PIPELINE", dict(target.PIPELINE, loop_unrolling=True))
    compile_cache.object_code(ir)
    assert len(calls) == 3, "a module compiled by another pipeline was reused"
    assert len(entries(root)) == 3


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "pickle"])
def test_a_damaged_entry_is_a_miss_and_is_replaced(cache, tmp_path, damage):
    root, calls = cache
    ir = module("dmg")
    obj = compile_cache.object_code(ir)
    (path,) = entries(root)
    data = path.read_bytes()
    marker = tmp_path / "pwned"
    if damage == "truncate":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "flip":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # a pickle that would run code if the cache unpickled what it reads
        path.write_bytes(pickle.dumps(_Exploit(str(marker))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a bad entry is quietly compiled again
        assert compile_cache.object_code(ir) == obj
    assert len(calls) == 2 and not marker.exists()
    assert compile_cache.decode_entry(path.read_bytes()) == obj  # replaced by a good entry
    compile_cache.object_code(ir)
    assert len(calls) == 2


class _Exploit:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_disabled_cache_compiles_every_time(cache, monkeypatch):
    root, calls = cache
    for value in ("off", "OFF", "none", "0"):
        monkeypatch.setenv("ANSOR_CACHE_DIR", value)
        compile_cache.object_code(module("off"))
        compile_cache.object_code(module("off"))
    assert len(calls) == 8
    assert not root.exists() and not Path(os.getcwd(), "off").exists()


def test_compile_errors_propagate_unchanged(cache):
    _, calls = cache
    with pytest.raises(RuntimeError, match="expected"):
        compile_cache.object_code("define void @bad( {")
    with pytest.raises(RuntimeError):  # not cached either
        compile_cache.object_code("define void @bad( {")
    assert len(calls) == 2


def test_a_directory_others_can_write_is_not_used(cache):
    root, calls = cache
    root.mkdir()
    root.chmod(0o777)
    if not hasattr(os, "geteuid"):
        pytest.skip("no POSIX ownership here")
    with pytest.warns(RuntimeWarning, match="others can write"):
        compile_cache.object_code(module("shared"))
    compile_cache.object_code(module("shared"))
    assert len(calls) == 2 and entries(root) == []


def test_default_location_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("ANSOR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.cache_dir() == tmp_path / "ansor-py" / "compile"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # invalid per the spec: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_cache.cache_dir() == tmp_path / "home" / ".cache" / "ansor-py" / "compile"


def test_trim_keeps_the_most_recently_used(cache, monkeypatch):
    root, calls = cache
    objs = {n: compile_cache.object_code(module(n)) for n in ("old", "mid", "new")}
    paths = {n: p for p in entries(root) for n in objs if compile_cache.decode_entry(p.read_bytes()) == objs[n]}
    for age, n in enumerate(("new", "mid", "old")):  # "old" least recently used
        t = 1_000_000 - 1000 * age
        os.utime(paths[n], (t, t))
    compile_cache.object_code(module("old"))  # a hit makes it the most recent
    size = paths["old"].stat().st_size + (paths["old"].parent / "metadata.json").stat().st_size
    monkeypatch.setenv("ANSOR_CACHE_MAX_MB", str(size * 1.5 / (1 << 20)))
    compile_cache.trim()
    assert [p.exists() for p in (paths["old"], paths["mid"], paths["new"])] == [True, False, False]
    assert len(calls) == 3


def test_writing_trims_the_cache_to_its_bound(cache, monkeypatch):
    root, calls = cache
    for n in ("a", "b"):
        compile_cache.object_code(module(n))
    for p in entries(root):
        os.utime(p, (1_000_000, 1_000_000))  # long unused
    (one,) = entries(root)[:1]
    size = one.stat().st_size + (one.parent / "metadata.json").stat().st_size
    monkeypatch.setenv("ANSOR_CACHE_MAX_MB", str(size * 1.5 / (1 << 20)))
    monkeypatch.setattr(compile_cache, "_next_trim", 0)  # this process's next write trims
    new = compile_cache.object_code(module("c"))
    assert [compile_cache.decode_entry(p.read_bytes()) for p in entries(root)] == [new]
    assert compile_cache._next_trim > compile_cache.stats().stored  # not again at the next write


_FILL = """
import hashlib, json, sys
from measure import compile_cache
irs = json.load(open(sys.argv[1]))
objs = [compile_cache.object_code(ir) for ir in irs]
print(json.dumps([hashlib.sha256(o).hexdigest() for o in objs]))
"""


def test_two_processes_fill_one_cache_concurrently(cache, tmp_path):
    root, calls = cache
    irs = [module(f"k{i}") for i in range(40)]
    orders = [irs, irs[::-1]]
    procs = []
    for k, order in enumerate(orders):
        f = tmp_path / f"irs{k}.json"
        f.write_text(json.dumps(order))
        procs.append(subprocess.Popen([sys.executable, "-c", _FILL, str(f)], cwd=ROOT, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=dict(os.environ, PYTHONPATH=str(ROOT))))
    digests = []
    for p, order in zip(procs, orders):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "Warning" not in err, err
        digests.append(dict(zip(order, json.loads(out))))
    assert len(entries(root)) == len(irs)
    for ir in irs:  # every entry intact and what both processes compiled
        obj = compile_cache.object_code(ir)
        assert hashlib.sha256(obj).hexdigest() == digests[0][ir] == digests[1][ir]
    assert calls == [], "entries written by the two processes were not all reused"


# ---- whole kernels by schedule (ansor.build) -----------------------------------------------------

def _gemm_state(split: int):
    from compute.ops import workloads as W
    from compute.compute_dag import ComputeDAG

    dag = ComputeDAG(W.matmul(16, 8, 4))
    s = dag.init_state()
    return dag, s.split(dag.output_ops[0].name, "i", [split])


def test_a_built_kernel_is_read_back_without_lowering(cache, monkeypatch):
    import ansor
    from ansor import build_module
    from compute.reference import evaluate, random_inputs

    root, calls = cache
    lowered = []
    real_lower = build_module.lower
    monkeypatch.setattr(build_module, "lower", lambda *a, **k: lowered.append(1) or real_lower(*a, **k))
    dag, state = _gemm_state(4)
    first = ansor.build(state)
    assert len(lowered) == 1 and len(calls) == 1 and "optimize" in first.compiled.timings
    second = ansor.build(state)
    assert len(lowered) == 1 and len(calls) == 1, "a kernel built before was lowered or compiled again"
    assert second.compiled.object_code == first.compiled.object_code
    assert second.llvm_ir == first.llvm_ir and second.args == first.args
    ins = random_inputs(dag, seed=0)
    out = np.zeros(second.args[-1].shape, np.float32)
    second(*ins, out)
    np.testing.assert_allclose(out, evaluate(dag, ins)[0], rtol=1e-5)
    ansor.build(_gemm_state(2)[1])  # another schedule
    assert len(lowered) == 2
    monkeypatch.setattr(compile_cache, "code_identity", lambda: "other code")
    ansor.build(state)  # the same schedule, but other code to lower it: built again
    assert len(lowered) == 3


def test_a_pre_packed_kernel_keeps_its_packed_arguments(cache):
    import ansor
    from tests.sketch.test_layout_rewrite import _packed_states
    from tests.sketch.test_pack import packed_gemm

    dag, _ = packed_gemm(4, 32, 8, (4, 32), (2, 16, 4))
    state = _packed_states(dag, n=1)[0]
    first = ansor.build(state, layout_rewrite_inputs=[1])
    second = ansor.build(state, layout_rewrite_inputs=[1])
    assert first.packed_args and second.packed_args == first.packed_args
    assert second.args == first.args


def test_a_kernel_entry_that_does_not_decode_is_rebuilt(cache):
    import ansor
    from measure.kernel import compiled_from_bytes, compiled_to_bytes

    root, calls = cache
    _, state = _gemm_state(4)
    good = compiled_to_bytes(ansor.build(state).compiled)
    for bad in (good[:10], b"\xff\xff\xff\x7f" + good[4:], good[:4] + b"[" + good[5:]):
        with pytest.raises(ValueError):
            compiled_from_bytes(bad)
    kernel_entries = [p for p in entries(root) if compile_cache.decode_entry(p.read_bytes()) == good]
    assert len(kernel_entries) == 1
    # a well-formed entry (checksum right) whose kernel does not decode: built again, replaced
    kernel_entries[0].write_bytes(compile_cache.encode_entry(good[:4] + b"[" + good[5:]))
    again = ansor.build(state)
    assert compiled_to_bytes(again.compiled) == good
    assert compile_cache.decode_entry(kernel_entries[0].read_bytes()) == good
