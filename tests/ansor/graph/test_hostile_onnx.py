"""Hostile ONNX models (issue 40): each gives one ``OnnxImportError`` naming the node, its op and
the problem, and through the command line one ``ansor: ...`` line with exit status 2 - never a
bare KeyError/ZeroDivisionError/IndexError, a traceback or a silently accepted model that
onnxruntime would reject."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ansor.cli
from ansor.frontend import from_onnx
from ansor.frontend import onnx_importer
from ansor.frontend.onnx import OnnxImportError

from .onnx_util import make_model, rand

mk = helper.make_node
X4 = {"x": rand(1, 3, 8, 8)}


def _neg_dims_initializer():
    model = make_model([mk("Add", ["x", "b"], ["y"], name="ad")], {"x": rand(1, 4)})
    init = numpy_helper.from_array(np.ones(4, np.float32), "b")
    init.dims[:] = [-4]
    model.graph.initializer.append(init)
    return model


def _no_output_node():
    # An unnamed node without outputs: the error formatter itself used to raise IndexError.
    return make_model([mk("Relu", ["x"], []), mk("Relu", ["x"], ["y"])], {"x": rand(1, 3)})


# (case, model builder, the message it must give). Each was a crash or a silent accept before.
CASES = [
    ("maxpool without kernel_shape", lambda: make_model([mk("MaxPool", ["x"], ["y"], name="mp")], X4),
     r"node mp \(MaxPool\): .*kernel_shape.* missing"),
    ("concat without axis", lambda: make_model([mk("Concat", ["x", "x"], ["y"], name="cc")], X4),
     r"node cc \(Concat\): .*axis.* missing"),
    ("lrn without size", lambda: make_model([mk("LRN", ["x"], ["y"], name="lrn")], X4),
     r"node lrn \(LRN\): .*size.* missing"),
    ("zero stride with SAME padding",
     lambda: make_model([mk("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2], strides=[0, 0],
                            auto_pad="SAME_UPPER")], X4),
     r"node mp \(MaxPool\): .*strides.*positive"),
    ("zero stride conv",
     lambda: make_model([mk("Conv", ["x", "w"], ["y"], name="cv", strides=[0, 0], auto_pad="SAME_UPPER")], X4,
                        {"w": rand(2, 3, 3, 3)}),
     r"node cv \(Conv\): .*strides.*positive"),
    ("empty input name", lambda: make_model([mk("Relu", [""], ["y"], name="r")], {"x": rand(1, 3)}),
     r"node r \(Relu\): .*input 0.*empty"),
    ("node with no output", _no_output_node, r"node '#0' \(Relu\): .*output"),
    ("softmax axis 7 on rank 2", lambda: make_model([mk("Softmax", ["x"], ["y"], name="sm", axis=7)],
                                                    {"x": rand(2, 3)}),
     r"node sm \(Softmax\): .*axis.*7"),
    ("concat axis 5 on rank 4", lambda: make_model([mk("Concat", ["x", "x"], ["y"], name="cc", axis=5)], X4),
     r"node cc \(Concat\): .*axis"),
    ("initializer dims -4", _neg_dims_initializer, r"initializer b has negative dims \[-4\]"),
    ("opset 10**6", lambda: make_model([mk("Relu", ["x"], ["y"])], {"x": rand(1, 3)}, opset=10**6),
     r"opset 1000000; the opsets defined .* are 1 to \d+"),
    ("float64 weight on a float32 conv",
     lambda: make_model([mk("Conv", ["x", "w"], ["y"], name="cv")], X4, {"w": rand(2, 3, 3, 3).astype(np.float64)}),
     r"node cv \(Conv\): .*(double|float64)"),
]


@pytest.mark.parametrize("case,build,msg", CASES, ids=[c[0] for c in CASES])
def test_hostile_model_names_node_op_and_problem(case, build, msg):
    with pytest.raises(OnnxImportError, match=msg):
        from_onnx(build())


# The op rules' own checks, under the ONNX checker: the same models with validation skipped
# still give an OnnxImportError naming the node and op (a rule never crashes on a bad node).
RULE_CASES = [
    ("maxpool without kernel_shape", r"node mp \(MaxPool\): required attribute kernel_shape is missing"),
    ("concat without axis", r"node cc \(Concat\): required attribute axis is missing"),
    ("lrn without size", r"node lrn \(LRN\): required attribute size"),
    ("zero stride with SAME padding", r"node mp \(MaxPool\): strides \[0, 0\] must be 2 positive integers"),
    ("zero stride conv", r"node cv \(Conv\): strides \[0, 0\] must be 2 positive integers"),
    ("softmax axis 7 on rank 2", r"node sm \(Softmax\): Softmax axis 7 is out of range \[-2, 1\]"),
    ("concat axis 5 on rank 4", r"node cc \(Concat\): Concat axis 5 is out of range \[-4, 3\]"),
    ("float64 weight on a float32 conv", r"node cv \(Conv\): the weight is float64 but the input is float32"),
    ("empty input name", r"node r \(Relu\): "),
    ("node with no output", r"node '#0' \(Relu\): "),
]


@pytest.mark.parametrize("case,msg", RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_op_rules_check_without_the_onnx_checker(monkeypatch, case, msg):
    monkeypatch.setattr(onnx_importer, "validate_model", lambda model, where: None)
    build = next(b for c, b, _ in CASES if c == case)
    with pytest.raises(OnnxImportError, match=msg):
        from_onnx(build())


def test_out_of_range_axes_of_folded_shape_ops(monkeypatch):
    # Constant chains (folded at import) used to wrap axes with `% rank` and let numpy index past
    # the end; shape inference does not see every computed value: the fold rules check them too.
    monkeypatch.setattr(onnx_importer, "validate_model", lambda model, where: None)
    shape = np.array([2, 3], np.int64)
    for node, opset, why in (
            (mk("Unsqueeze", ["s", "ax"], ["u"], name="uq"), 13,
             r"node uq \(Unsqueeze\): Unsqueeze axis 5 is out of range \[-2, 1\]"),
            (mk("Gather", ["s", "idx"], ["u"], name="ga", axis=0), 13,
             r"node ga \(Gather\): Gather indices must be in \[-2, 1\]")):
        inits = {"s": shape, "ax": np.array([5], np.int64), "idx": np.array([7], np.int64)}
        model = make_model([node, mk("Cast", ["u"], ["v"], to=TensorProto.FLOAT), mk("Add", ["x", "v"], ["y"])],
                           {"x": rand(1)}, inits, opset=opset)
        with pytest.raises(OnnxImportError, match=why):
            from_onnx(model)


@pytest.mark.parametrize("case,build,msg", CASES[:3] + CASES[5:7] + CASES[9:11],
                         ids=[c[0] for c in CASES[:3] + CASES[5:7] + CASES[9:11]])
def test_cli_prints_one_line_exit_2(tmp_path, capsys, case, build, msg):
    path = tmp_path / "hostile.onnx"
    path.write_bytes(build().SerializeToString())
    for cmd in ("tasks", "run"):
        assert ansor.cli.main(["network", cmd, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"ansor: {path}: ") and "Traceback" not in err, err
