"""Building for a named CPU (``measure.targets``): its features are the CPU's, not the host's
(an x86-64-v3 kernel has no zmm register), it runs here when this CPU has them and is refused
in one line when not; an unknown name is a one-line error."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import ansor
from compute import te
from measure import cpu_features, target, targets
from compute.compute_dag import ComputeDAG
from measure.kernel import compile_object, load
from sketch.loop_state import State
from sketch.lower import lower

HOST_AVX512 = "avx512f" in (cpu_features.host_features() or ())
HOST_AVX2 = "avx2" in (cpu_features.host_features() or ())


def _matmul(n: int = 48):
    A = te.placeholder((n, n), "float32", "A")
    B = te.placeholder((n, n), "float32", "B")
    k = te.reduce_axis((0, n), "k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def _disassembly(obj: bytes) -> str:
    """objdump's disassembly of the object code itself (not a recompilation), else ''."""
    if shutil.which("objdump") is None:
        return ""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.o"
        p.write_bytes(obj)
        return subprocess.run(["objdump", "-d", str(p)], capture_output=True, text=True,
                              check=True).stdout


def _run_matmul(kern, n: int = 48) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    kern(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_psabi_levels_are_the_cpus_features_not_the_hosts():
    v2, v3, v4 = (targets.get_target(f"x86-64-v{i}") for i in (2, 3, 4))
    assert {"sse4.2", "popcnt", "ssse3", "cx16"} <= v2.enabled and not v2.has("avx")
    assert {"avx", "avx2", "fma", "bmi2", "f16c", "movbe"} <= v3.enabled
    assert not any(f.startswith("avx512") for f in v3.enabled)
    assert {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= v4.enabled
    assert (v2.vector_bits, v3.vector_bits, v4.vector_bits) == (128, 256, 512)
    assert v3.features == "" and v3.cpu == "x86-64-v3"  # LLVM derives the CPU's own features
    assert targets.get_target("haswell").cpu == "haswell"
    assert targets.get_target("llvm -mcpu=znver3").name == "znver3"  # TVM's spelling
    assert target.toolchain_key("x86-64-v3") != target.toolchain_key("native")
    assert target.host_hardware_params("x86-64-v3").vector_bits == 256


@pytest.mark.parametrize("name", ["bogus-cpu", "znver4; rm -rf", ""])
def test_unknown_target_is_one_line(name):
    with pytest.raises(targets.TargetError) as e:
        targets.get_target(name)
    msg = str(e.value)
    assert "\n" not in msg and "x86-64-v3" in msg and "znver4" in msg


@pytest.mark.skipif(not HOST_AVX2, reason="needs a CPU with AVX2 to run x86-64-v3 code")
def test_x86_64_v3_kernel_has_no_avx512_and_runs():
    kern = ansor.build(_matmul(), cpu="x86-64-v3")
    assert kern.compiled.target == "x86-64-v3"
    attrs = [ln for ln in kern.llvm_ir.splitlines() if ln.startswith("attributes")]
    assert attrs and all('"target-cpu"="x86-64-v3"' in a and "avx512" not in a for a in attrs)
    assert "zmm" not in kern.assembly and "ymm" in kern.assembly
    dis = _disassembly(kern.compiled.object_code)
    assert "zmm" not in dis and "{k" not in dis  # no zmm register, no AVX-512 mask register
    _run_matmul(kern)


@pytest.mark.skipif(not HOST_AVX512, reason="the host has no AVX-512")
def test_native_kernel_may_use_zmm_here():
    kern = ansor.build(_matmul())
    assert kern.compiled.target == "native"
    assert "zmm" in kern.assembly
    _run_matmul(kern)


def test_kernel_for_a_cpu_feature_this_host_lacks_is_refused_in_one_line():
    lacking = [c for c in ("sapphirerapids", "graniterapids", "alderlake")
               if targets.get_target(c).missing_here()]
    if not lacking:
        pytest.skip("this CPU has every feature of the CPUs tried")
    t = targets.get_target(lacking[0])
    with targets.use_target(t):
        compiled = compile_object(lower(State.initial(ComputeDAG(_matmul(16))), "mm"))
    assert compiled.target == t.name
    with pytest.raises(targets.TargetError) as e:
        load(compiled)
    msg = str(e.value)
    assert "\n" not in msg and t.name in msg and ", ".join(t.missing_here()) in msg


def test_refusal_is_a_pure_function():
    req = ["avx", "avx2", "avx512f", "avx512bw"]
    assert cpu_features.refusal("net/", "x86-64-v4", req, host={"avx", "avx2"}) == \
        "ansor: net/: built for x86-64-v4, this CPU lacks avx512f, avx512bw"
    assert cpu_features.refusal("net/", "x86-64-v4", req, host=set(req)) is None
    # a feature no loader can check (not in /proc/cpuinfo's table) is never a reason to refuse
    assert cpu_features.missing_features(["prefer-256-bit", "avx"], {"avx"}) == []


def test_best_record_takes_only_the_targets_records(tmp_path):
    from ansor.records import best_record
    from ansor.search_task import SearchTask
    from measure.measure import MeasureInput, MeasureResult
    from measure.record import RecordToFile

    tensors = _matmul(16)
    native, v3 = SearchTask(tensors=tensors), SearchTask(tensors=tensors, target="x86-64-v3")
    assert v3.hardware_params.vector_bits == 256 and v3.workload_key == native.workload_key
    state = State.initial(native.compute_dag)
    log = tmp_path / "log.json"
    rec = RecordToFile(str(log))
    rec([MeasureInput(native, state)], [MeasureResult((1e-3,), 0)])
    rec([MeasureInput(v3, state)] * 2, [MeasureResult((5e-3,), 0)] * 2)
    with pytest.warns(UserWarning, match=r"ignored 2 record\(s\) built for another target "
                                         r"\(2 for x86-64-v3\).*best for native"):
        inp, res = best_record(log, native)
    assert res.costs == (1e-3,)
    with pytest.warns(UserWarning, match=r"ignored 1 record\(s\) .*\(1 for native\)") as w:
        inp, res = best_record(log, v3)
    assert res.costs == (5e-3,) and inp.task is v3 and len(w) == 1
    assert "\n" not in str(w[0].message)
    assert {ln.target.get("target") for ln in load_records_lines(log)} == {None, "x86-64-v3"}


def load_records_lines(path):
    from measure.record import iter_lines

    return list(iter_lines(str(path)))


def _dense_net():
    from ansor.graph import GraphBuilder

    b = GraphBuilder()
    x = b.input("x", (3, 40))
    w = b.constant(np.random.default_rng(1).standard_normal((24, 40)).astype(np.float32), "w")
    return b.build(b.relu6(b.dense(x, w)))


@pytest.mark.skipif(not HOST_AVX2, reason="needs a CPU with AVX2 to run x86-64-v3 code")
def test_network_for_x86_64_v3_exports_its_target_and_loads_here(tmp_path):
    import json

    from ansor.graph import run

    g = _dense_net()
    x = {"x": np.random.default_rng(2).standard_normal((3, 40)).astype(np.float32)}
    lib = ansor.compile_network(g, verbose=False, target="x86-64-v3")
    assert lib.target_name == "x86-64-v3"
    np.testing.assert_allclose(lib.run(x)[g.outputs[0]], run(g, x)[g.outputs[0]], rtol=1e-4, atol=1e-5)
    for s in lib._steps:
        assert "zmm" not in _disassembly(s.kernel.compiled.object_code)
    lib.export(tmp_path / "net")
    entry = json.loads((tmp_path / "net" / "module.json").read_text())["target"]
    assert entry["name"] == "x86-64-v3" and "avx2" in entry["features"]
    assert not any(f.startswith("avx512") for f in entry["features"])
    back = ansor.load_module(tmp_path / "net")
    assert back.target_name == "x86-64-v3"
    np.testing.assert_allclose(back.run(x)[g.outputs[0]], lib.run(x)[g.outputs[0]])


def test_module_needing_a_feature_this_cpu_lacks_is_refused_at_load(tmp_path):
    import json

    g = _dense_net()
    ansor.compile_network(g, verbose=False).export(tmp_path / "net")
    meta_file = tmp_path / "net" / "module.json"
    meta = json.loads(meta_file.read_text())
    host = cpu_features.host_features() or set()
    lacking = [f for f in ("amx-tile", "amx-int8", "avx512fp16", "fma4") if f not in host][:2]
    meta["target"] = {"name": "fake-cpu", "cpu": "fake-cpu", "features": meta["target"]["features"] + lacking}
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(targets.TargetError) as e:
        ansor.load_module(tmp_path / "net")
    assert str(e.value) == f"{tmp_path / 'net'}/: built for fake-cpu, this CPU lacks {', '.join(lacking)}"


@pytest.mark.parametrize("target,words", [("bogus-cpu", "unknown target 'bogus-cpu'"),
                                          ("sapphirerapids", "cannot run here")])
def test_cli_target_errors_are_one_line(capsys, tmp_path, target, words):
    from ansor.cli import main

    if target == "sapphirerapids" and not targets.get_target(target).missing_here():
        pytest.skip("this CPU can run sapphirerapids code")
    code = main(["tune", "matmul", "--args", "8,8,8", "--trials", "1", "--target", target,
                 "--log", str(tmp_path / "log.json"), "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "log.json").exists()


def test_apply_best_names_the_other_targets_records(tmp_path):
    from ansor.records import NoRecordError
    from ansor.search_task import SearchTask
    from measure.measure import MeasureInput, MeasureResult
    from measure.record import RecordToFile

    tensors = _matmul(16)
    v3, v4 = SearchTask(tensors=tensors, target="x86-64-v3"), SearchTask(tensors=tensors, target="x86-64-v4")
    RecordToFile(str(tmp_path / "log.json"))([MeasureInput(v3, State.initial(v3.compute_dag))],
                                             [MeasureResult((1e-3,), 0)])
    assert v3.apply_best(tmp_path / "log.json") is not None
    with pytest.warns(UserWarning, match="1 for x86-64-v3"), pytest.raises(NoRecordError) as e:
        v4.apply_best(tmp_path / "log.json")
    assert "built for another target (1 for x86-64-v3), not x86-64-v4" in str(e.value)
