"""``export_library``: one shared library per network, run by the standalone ``ansor_runtime.py``
in a Python that sees only numpy, by the C example, and from many threads; the CPU-feature
refusal; ``ansor network export`` on a zoo name and an ONNX file (checked against onnxruntime)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import ansor
from ansor.graph import GraphBuilder
from ansor.graph.executor import compile_network
from ansor.graph.export_library import ISA_FEATURES, required_features

MODELS = Path(__file__).resolve().parents[2] / "models"
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def _runtime(d: Path):
    """The exported ``ansor_runtime.py`` of ``d``, imported from there."""
    spec = importlib.util.spec_from_file_location(f"ansor_runtime_{abs(hash(str(d)))}", d / "ansor_runtime.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pattern(shape) -> np.ndarray:
    """example.c's fixed input pattern."""
    n = int(np.prod(shape))
    return (((np.arange(n) % 17) - 8) / np.float32(8)).astype(np.float32).reshape(shape)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    g = ansor.networks.get("resnet-18", image_size=32)
    lib = compile_network(g, verbose=False)
    d = tmp_path_factory.mktemp("resnet")
    assert lib.export_library(d / "net.so") == d / "net.so"
    return lib, d


def test_files_and_symbols(resnet):
    lib, d = resnet
    for f in ("net.so", "net.weights", "net.json", "ansor_runtime.py", "ansor_net.h", "example.c"):
        assert (d / f).is_file(), f
    meta = json.loads((d / "net.json").read_text())
    assert meta["inputs"] == [{"name": "data", "shape": [1, 32, 32, 3], "dtype": "float32", "nbytes": 12288}]
    assert meta["weights_bytes"] == (d / "net.weights").stat().st_size
    assert meta["required_features"] == required_features() and meta["target"]["cpu"]
    assert set(meta["required_features"]) <= ISA_FEATURES
    from ansor.graph.cpu_check import CPUID_BITS

    assert ISA_FEATURES <= set(CPUID_BITS)  # the library's own check knows every feature recorded
    # The exported symbols are the C ABI only; kernels are hidden, named by number.
    out = subprocess.run(["nm", "-D", "--defined-only", str(d / "net.so")], capture_output=True, text=True)
    if out.returncode == 0:
        names = {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}
        assert names and all(n.startswith("ansor_") for n in names), names
    # Parallel loops run on the library's own thread pool: no OpenMP runtime is needed.
    out = subprocess.run(["nm", "-D", "--undefined-only", str(d / "net.so")], capture_output=True, text=True)
    if out.returncode == 0:
        assert not [n for n in out.stdout.split() if "omp" in n.lower()], out.stdout
    out = subprocess.run(["readelf", "-d", str(d / "net.so")], capture_output=True, text=True)
    if out.returncode == 0:
        assert "NEEDED" in out.stdout and "gomp" not in out.stdout and "NODELETE" in out.stdout, out.stdout


def test_default_thread_count_is_the_affinity_mask(resnet):
    """``ansor_create(path, 0)``: as many threads as CPUs the process may run on."""
    _, d = resnet
    code = f"""
import ctypes, os, sys
if len(sys.argv) > 1:
    os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}})
lib = ctypes.CDLL({str(d / 'net.so')!r})
lib.ansor_create.restype = ctypes.c_void_p
lib.ansor_create.argtypes = [ctypes.c_char_p, ctypes.c_int]
lib.ansor_get_num_threads.argtypes = [ctypes.c_void_p]
lib.ansor_destroy.argtypes = [ctypes.c_void_p]
lib.ansor_last_error.restype = ctypes.c_char_p
ctx = lib.ansor_create({str(d / 'net.weights')!r}.encode(), 0)
assert ctx, lib.ansor_last_error()
print(lib.ansor_get_num_threads(ctx), len(os.sched_getaffinity(0)))
lib.ansor_destroy(ctx)
"""
    for extra in ([], ["one-cpu"]):
        r = subprocess.run([sys.executable, "-c", code, *extra], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        got, cpus = r.stdout.split()
        assert got == cpus and (cpus == "1" or not extra)


def _run_isolated(d: Path, x: np.ndarray, tmp: Path) -> dict[str, np.ndarray]:
    """The library of ``d`` run by its ``ansor_runtime.py`` in a fresh Python (``-I -S``) that
    sees only numpy and ``d``; the outputs, asserted free of ansor, llvmlite, onnx, lightgbm."""
    iso = tmp / "iso"
    iso.mkdir(exist_ok=True)
    site = Path(np.__file__).resolve().parent.parent
    for name in ("numpy", "numpy.libs"):
        if (site / name).exists() and not (iso / name).exists():
            (iso / name).symlink_to(site / name)
    np.save(tmp / "x.npy", x)
    code = f"""
import sys
sys.path[:0] = [{str(iso)!r}, {str(d)!r}]
for banned in ("ansor", "llvmlite", "onnx", "lightgbm"):
    try:
        __import__(banned)
    except ImportError:
        pass
    else:
        raise SystemExit(banned + " is importable")
import numpy as np, ansor_runtime
m = ansor_runtime.load({str(d / 'net.so')!r}, num_threads=2)
out = m.run({{m.input_names[0]: np.load({str(tmp / 'x.npy')!r}, allow_pickle=False)}})
np.savez({str(tmp / 'y.npz')!r}, **out)
print(sorted(sys.modules.keys() & {{"ansor", "llvmlite", "onnx", "lightgbm", "onnxruntime"}}))
"""
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    with np.load(tmp / "y.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _onnxruntime(graph, x: np.ndarray, tmp: Path) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    from ansor.graph.onnx_export import export_onnx

    export_onnx(graph, tmp / "g.onnx")
    sess = ort.InferenceSession(str(tmp / "g.onnx"), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})


def test_runtime_in_a_python_with_only_numpy(resnet, tmp_path):
    lib, d = resnet
    x = np.random.default_rng(1).standard_normal((1, 32, 32, 3)).astype(np.float32)
    got = _run_isolated(d, x, tmp_path)["fc_bias"]
    np.testing.assert_allclose(got, lib.run({"data": x})["fc_bias"], rtol=1e-5, atol=1e-5)
    want = _onnxruntime(ansor.networks.get("resnet-18", image_size=32), x, tmp_path)[0]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))


def test_bert_layer_in_a_python_with_only_numpy(tmp_path):
    g = ansor.networks.get("bert-base-layer", seq_len=8)
    compile_network(g, verbose=False).export_library(tmp_path / "bert" / "net.so")
    x = np.random.default_rng(3).standard_normal((1, 8, 768)).astype(np.float32)
    got = _run_isolated(tmp_path / "bert", x, tmp_path)
    want = _onnxruntime(g, x, tmp_path)[0]
    np.testing.assert_allclose(got[g.outputs[0]], want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_c_example_prints_the_same_top5(resnet):
    lib, d = resnet
    exe = d / "example"
    subprocess.run([CC, "example.c", "-I.", "./net.so", "-Wl,-rpath,$ORIGIN", "-o", str(exe)], cwd=d, check=True)
    r = subprocess.run([str(exe), "net.weights"], cwd=d, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    y = lib.run({"data": _pattern((1, 32, 32, 3))})["fc_bias"].reshape(-1)
    top5 = np.argsort(-y, kind="stable")[:5]
    assert r.stdout.split(":")[1].split() == [str(i) for i in top5]
    bad = subprocess.run([str(exe), "missing.weights"], cwd=d, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "missing.weights" in bad.stderr


def test_missing_cpu_feature_and_bad_files_refused(resnet, tmp_path):
    _, d = resnet
    for f in ("net.so", "net.weights", "ansor_runtime.py"):
        (tmp_path / f).symlink_to(d / f)
    meta = json.loads((d / "net.json").read_text())
    meta["required_features"] = meta["required_features"] + ["fakefeature9"]
    (tmp_path / "net.json").write_text(json.dumps(meta))
    rt = _runtime(tmp_path)
    with pytest.raises(rt.NetworkError, match=r"^net.so needs CPU feature\(s\) this CPU lacks: fakefeature9 ") as e:
        rt.load(str(tmp_path / "net.so"))
    assert "\n" not in str(e.value)
    # A weights file of the wrong size or identity: one line from ansor_create.
    (tmp_path / "net.json").write_text((d / "net.json").read_text())
    (tmp_path / "net.weights").unlink()
    (tmp_path / "net.weights").write_bytes((d / "net.weights").read_bytes()[:4096])
    with pytest.raises(rt.NetworkError, match=r"has 4096 bytes, this library expects") as e:
        rt.load(str(tmp_path / "net.so"))
    data = bytearray((d / "net.weights").read_bytes())
    data[16] ^= 1
    (tmp_path / "net.weights").write_bytes(bytes(data))
    with pytest.raises(rt.NetworkError, match="is not the weights file of this library"):
        rt.load(str(tmp_path / "net.so"))


@pytest.mark.parametrize("num_threads", [1, 2])
def test_run_checks_inputs_and_is_thread_safe(resnet, num_threads):
    lib, d = resnet
    m = _runtime(d).load(str(d / "net.so"), num_threads=num_threads)
    with pytest.raises(ValueError, match=r"input 'data': expected shape \[1, 32, 32, 3\], got \[1, 32, 32\]"):
        m.run({"data": np.zeros((1, 32, 32), np.float32)})
    with pytest.raises(ValueError, match="expected dtype float32, got float64"):
        m.run({"data": np.zeros((1, 32, 32, 3))})
    with pytest.raises(ValueError, match="unknown input name"):
        m.run({"x": 1})
    xs = [np.random.default_rng(i).standard_normal((1, 32, 32, 3)).astype(np.float32) for i in range(6)]
    want = [lib.run({"data": x})["fc_bias"] for x in xs]
    bad: list = []

    def worker(t: int) -> None:
        for k in range(12):
            i = (t + k) % len(xs)
            if not np.allclose(m.run({"data": xs[i]})["fc_bias"], want[i], rtol=1e-5, atol=1e-5):
                bad.append((t, k))

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a run hung"
    assert not bad
    m.close()
    with pytest.raises(ValueError, match="after close"):
        m.run({"data": xs[0]})


def test_model_names_never_reach_the_library(tmp_path):
    b = GraphBuilder()
    x = b.input("x_in", (2, 7))
    w = b.constant(np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32), name="Wsecretweightname")
    h = b.add_node("dense", [x, w], name="Nsecretnodename")
    lib = compile_network(b.build(b.add_node("relu", [h], name="y_out")), verbose=False)
    lib.export_library(tmp_path / "net.so")
    blob = (tmp_path / "net.so").read_bytes()
    assert b"secret" not in blob
    assert all(s.kernel.compiled.name.encode() + b"\0" not in blob for s in lib._steps)  # renamed
    m = _runtime(tmp_path).load(str(tmp_path / "net.so"))
    xv = np.random.default_rng(1).standard_normal((2, 7)).astype(np.float32)
    np.testing.assert_allclose(m.run({"x_in": xv})["y_out"], lib.run({"x_in": xv})["y_out"], rtol=1e-6)


def _cli(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(ansor.__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-m", "ansor", "network", "export", *argv], capture_output=True,
                          text=True, timeout=500, env=env)


def test_cli_export_zoo_and_onnx(tmp_path):
    r = _cli("resnet-18", "--image-size", "32", "-o", str(tmp_path / "zoo" / "net.so"))
    assert r.returncode == 0, r.stderr
    assert "import ansor_runtime" in r.stdout and "ansor_runtime.load(" in r.stdout
    assert (tmp_path / "zoo" / "example.c").is_file()
    onnxruntime = pytest.importorskip("onnxruntime")
    model = MODELS / "mobilenet_v3.onnx"
    r = _cli(str(model), "--batch", "2", "-o", str(tmp_path / "mb" / "mb.so"))
    assert r.returncode == 0, r.stderr
    m = _runtime(tmp_path / "mb").load(str(tmp_path / "mb" / "mb.so"))
    assert m.inputs["image"][0] == (2, 3, 32, 32)
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    sess = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"image": x})
    got = m.run({"image": x})
    for name, w in zip(m.output_names, want):
        np.testing.assert_allclose(got[name], w, rtol=1e-3, atol=1e-3 * float(np.abs(w).max()))
    bad = _cli("resnet-18", "--image-size", "32", "-o", str(tmp_path / "x.dll"))
    assert bad.returncode == 2 and "DIR/NAME.so" in bad.stderr


def test_half_precision_boundary(tmp_path):
    """A float16 boundary: the library computes in float32, the loader converts like ``run``."""
    b = GraphBuilder()
    x = b.input("x", (3, 5))
    y = b.add_node("relu", [x], name="y")
    lib = compile_network(b.build(y, io_dtypes={"x": "float16", "y": "float16"}), verbose=False)
    lib.export_library(tmp_path / "h.so")
    m = _runtime(tmp_path).load(str(tmp_path / "h.so"))
    assert m.inputs["x"] == ((3, 5), np.dtype(np.float16)) and m.outputs["y"][1] == np.float16
    xv = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float16)
    got, want = m.run({"x": xv})["y"], lib.run({"x": xv})["y"]
    assert got.dtype == want.dtype == np.float16
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="expected dtype float16 or float32, got int32"):
        m.run({"x": np.zeros((3, 5), np.int32)})


def _cpu_lacks() -> str | None:
    """A feature the library's own check knows that this CPU lacks (per /proc/cpuinfo)."""
    from ansor.graph.cpu_check import CPUID_BITS

    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    names = {"avx512fp16": "avx512_fp16", "avxvnni": "avx_vnni", "avx512vbmi2": "avx512_vbmi2",
             "avx512bf16": "avx512_bf16", "avx512f": "avx512f", "avx2": "avx2"}
    return next((f for f, flag in names.items() if f in CPUID_BITS and flag not in flags), None)


def test_the_library_itself_refuses_a_cpu_without_its_features(tmp_path):
    """From C (no Python loader): ``ansor_create`` checks cpuid and names the missing feature."""
    lacking = _cpu_lacks()
    if lacking is None:
        pytest.skip("this CPU has every feature the check knows")
    import ctypes

    from ansor.graph.export_library import export_library

    b = GraphBuilder()
    x = b.input("x", (4,))
    lib = compile_network(b.build(b.add_node("relu", [x], name="y")), verbose=False)
    export_library(lib, tmp_path / "net.so", features=[*required_features(), lacking])
    so = ctypes.CDLL(str(tmp_path / "net.so"))
    so.ansor_create.restype, so.ansor_create.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
    so.ansor_last_error.restype = ctypes.c_char_p
    assert not so.ansor_create(str(tmp_path / "net.weights").encode(), 1)
    msg = so.ansor_last_error().decode()
    assert msg == (f"ansor_create: this CPU lacks feature(s) the library was built for: {lacking} "
                   "(export it for this machine's target)")
    # Without the fake requirement the same check passes.
    export_library(lib, tmp_path / "ok" / "net.so")
    m = _runtime(tmp_path / "ok").load(str(tmp_path / "ok" / "net.so"))
    np.testing.assert_array_equal(m.run({"x": np.array([-1, 2, -3, 4], np.float32)})["y"], [0, 2, 0, 4])


def test_linker_choice(monkeypatch):
    """The system's cc first, else the ziglang wheel's, else one line saying what to install."""
    import importlib.util as iu

    from ansor.graph import export_library as ex

    monkeypatch.setattr(ex.shutil, "which", lambda name: None)
    monkeypatch.setattr(iu, "find_spec", lambda name, *a: None)
    with pytest.raises(ansor.graph.GraphError, match=r"needs a C linker: install a C compiler .* or `pip install ziglang`$"):
        ex.find_linker()
    monkeypatch.setattr(iu, "find_spec", lambda name, *a: object() if name == "ziglang" else None)
    assert ex.find_linker() == ([sys.executable, "-m", "ziglang", "cc"], "ziglang (python -m ziglang cc)")
    monkeypatch.setattr(ex.shutil, "which", lambda name: f"/usr/bin/{name}" if name == "gcc" else None)
    assert ex.find_linker() == (["/usr/bin/gcc"], "gcc (/usr/bin/gcc)")


@pytest.mark.skipif(shutil.which("objdump") is None, reason="binutils' objdump reads the library")
def test_cli_export_for_x86_64_v3_has_no_avx512_and_runs_here(resnet, tmp_path):
    # The CLI's --target: every kernel and the entry point built for the CPU named, not the host.
    r = _cli("resnet-18", "--image-size", "32", "--target", "x86-64-v3", "-o", str(tmp_path / "v3" / "net.so"))
    assert r.returncode == 0, r.stderr
    meta = json.loads((tmp_path / "v3" / "net.json").read_text())
    assert meta["target"]["name"] == "x86-64-v3" and "avx2" in meta["required_features"]
    assert not any(f.startswith("avx512") for f in meta["required_features"])
    asm = subprocess.run(["objdump", "-d", str(tmp_path / "v3" / "net.so")], capture_output=True, text=True,
                         timeout=120).stdout
    assert "ymm" in asm and "zmm" not in asm and "{%k" not in asm  # no AVX-512 register, no mask
    lib, _ = resnet
    x = np.random.default_rng(3).standard_normal(lib.input_types["data"].shape).astype(np.float32)
    got = _runtime(tmp_path / "v3").load(str(tmp_path / "v3" / "net.so")).run({"data": x})
    want = lib.run({"data": x})
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()))
