"""Data types at the model's boundary (issue 42 item 3): float16 and bfloat16 models import and
run, computed in float32 inside and converted at the boundaries (``Graph.io_dtypes``); a Cast to
a half type rounds as onnxruntime does; int64 ids go in and out; export/load keep the dtypes."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from ansor.frontend import from_onnx  # noqa: E402
from ansor.graph import GraphError, run  # noqa: E402
from ansor.graph.executor import compile_network, load_module  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
OPSET = 17


def _model(nodes, inputs, outputs, inits, name="m"):
    return helper.make_model(helper.make_graph(nodes, name, inputs, outputs, inits),
                             opset_imports=[helper.make_opsetid("", OPSET)])


def _ort(model, feeds):
    """onnxruntime's outputs. Its numpy conversion does not know ml_dtypes' bfloat16: bfloat16
    inputs go in as OrtValues, and a bfloat16 output is read through an added Cast to float
    (exact: every bfloat16 is a float32)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for o in m.graph.output:
        if o.type.tensor_type.elem_type == T.BFLOAT16:
            m.graph.node.append(helper.make_node("Cast", [o.name], [o.name + ":f32"], to=T.FLOAT))
            o.name += ":f32"
            o.type.tensor_type.elem_type = T.FLOAT
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {k: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(v.view(np.uint16), T.BFLOAT16)
             if v.dtype == BF16 else ort.OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()}
    return [o.numpy() for o in sess.run_with_ort_values(None, feeds)]


def _rel(out, ref) -> float:
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(out - ref).max() / np.abs(ref).max())


def _conv_net(dtype: int, weights: dict[str, np.ndarray]):
    """conv 3x3 (+ bias) + relu + flatten + gemm, every value in ONNX type ``dtype``."""
    x = helper.make_tensor_value_info("x", dtype, [2, 3, 9, 7])
    y = helper.make_tensor_value_info("y", dtype, [2, 5])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "wd", "bd"], ["y"], transB=1)]
    return _model(nodes, [x], [y], [numpy_helper.from_array(v, k) for k, v in weights.items()])


def _weights(rng, dtype) -> dict[str, np.ndarray]:
    return {"w": rng.standard_normal((4, 3, 3, 3)).astype(dtype), "b": rng.standard_normal(4).astype(dtype),
            "wd": (0.05 * rng.standard_normal((5, 4 * 9 * 7))).astype(dtype),
            "bd": rng.standard_normal(5).astype(dtype)}


def test_float16_model_matches_onnxruntime():
    rng = np.random.default_rng(0)
    w16 = _weights(rng, np.float16)
    model = _conv_net(T.FLOAT16, w16)
    x = rng.standard_normal((2, 3, 9, 7)).astype(np.float16)
    g = from_onnx(model)
    assert g.io_dtypes == {"x": "float16", "y": "float16"} and g.inputs["x"].dtype == "float32"
    assert all(str(c.dtype) == "float32" for c in g.constants.values())
    lib = compile_network(g, verbose=False)
    out = lib.run({"x": x})["y"]
    assert out.dtype == np.float16 and out.shape == (2, 5)
    # onnxruntime in float32 on the same (widened) weights and input: the math is the same
    # float32 math, so the only difference is the rounding of our output to float16, half an
    # ulp = 2**-11 ~ 4.9e-4 of a value: 1e-3 of the output's magnitude bounds it.
    ref32 = _ort(_conv_net(T.FLOAT, {k: v.astype(np.float32) for k, v in w16.items()}),
                 {"x": x.astype(np.float32)})[0]
    assert _rel(out, ref32) < 1e-3
    # onnxruntime's own float16 run rounds inside too (at least its output, maybe each op):
    # a few float16 ulps of the magnitude.
    assert _rel(out, _ort(model, {"x": x})[0]) < 4e-3
    # the numpy interpreter takes and gives the same dtypes, and float32 goes in as well
    ref = run(g, {"x": x})["y"]
    assert ref.dtype == np.float16 and _rel(out, ref) < 1e-3
    assert lib.run({"x": x.astype(np.float32)})["y"].tobytes() == out.tobytes()
    with pytest.raises(GraphError, match=r"input x: expected dtype float16 or float32, got float64"):
        lib.run({"x": x.astype(np.float64)})


def _bf16_net(half: bool, weights: dict[str, np.ndarray]):
    """bfloat16 weights and boundary, float32 math (Cast in, Cast out; a Cast of the activations
    to bfloat16 and back in the middle): onnxruntime runs this on CPU. ``half=False``: the same
    network all float32 without any Cast."""
    dt = T.BFLOAT16 if half else T.FLOAT
    x = helper.make_tensor_value_info("x", dt, [2, 3, 9, 7])
    y = helper.make_tensor_value_info("y", dt, [2, 5])
    cast = (lambda src, dst, to: [helper.make_node("Cast", [src], [dst], to=to)]) if half else \
        (lambda src, dst, to: [helper.make_node("Identity", [src], [dst])])
    nodes = [*cast("x", "xf", T.FLOAT), *cast("w", "wf", T.FLOAT), *cast("b", "bf", T.FLOAT),
             *cast("wd", "wdf", T.FLOAT), *cast("bd", "bdf", T.FLOAT),
             helper.make_node("Conv", ["xf", "wf", "bf"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), *cast("r", "rh", T.BFLOAT16), *cast("rh", "rf", T.FLOAT),
             helper.make_node("Flatten", ["rf"], ["f"]),
             helper.make_node("Gemm", ["f", "wdf", "bdf"], ["yf"], transB=1), *cast("yf", "y", T.BFLOAT16)]
    return _model(nodes, [x], [y], [numpy_helper.from_array(v, k) for k, v in weights.items()])


def test_bfloat16_model_matches_onnxruntime():
    rng = np.random.default_rng(1)
    wb = _weights(rng, BF16)
    model = _bf16_net(True, wb)
    x = rng.standard_normal((2, 3, 9, 7)).astype(BF16)
    g = from_onnx(model)
    assert g.io_dtypes == {"x": "bfloat16", "y": "bfloat16"}
    out = compile_network(g, verbose=False).run({"x": x})["y"]
    assert out.dtype == BF16
    # float32 onnxruntime on the widened weights: bfloat16 keeps 8 bits, so rounding the output
    # costs up to 2**-9 ~ 2e-3 of a value and rounding the activations (the Cast in the middle)
    # about as much again: 6e-3 of the output's magnitude.
    ref32 = _ort(_bf16_net(False, {k: v.astype(np.float32) for k, v in wb.items()}),
                 {"x": x.astype(np.float32)})[0]
    assert _rel(out, ref32) < 6e-3
    # onnxruntime's own run rounds at the same two places: one bfloat16 ulp (a float32 sum in
    # another order can round the other way).
    assert _rel(out, _ort(model, {"x": x})[0]) < 8e-3
    assert run(g, {"x": x})["y"].dtype == BF16


@pytest.mark.parametrize("to, np_dtype", [(T.FLOAT16, np.float16), (T.BFLOAT16, BF16)])
def test_cast_to_half_rounds(to, np_dtype):
    """Cast(to=half) then Cast(to=float) inside the graph: the value rounded to half precision,
    as onnxruntime (which really converts) and numpy give it, in the interpreter and compiled;
    on a constant too (folded at import)."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 5, 7)) * np.float32(10.0) ** rng.integers(-3, 4, (3, 5, 7))).astype(np.float32)
    c = numpy_helper.from_array(rng.standard_normal((7,)).astype(np.float32), "c")
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=to), helper.make_node("Cast", ["h"], ["f"], to=T.FLOAT),
             helper.make_node("Cast", ["c"], ["ch"], to=to), helper.make_node("Cast", ["ch"], ["cf"], to=T.FLOAT),
             helper.make_node("Add", ["f", "cf"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [3, 5, 7])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [3, 5, 7])], [c])
    want = x.astype(np_dtype).astype(np.float32) + numpy_helper.to_array(c).astype(np_dtype).astype(np.float32)
    g = from_onnx(model)
    assert not g.io_dtypes
    np.testing.assert_array_equal(_ort(model, {"x": x})[0], want)
    np.testing.assert_array_equal(run(g, {"x": x})["y"], want)
    np.testing.assert_array_equal(compile_network(g, verbose=False).run({"x": x})["y"], want)


def test_cast_to_float16_saturates_beyond_its_range():
    """The documented difference: |x| > 65504 becomes +-65504, not inf (onnx_half)."""
    x = np.array([1e5, -7e4, 65519.0, 3.0], np.float32)
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=T.FLOAT16), helper.make_node("Cast", ["h"], ["y"], to=T.FLOAT)]
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [4])], [])
    got = compile_network(from_onnx(model), verbose=False).run({"x": x})["y"]
    np.testing.assert_array_equal(got, [65504.0, -65504.0, 65504.0, 3.0])


def test_int64_ids_in_and_out():
    rng = np.random.default_rng(3)
    ids = helper.make_tensor_value_info("ids", T.INT64, [2, 5])
    nodes = [helper.make_node("Add", ["ids", "three"], ["z"]), helper.make_node("Cast", ["ids"], ["c"], to=T.FLOAT),
             helper.make_node("Mul", ["c", "scale"], ["y"])]
    model = _model(nodes, [ids], [helper.make_tensor_value_info("y", T.FLOAT, [2, 5]),
                                  helper.make_tensor_value_info("z", T.INT64, [2, 5])],
                   [numpy_helper.from_array(np.array(3, np.int64), "three"),
                    numpy_helper.from_array(np.float32(0.5) * np.ones(5, np.float32), "scale")])
    x = rng.integers(-2**40, 2**40, (2, 5)).astype(np.int64)
    out = compile_network(from_onnx(model), verbose=False).run({"ids": x})
    y, z = _ort(model, {"ids": x})
    assert out["z"].dtype == np.int64 and np.array_equal(out["z"], z)
    assert out["y"].dtype == np.float32 and np.array_equal(out["y"], y)


def test_export_and_load_keep_the_boundary_dtypes(tmp_path):
    rng = np.random.default_rng(4)
    model = _conv_net(T.FLOAT16, _weights(rng, np.float16))
    x = rng.standard_normal((2, 3, 9, 7)).astype(np.float16)
    lib = compile_network(from_onnx(model), verbose=False)
    loaded = load_module(lib.export(tmp_path / "mod"))
    assert loaded.io_dtypes == {"x": "float16", "y": "float16"}
    out = loaded.run({"x": x})["y"]
    assert out.dtype == np.float16 and out.tobytes() == lib.run({"x": x})["y"].tobytes()


def test_a_hostile_io_dtypes_entry_is_refused(tmp_path):
    import json

    rng = np.random.default_rng(5)
    lib = compile_network(from_onnx(_conv_net(T.FLOAT16, _weights(rng, np.float16))), verbose=False)
    path = lib.export(tmp_path / "mod")
    meta = json.loads((path / "module.json").read_text())
    meta["io_dtypes"] = {"x": "object"}
    (path / "module.json").write_text(json.dumps(meta))
    with pytest.raises(GraphError, match=r"bad io_dtypes entry 'x': 'object'"):
        load_module(path)


def test_io_dtypes_are_checked_on_the_graph():
    from ansor.graph import GraphBuilder

    b = GraphBuilder()
    x = b.input("x", (2,), "int64")
    with pytest.raises(GraphError, match=r"io_dtypes: x is int64"):
        b.build(b.add_node("identity", [x], {}, "y"), {"x": "float16"})
    with pytest.raises(GraphError, match=r"io_dtypes: nope is not a graph input or output"):
        b.build(b.add_node("identity", [x], {}, "y2"), {"nope": "float16"})


def test_onnx_export_keeps_the_boundary():
    """The exported model takes and gives float16 as the original did (Casts at the boundary)."""
    from ansor.graph import to_onnx

    rng = np.random.default_rng(6)
    model = _conv_net(T.FLOAT16, _weights(rng, np.float16))
    g = from_onnx(model)
    exported = to_onnx(g)
    assert exported.graph.input[0].type.tensor_type.elem_type == T.FLOAT16
    assert exported.graph.output[0].type.tensor_type.elem_type == T.FLOAT16
    x = rng.standard_normal((2, 3, 9, 7)).astype(np.float16)
    got = _ort(exported, {"input_0": x})[0]
    assert got.dtype == np.float16 and _rel(got, run(g, {"x": x})["y"]) < 1e-3
