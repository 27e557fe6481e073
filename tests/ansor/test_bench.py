"""The benchmark suite (``ansor bench``, ``ansor.bench``): its pieces, and one tiny end-to-end run.

The end-to-end run tunes GEMM 64^3 for 4 trials, times ours, numpy and PyTorch eager once each
with short timing, and checks the JSON and Markdown it writes. The peers' formulations are
checked against the numpy reference on the registered workloads' small shapes; TVM's (slow: TVM
imports and compiles) only when TVM is installed.
"""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from ansor.bench import suite as S
from ansor.bench import timing
from ansor.cli import main as ansor_main
from compute import reference
from compute.ops import WORKLOADS
from tests.util import benchmark_module

PEER_WORKLOADS = ["matmul", "batch_matmul", "conv2d_nhwc", "conv2d_bias_relu",
                  "depthwise_conv2d_nhwc", "dense", "dense_bias_relu", "softmax", "layer_norm"]


def _small(name: str):
    args = WORKLOADS[name].small_args
    dag = S.make_dag(name, args)
    inputs = S.make_inputs(dag)
    return args, inputs, reference.evaluate(dag, inputs)[-1]


# ---- pieces ---------------------------------------------------------------------------------------

def test_suite_workloads_are_registered_with_their_arguments() -> None:
    names = [w.name for w in S.SUITE]
    assert len(names) == len(set(names)) == 10
    for w in S.SUITE:
        dag = S.make_dag(w.workload, w.args)
        assert dag.flop_count > 0
    assert {w.name for w in S.SUITE if w.memory_bound} == {"softmax", "layer_norm"}


def test_parse_workloads() -> None:
    assert S.parse_workloads(None) == list(S.SUITE)
    assert [w.name for w in S.parse_workloads("gemm_512,softmax")] == ["gemm_512", "softmax"]
    (w,) = S.parse_workloads("matmul:64,64,64")
    assert (w.name, w.workload, w.args, w.memory_bound) == ("matmul_64x64x64", "matmul",
                                                            (64, 64, 64), False)
    ws = S.parse_workloads("matmul:8,8,8;softmax:4,16")
    assert [w.name for w in ws] == ["matmul_8x8x8", "softmax_4x16"] and ws[1].memory_bound
    for bad in ("nope", "nope:1,2", "gemm_512,gemm_512", "matmul:1,("):
        with pytest.raises(SystemExit):
            S.parse_workloads(bad)


@pytest.mark.parametrize("name", PEER_WORKLOADS)
def test_numpy_formulations_match_the_reference(name: str) -> None:
    args, inputs, ref = _small(name)
    assert S.check_output(S.numpy_impl(name, args, inputs)(), ref) is None


@pytest.mark.parametrize("name", PEER_WORKLOADS)
def test_torch_formulations_match_the_reference(name: str) -> None:
    torch = pytest.importorskip("torch")
    args, inputs, ref = _small(name)
    with torch.inference_mode():
        fn, tensors, to_numpy = S.torch_impl(name, args, inputs)
        assert S.check_output(to_numpy(fn(*tensors)), ref) is None


def test_unsupported_arguments_are_no_formulation() -> None:
    args, inputs, _ = _small("conv2d_nhwc")
    with pytest.raises(S.NoFormulation):  # asymmetric padding
        S.numpy_impl("conv2d_nhwc", args[:8] + ((1, 0),), inputs)
    with pytest.raises(S.NoFormulation):  # dilated transposed convolution
        S.numpy_impl("conv2d_transpose_nhwc", (1, 4, 4, 2, 3, 3, 3, 2, 1, 0, 2),
                     [np.zeros((1, 4, 4, 2), "float32"), np.zeros((3, 3, 2, 3), "float32")])
    with pytest.raises(S.NoFormulation):
        S.numpy_impl("norm", (7, 17), [np.zeros((7, 17), "float32")])


def test_check_output_reports_shape_and_error() -> None:
    ref = np.ones((3, 4), "float32")
    assert S.check_output(ref + 1e-5, ref) is None
    assert "shape" in S.check_output(np.ones((4, 3)), ref)
    assert "max abs error" in S.check_output(ref * 1.1, ref)


def test_time_callable_calibrates_repeats() -> None:
    calls = []
    res = timing.time_callable(lambda: calls.append(1), repeat=4, min_repeat_ms=2, warmup_s=0.01)
    assert res["seconds"] > 0 and len(res["repeats"]) == 4 and res["number"] >= 1
    assert len(calls) >= 4 * res["number"]


def test_run_fresh_reports_result_crash_and_silence(tmp_path) -> None:
    ok = timing.run_fresh(["-c", "from ansor.bench.timing import emit_result; import os; "
                           "emit_result({'threads': os.environ['OMP_NUM_THREADS']})"], 3)
    assert ok == {"threads": "3"}
    crash = timing.run_fresh(["-c", "import os; os.abort()"], 1)
    assert crash["error"].startswith("crashed (SIGABRT")
    silent = timing.run_fresh(["-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"], 1)
    assert silent["error"] == "exited with status 3: boom"
    assert "returned no result" in timing.run_fresh(["-c", "pass"], 1)["error"]


def test_peers_run_without_the_openblas_core_overrides(monkeypatch) -> None:
    """A timed peer's fresh process lets OpenBLAS detect the CPU (OPENBLAS_CORETYPE pins an old
    kernel: several times slower on a new CPU), and the numpy figure says which kernel ran."""
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    env = timing.thread_env(2)
    assert "OPENBLAS_CORETYPE" not in env and "OPENBLAS_L2_SIZE" not in env
    assert env["OPENBLAS_NUM_THREADS"] == "2"
    seen = timing.run_fresh(["-c", "import os; from ansor.bench.timing import emit_result, blas_kernels; "
                             "import numpy; emit_result({'core': os.environ.get('OPENBLAS_CORETYPE'), "
                             "'blas': blas_kernels()})"], 1, env=timing.worker_env())
    assert seen["core"] is None
    assert seen["blas"] and seen["blas"][0]["num_threads"] == 1


def test_elapsed_times_skip_pauses_between_sessions() -> None:
    sessions = [{"start": 100.0, "end": 110.0}, {"start": 500.0, "end": 505.0}]
    assert S.elapsed_times([101.0, 110.0, 502.0], sessions) == [1.0, 10.0, 12.0]
    assert S.elapsed_times([7.0, 9.0], []) == [0.0, 2.0]


def test_curve_is_the_best_so_far() -> None:
    c = S._curve([None, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0], flop=4e9)
    assert c["trials"] == [1, 2, 3, 4]
    assert c["best_gflops"] == [None, 2.0, 2.0, 4.0]


def test_tuning_summary_over_sessions(tmp_path) -> None:
    path = tmp_path / "s.json"
    assert S.tuning_summary(path)["seconds_per_trial"] is None
    S.add_session(path, {"start": 0, "end": 10, "trials": 4, "wall_seconds": 10.0})
    S.add_session(path, {"start": 20, "end": 22, "trials": 1, "wall_seconds": 2.0})
    t = S.tuning_summary(path, 5)
    assert (t["sessions"], t["timed_trials"], t["trials_in_log"]) == (2, 5, 5)
    assert t["seconds_per_trial"] == pytest.approx(12.0 / 5)


def test_ansor_bench_forwards_to_the_suite(capsys) -> None:
    assert ansor_main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "gemm_1024" in out and "dense_bias_relu(128, 1024, 1024)" in out


# ---- end to end -----------------------------------------------------------------------------------

def test_tiny_suite_run_writes_json_and_markdown(tmp_path, capsys) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "out"
    argv = ["--workloads", "matmul:64,64,64", "--trials", "4", "--per-round", "4", "--rounds",
            "1", "--no-tvm", "--no-compile", "--repeat", "3", "--min-repeat-ms", "5",
            "--warmup", "0.05", "--out", str(out), "--seed", "0", "-q"]
    assert S.main(argv) == 0
    report = json.loads((out / "suite.json").read_text())
    for key in ("date", "machine", "cpu", "versions", "settings", "workloads"):
        assert key in report
    for v in ("python", "numpy", "llvmlite", "llvm", "torch"):
        assert report["versions"][v]
    assert report["settings"]["trials"] == 4 and report["settings"]["threads"] == 2
    w = report["workloads"]["matmul_64x64x64"]
    assert w["flop"] == 2 * 64 ** 3 and w["unit"] == "GFLOPS"
    for system in ("ours", "numpy", "torch"):
        e = w["systems"][system]
        assert e["status"] == "ok", e
        assert e["seconds"] > 0 and e["gflops"] > 0 and len(e["rounds"]) == 1
        assert len(e["rounds"][0]["repeats"]) == 3
    assert w["ours_over_best_peer"] > 0 and w["best_peer"] in ("numpy", "torch")
    t = w["tuning"]["ours"]
    assert t["trials_in_log"] == 4 and t["seconds_per_trial"] > 0
    assert w["tuning"]["tvm"] == {"unavailable": "disabled (--no-tvm)"}
    md = (out / "suite.md").read_text()
    assert "| workload [unit] | ours | numpy | PyTorch | ours / best peer | our tuning s/trial |" \
        in md
    assert "| matmul(64, 64, 64) [GFLOPS] |" in md
    assert (out / "logs" / "ours" / "matmul_64x64x64.json").is_file()
    # A second run resumes the complete log: nothing is tuned again.
    assert S.main(argv[:argv.index("--rounds")] + ["--rounds", "1", "--no-tvm", "--no-compile",
                                                    "--repeat", "1", "--min-repeat-ms", "1",
                                                    "--warmup", "0", "--out", str(out), "-q"]) == 0
    again = json.loads((out / "suite.json").read_text())["workloads"]["matmul_64x64x64"]
    assert again["tuning"]["ours"]["this_run_trials"] == 0
    assert again["tuning"]["ours"]["sessions"] == 1
    # The tuning curve comes from the same log (complete: nothing is tuned).
    assert S.main(argv[:argv.index("--rounds")] + ["--curve", "--no-tvm", "--out", str(out),
                                                    "-q"]) == 0
    curve = json.loads((out / "curve_matmul_64x64x64.json").read_text())
    ours = curve["curves"]["ours"]
    assert ours["trials"] == [1, 2, 3, 4] and len(ours["seconds"]) == 4
    assert ours["seconds"] == sorted(ours["seconds"]) and ours["seconds"][-1] > 0
    assert all(g > 0 for g in ours["best_gflops"] if g is not None)
    assert curve["curves"]["tvm"] == {"unavailable": "disabled (--no-tvm)"}


# ---- TVM (only where it is installed) ----------------------------------------------------------------

def test_tvm_formulations_match_the_reference() -> None:
    tvm = pytest.importorskip("tvm")
    from ansor.bench import peers_tvm

    for name in PEER_WORKLOADS:
        args, inputs, ref = _small(name)
        mod, target = peers_tvm._module_and_target({"workload": name, "args": args,
                                                    "mcpu": "generic", "threads": 1})
        lib = tvm.compile(mod, target=target)
        dev = tvm.cpu()
        arrays = [tvm.runtime.tensor(x, dev) for x in inputs] + \
            [tvm.runtime.tensor(np.zeros(ref.shape, ref.dtype), dev)]
        lib["main"](*arrays)
        assert S.check_output(arrays[-1].numpy(), ref) is None, name


def test_tvm_peer_reports_unavailable_instead_of_failing(monkeypatch) -> None:
    # A TVM that cannot be imported is a peer that is "unavailable", never a suite failure.
    monkeypatch.setitem(sys.modules, "tvm", None)
    from ansor.bench import peers_tvm

    results = []
    monkeypatch.setattr(peers_tvm.timing, "emit_result", results.append)
    assert peers_tvm.main([json.dumps({"job": "probe"})]) == 0
    assert results[0]["unavailable"].startswith("TVM not importable")


# ---- benchmarks/inspect_best.py: the first look at a slow kernel ----------------------------------



def _inspect_module():
    return benchmark_module("inspect_best")


def test_inspect_best_counts_instruction_classes_and_finds_the_fma_loop() -> None:
    ib = _inspect_module()
    asm = "\n".join([
        "f:", "\tvmovss\t(%rdi), %xmm0", "\tvmovups\t%zmm1, 64(%rsp)",
        ".LBB0_1:", "\tvbroadcastss\t(%rsi), %zmm2", "\tvfmadd231ps\t(%rdx), %zmm2, %zmm3",
        "\tvfmadd231ps\t64(%rdx), %zmm2, %zmm4", "\taddq\t$4, %rsi", "\tjne\t.LBB0_1",
        ".LBB0_2:", "\tvaddss\t%xmm0, %xmm1, %xmm1", "\tvgatherdps\t(%rax,%zmm5,4), %zmm6 {%k1}",
        "\tjne\t.LBB0_2", "\tcall\tomp_fn"])
    c = ib.summarize_asm(asm)
    assert c["fma zmm"] == 2 and c["broadcast"] == 1 and c["gather"] == 1
    assert c["mul/add scalar"] == 1 and c["call"] == 1 and c["stack spill/reload"] == 1
    assert c["scalar load/store"] == 1 and c["instructions"] == 11
    hot = ib.hottest_block(asm)
    assert hot.count("vfmadd231ps") == 2 and "vgatherdps" not in hot
    assert ib.hottest_block("f:\n\tret") == "(no loop found)"


def test_inspect_best_on_a_log_prints_state_and_assembly(tmp_path, capsys) -> None:
    from ansor.hand_schedules import gemm_schedule
    from ansor.records import RecordToFile
    from ansor.search_task import SearchTask
    from measure.measure import MeasureInput, MeasureResult

    task = SearchTask(func="matmul", args=(256, 256, 256))
    _, state = gemm_schedule(256, 256, 256)
    log = tmp_path / "log.json"
    RecordToFile(log)([MeasureInput(task, state)], [MeasureResult((2e-5,), 0, "", 0.1, 1.7e9)])
    assert _inspect_module().main([str(log), "--asm"]) == 0
    out = capsys.readouterr().out
    assert "=== matmul(256, 256, 256): best of the log 0.020 ms (1677.7 GFLOPS recorded), 1 records" \
        in out
    assert "matmul.local" in out and "vectorize" in out
    summary = next(line for line in out.splitlines() if line.startswith("assembly:"))
    assert "fma" in summary and "gather" not in summary
    assert "vfmadd231ps" in out  # the hottest loop is the FMA micro-kernel


def test_inspect_best_names_a_missing_or_empty_log(tmp_path, capsys) -> None:
    ib = _inspect_module()
    with pytest.raises(SystemExit):
        ib.main([str(tmp_path / "nope.json")])
    assert "no such log file" in capsys.readouterr().err
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert ib.main([str(empty)]) == 0
    assert "no records" in capsys.readouterr().out


# ---- benchmarks/search_ablation.py: default search against SearchParams overrides ------------------

def test_search_ablation_parses_variants_by_field_type() -> None:
    parse = benchmark_module("search_ablation").parse_variant
    assert parse("pack_inputs=false,imperfect_split_prob=0.5,population_size=64") == {
        "pack_inputs": False, "imperfect_split_prob": 0.5, "population_size": 64}
    for bad, why in [("packs=false", "no field 'packs'"), ("pack_inputs=maybe", "true or false"),
                     ("auto_unroll_steps=1", "cannot be set")]:
        with pytest.raises(SystemExit, match=why):
            parse(bad)
    with pytest.raises(ValueError, match="imperfect_split_prob"):
        parse("imperfect_split_prob=2")


# ---- benchmarks/peak_flops.py: the FMA ceiling must fit the host's register file -------------------

@pytest.mark.parametrize("cpu,lanes,registers", [("znver3", 8, 16), ("znver4", 16, 32)])
def test_peak_flops_chains_live_in_registers(cpu, lanes, registers):
    """On an AVX2 core (16 ymm) the old 24 chains spilled to the stack and measured a third of the
    ceiling; the chain count now follows the register file, and the loop has no stack access."""
    import llvmlite.binding as llvm

    pf = benchmark_module("peak_flops")
    chains = pf.chains_for(registers)
    assert chains == registers - pf.SPARE_REGISTERS and chains >= 8

    from measure import target

    target.target_machine()  # initialises LLVM's x86 target
    tm = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
        cpu=cpu, features="", opt=3)

    def spills(n_chains: int) -> int:
        """Stack accesses in the compiled loop (the accumulators that did not fit)."""
        asm = tm.emit_assembly(llvm.parse_assembly(pf._ir(lanes, n_chains)))
        return sum("(%rsp)" in line for line in asm.splitlines())

    assert spills(chains) == 0
    if registers == 16:
        assert spills(24) > 0  # what the old fixed count did on AVX2
