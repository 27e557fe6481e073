"""``ansor network ops`` and ``ansor.frontend.supported_operators`` (issue 42 item 5): the ONNX
op types the importer has a rule for, split into graph operators and op types evaluated at
import; ``--markdown`` and ``--write-readme`` for the README's generated section."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import ansor.frontend.onnx as onnx_frontend
from ansor.cli import main as ansor_main
from ansor.cli.network_ops import BEGIN, END, operator_groups, render_markdown
from ansor.frontend import from_onnx, supported_operators
from ansor.frontend.onnx_fold import FOLD
from ansor.graph import OPS

from .graph.onnx_util import make_model


def test_supported_operators_is_the_importers_table():
    ops = supported_operators()
    assert list(ops) == sorted(ops) == sorted(onnx_frontend._HANDLERS)
    assert set(ops.values()) == {"graph", "constant"}
    for name in ("Conv", "Gemm", "MatMul", "Softmax", "Add", "Reshape"):
        assert ops[name] == "graph", name
    for name in ("ConstantOfShape", "Shape", "Constant"):
        assert ops[name] == "constant", name
    # the rules declared with an operator in ansor/graph/ops/ are graph operators
    declared = {t for d in OPS.values() for t in d.onnx}
    assert declared and all(ops[t] == "graph" for t in declared)
    # an op evaluated at import is one the folder knows how to evaluate
    assert all(t in FOLD for t, kind in ops.items() if kind == "constant")
    assert "NonMaxSuppression" not in ops


def test_the_groups_say_what_an_import_does():
    x = np.zeros((2, 3), np.float32)
    # a "constant" op on a graph input is refused, naming the reason
    fill = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"])], {"s": np.array([2, 3], np.int64)})
    with pytest.raises(Exception, match="evaluated at import"):
        from_onnx(fill)
    # a "graph" op on a graph input imports as a graph operator
    g = from_onnx(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}))
    assert any(n.op == "relu" for n in g.nodes)
    # an op type missing from the list is refused by name
    bad = make_model([helper.make_node("NonMaxSuppression", ["x", "x"], ["y"])], {"x": x})
    assert "NonMaxSuppression" not in supported_operators()
    with pytest.raises(Exception, match="unsupported ONNX operator.*NonMaxSuppression"):
        from_onnx(bad)


def test_cli_lists_both_groups(capsys):
    assert ansor_main(["network", "ops"]) == 0
    out = capsys.readouterr().out
    graph, constant = operator_groups()
    assert out.startswith(f"run as graph operators ({len(graph)}):")
    assert f"evaluated at import to a constant ({len(constant)};" in out
    assert out.splitlines()[1].startswith("  Add, ")


def test_cli_markdown(capsys):
    assert ansor_main(["network", "ops", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out == render_markdown(*operator_groups())
    assert "**Run as graph operators**" in out and "`Conv`" in out and "`Gather`" in out


def test_write_readme_rewrites_only_the_section(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nbefore\n{BEGIN}\nstale list\n{END}\nafter\n")
    assert ansor_main(["network", "ops", "--write-readme", str(readme)]) == 0
    text = readme.read_text()
    assert text == f"# title\n\nbefore\n{BEGIN}\n{render_markdown(*operator_groups())}{END}\nafter\n"
    assert "rewritten" in capsys.readouterr().out
    assert ansor_main(["network", "ops", "--write-readme", str(readme)]) == 0  # idempotent
    assert readme.read_text() == text and "up to date" in capsys.readouterr().out


def test_write_readme_without_markers_is_one_line(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    assert ansor_main(["network", "ops", "--write-readme", str(readme)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ansor: {readme}: needs exactly one {BEGIN}") and err.count("\n") == 1
    assert readme.read_text() == "# no markers\n"


def test_without_onnx_the_command_says_what_to_install(monkeypatch, capsys):
    import ansor.frontend

    def no_onnx():
        raise ImportError("ansor.frontend.onnx needs the onnx package: pip install 'ansor-py[onnx]'")

    monkeypatch.setattr(ansor.frontend, "supported_operators", no_onnx)
    assert ansor_main(["network", "ops"]) == 1
    err = capsys.readouterr().err
    assert err == "ansor network ops: ansor.frontend.onnx needs the onnx package: pip install 'ansor-py[onnx]'\n"
