"""Bad ONNX input gets one clear error naming the file, the input or the operators at fault."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

from ansor.frontend import from_onnx
from ansor.frontend.onnx import OnnxImportError

from .onnx_util import make_model, rand

mk = helper.make_node


def _small_model():
    return make_model([mk("Conv", ["x", "w"], ["c"]), mk("Relu", ["c"], ["y"])], {"x": rand(1, 3, 4, 4)},
                      {"w": rand(2, 3, 1, 1)})


def test_not_onnx_file(tmp_path):
    p = tmp_path / "notes.onnx"
    p.write_text("this is a text file, not a model\n" * 20)
    with pytest.raises(OnnxImportError, match=r"notes\.onnx: not a valid ONNX model"):
        from_onnx(p)


def test_truncated_file(tmp_path):
    data = _small_model().SerializeToString()
    for cut in (len(data) // 2, len(data) - 3, 10):
        p = tmp_path / f"cut{cut}.onnx"
        p.write_bytes(data[:cut])
        with pytest.raises(OnnxImportError, match=rf"cut{cut}\.onnx: not a valid ONNX model"):
            from_onnx(str(p))


def test_empty_and_missing_file(tmp_path):
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(OnnxImportError, match=r"empty\.onnx: not a valid ONNX model"):
        from_onnx(tmp_path / "empty.onnx")
    with pytest.raises(OnnxImportError, match=r"nope\.onnx: cannot read the model file"):
        from_onnx(tmp_path / "nope.onnx")


def test_valid_file_imports(tmp_path):
    p = tmp_path / "ok.onnx"
    p.write_bytes(_small_model().SerializeToString())
    assert from_onnx(p).type_of("y").shape == (1, 2, 4, 4)


def test_unsupported_ops_listed_once_with_counts_and_first_node():
    nodes = [mk("Relu", ["x"], ["a"]), mk("Acosh", ["a"], ["b"], name="ac_first"),
             mk("Acosh", ["b"], ["c"], name="ac_second"), mk("Asinh", ["c"], ["d"], name="asinh0"),
             mk("Relu", ["d"], ["y"])]
    with pytest.raises(OnnxImportError) as e:
        from_onnx(make_model(nodes, {"x": rand(2, 3)}, opset=18))
    msg = str(e.value)
    assert "unsupported ONNX operator(s): Acosh x2 (first: ac_first); Asinh x1 (first: asinh0)" in msg


def test_other_domain_is_unsupported():
    node = mk("FusedMatMul", ["x", "x"], ["y"], domain="com.microsoft", name="fm")
    model = make_model([node], {"x": rand(3, 3)})
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(OnnxImportError, match=r"com\.microsoft::FusedMatMul x1 \(first: fm\)"):
        from_onnx(model)


def _dynamic_model():
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([mk("Relu", ["images"], ["y"])], "dyn", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_dynamic_shape_names_input_and_shape_argument():
    with pytest.raises(OnnxImportError, match=r"input 'images' has a dynamic dimension 0 \('batch'\) "
                                              r"\(declared \['batch', 3, 4, 4\]\); give it with "
                                              r"shape=\{'images': \(1, 3, 4, 4\)\} or batch=1$"):
        from_onnx(_dynamic_model())
    g = from_onnx(_dynamic_model(), shape={"images": (2, 3, 4, 4)})
    assert g.inputs["images"].shape == (2, 3, 4, 4)
    assert from_onnx(_dynamic_model(), shape=(5, 3, 4, 4)).inputs["images"].shape == (5, 3, 4, 4)


def test_shape_argument_errors():
    with pytest.raises(OnnxImportError, match=r"shape= names unknown input\(s\) imgs"):
        from_onnx(_dynamic_model(), shape={"imgs": (1, 3, 4, 4)})
    with pytest.raises(OnnxImportError, match=r"gives \[1, 2, 4, 4\] for input images, which the model declares"):
        from_onnx(_dynamic_model(), shape={"images": (1, 2, 4, 4)})


def test_missing_input_shape():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    g = helper.make_graph([mk("Relu", ["x"], ["y"])], "noshape", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(OnnxImportError, match=r"input x has a dynamic or missing shape \(no shape\).*shape="):
        from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def test_external_data_is_refused():
    model = _small_model()
    w = model.graph.initializer[0]
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="/etc/passwd")
    w.ClearField("raw_data")
    w.ClearField("float_data")
    with pytest.raises(OnnxImportError, match="external data"):
        from_onnx(model)


def test_non_constant_conv_weight_names_the_node():
    model = make_model([mk("Conv", ["x", "w"], ["y"], name="conv_dyn")], {"x": rand(1, 3, 4, 4), "w": rand(2, 3, 1, 1)})
    with pytest.raises(OnnxImportError, match=r"node conv_dyn \(Conv\): the weight \(input 1\) must be a constant"):
        from_onnx(model)


def test_hostile_names_are_escaped_when_printed():
    name = "x\n}; import os; os.system('echo pwned') #"
    model = make_model([mk("Relu", [name], ["y\x00z"])], {name: rand(2, 2)}, outputs=("y\x00z",))
    g = from_onnx(model)
    text = str(g)
    assert "\n}; import" not in text and repr(name) in text and "\x00" not in text
    from ansor.graph import run
    np.testing.assert_array_equal(run(g, {name: np.ones((2, 2), np.float32)})["y\x00z"], 1.0)


def test_import_ansor_does_not_import_onnx_and_frontend_says_how_to_install(tmp_path):
    # A fake `onnx` package that fails to import stands in for "onnx is not installed".
    fake = tmp_path / "onnx"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named onnx')\n")
    code = ("import sys, ansor\n"
            "assert 'onnx' not in sys.modules, 'import ansor imported onnx'\n"
            "try:\n"
            "    ansor.frontend.from_onnx('m.onnx')\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install 'ansor-py[onnx]'" in out.stdout


def test_huge_constant_is_refused_before_allocating():
    node = mk("ConstantOfShape", ["shape"], ["c"], name="bomb")
    model = make_model([node, mk("Add", ["x", "c"], ["y"])], {"x": rand(1, 1)},
                       {"shape": np.array([1 << 20, 1 << 20], np.int64)})
    with pytest.raises(OnnxImportError, match=r"node bomb \(ConstantOfShape\): folding it makes a constant of "
                                              r"shape \[1048576, 1048576\]"):
        from_onnx(model)


def test_output_defined_twice():
    model = make_model([mk("Relu", ["x"], ["y"]), mk("Neg", ["x"], ["y"], name="again")], {"x": rand(2, 2)})
    with pytest.raises(OnnxImportError, match=r"node again \(Neg\): output y is already defined"):
        from_onnx(model)


def test_a_graph_rule_error_names_the_onnx_node_once():
    # The graph op's own "node y (gelu): " prefix is dropped: the message names the ONNX node once.
    from onnx import helper as h

    from ansor.frontend.onnx import OnnxImportError, from_onnx

    from .op_check import model_of
    from .onnx_util import rand

    model = model_of([h.make_node("Gelu", ["x"], ["y"], approximate="bad")], {"x": rand(2, 3)}, opset=20)
    with pytest.raises(OnnxImportError) as e:
        from_onnx(model)
    assert str(e.value) == "<ModelProto>: node y (Gelu): approximate must be 'none' or 'tanh', got 'bad'"
