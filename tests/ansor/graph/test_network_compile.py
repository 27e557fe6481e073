"""Compile and run whole networks (issue 16 item 4): outputs match the numpy graph reference,
untuned tasks are named (strict mode fails), bad inputs name the input, buffers are reused, and
an exported module runs in a fresh process without the graph or records."""
import subprocess
import sys

import numpy as np
import pytest

import ansor
from ansor.graph import GraphBuilder, GraphError, run


def _inputs(g, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in g.inputs.items()}


def _check(g, rtol=1e-4):
    lib = ansor.compile_network(g, verbose=False)
    x = _inputs(g)
    out, ref = lib.run(x), run(g, x)
    for k in ref:
        scale = np.abs(ref[k]).max()
        np.testing.assert_allclose(out[k], ref[k], rtol=0, atol=rtol * scale)
    return lib


@pytest.mark.parametrize("name, kwargs", [("resnet-18", {"image_size": 32}),
                                          ("efficientnet-b0", {"image_size": 32}),
                                          ("bert-base-layer", {"seq_len": 8})])
def test_zoo_network_matches_reference(name, kwargs):
    _check(ansor.networks.get(name, **kwargs))


@pytest.mark.slow
@pytest.mark.parametrize("name, kwargs", [("resnet-50", {"image_size": 64}), ("mobilenet-v2", {"image_size": 64})])
def test_zoo_network_matches_reference_slow(name, kwargs):
    _check(ansor.networks.get(name, **kwargs))


def _small():
    b = GraphBuilder("small")
    x = b.input("x", (1, 9, 9, 4))
    w = b.constant(np.random.default_rng(1).standard_normal((3, 3, 4, 8)).astype(np.float32), "w")
    y = b.relu(b.conv2d(x, w, padding=1, name="conv"))
    y = b.avg_pool2d(y, 3, strides=2, padding=1, ceil_mode=True)
    y = b.softmax(b.reshape(y, (1, 5 * 5 * 8)), axis=1)
    return b.build(y)


def test_ops_with_derived_constants_and_softmax_match():
    _check(_small())


def test_untuned_tasks_are_named_and_strict_fails(capsys):
    g = _small()
    ansor.compile_network(g)
    err = capsys.readouterr().err
    assert "no tuning record" in err and "conv2d+relu" in err and "FLOPs share" in err
    with pytest.raises(ansor.UntunedTaskError, match="conv2d"):
        ansor.compile_network(g, strict=True)


def test_run_input_errors_name_the_input():
    g = _small()
    lib = ansor.compile_network(g, verbose=False)
    x = np.zeros((1, 9, 9, 4), np.float32)
    with pytest.raises(GraphError, match="unknown input name.*'?y'?.*inputs: x"):
        lib.run({"y": x})
    with pytest.raises(GraphError, match="input x: expected shape"):
        lib.run({"x": x[:, :8]})
    with pytest.raises(GraphError, match="input x: expected dtype float32, got float64"):
        lib.run({"x": x.astype(np.float64)})
    with pytest.raises(GraphError, match="missing input"):
        lib.run({})


def test_every_buffer_starts_on_a_cache_line():
    # The tuner times kernels on 64-byte-aligned arguments; inputs, intermediates and constants
    # (weights handed in as numpy arrays, which numpy aligns to 16 bytes only) are placed the same.
    from measure.buffers import is_aligned

    lib = _check(ansor.networks.get("resnet-18", image_size=32))
    kinds = {s[0] for s in lib._specs}
    assert {"input", "alloc", "const"} <= kinds
    assert all(is_aligned(b) for b in lib._buffers)


def test_intermediate_buffers_are_reused():
    b = GraphBuilder()
    x = b.input("x", (64,))
    y = x
    for i in range(6):
        y = b.softmax(b.reshape(y, (8, 8)), axis=1)  # opaque: one kernel each
        y = b.reshape(y, (64,))
    g = b.build(y)
    lib = _check(g)
    allocs = [s for s in lib._specs if s[0] == "alloc"]
    assert len(allocs) < len(lib._steps) - 1


def test_export_load_in_a_fresh_process(tmp_path):
    g = ansor.networks.get("resnet-18", image_size=32)
    lib = ansor.compile_network(g, verbose=False)
    x = _inputs(g)
    np.save(tmp_path / "x.npy", x["data"])
    np.save(tmp_path / "y.npy", lib.run(x)["fc_bias"])
    lib.export(tmp_path / "mod")
    code = ("import numpy as np, ansor, sys; p = sys.argv[1]; lib = ansor.load_module(p + '/mod');"
            "y = lib.run({'data': np.load(p + '/x.npy')})['fc_bias'];"
            "assert np.array_equal(y, np.load(p + '/y.npy')), 'differs'; print('ok')")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_load_module_rejects_other_files(tmp_path):
    (tmp_path / "module.json").write_text("{not json")
    with pytest.raises(GraphError, match="module.json: not a compiled network module"):
        ansor.load_module(tmp_path)
    with pytest.raises(FileNotFoundError, match="no module.json"):
        ansor.load_module(tmp_path / "nowhere")


def test_reshape_groups_are_views_not_kernels(tmp_path):
    """A reshape alone in a group runs no kernel: its readers view its input's buffer (of a graph
    input, of an intermediate, through a transpose's reader); a reshaped graph output still
    comes back as its own array, and the exported module agrees."""
    rng = np.random.default_rng(2)
    b = GraphBuilder("views")
    x = b.input("x", (1, 8, 16))
    t = b.reshape(x, (8, 16), name="tokens")  # a view of the input
    h = b.dense(t, rng.standard_normal((16, 16)).astype(np.float32), name="proj")
    heads = b.transpose(b.reshape(h, (8, 4, 4), name="split"), (1, 0, 2), name="heads")  # a real copy
    s = b.softmax(b.reshape(heads, (4, 32), name="flat"), axis=1)  # a view of an intermediate
    y = b.reshape(s, (1, 128), name="out")  # a graph output: its own buffer
    z = b.reshape(h, (128,), name="h_flat")  # a second output viewing a live intermediate
    g = b.build([y, z])
    lib = _check(g)
    names = [st.name for st in lib._steps]
    assert "tokens" not in names and "flat" not in names and "h_flat" not in names, names
    assert any("heads" in n for n in names) and "proj" in names
    x0 = _inputs(g)
    a = lib.run(x0)
    assert not np.shares_memory(a["out"], a["h_flat"])
    lib.export(tmp_path / "mod")
    b2 = ansor.load_module(tmp_path / "mod").run(x0)
    for k in a:
        np.testing.assert_array_equal(a[k], b2[k])


def test_a_view_is_neither_a_kernel_nor_an_uncosted_step(tmp_path):
    from ansor.graph.network_estimate import estimate_network
    from ansor.graph.plan import is_view, plan_network

    b = GraphBuilder("views2")
    x = b.input("x", (1, 8, 16))
    h = b.dense(b.reshape(x, (8, 16), name="tokens"), np.eye(16, dtype=np.float32), name="proj")
    g = b.build(b.relu(b.transpose(h, (1, 0), name="t"), name="r"))
    plan = plan_network(g)
    views = [o.group.name for i, o in enumerate(plan.occurrences) if is_view(plan, i)]
    assert views == ["tokens"]
    log = tmp_path / "empty.json"
    log.write_text("")
    est = estimate_network(plan, log)
    assert est.kernels == 1 and est.uncosted == 1  # the transpose+relu runs a kernel; the view none
