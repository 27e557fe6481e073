"""Size limits of the code, checked on every test run: no class over 300 lines.

A class that outgrows that is several concepts in one (issue 41: code generation was one class
assembled from seven mixins, ~1,000 lines calling each other through ``self``). The limit is
checked over the syntax trees, so a class's size is its source span, decorators and docstring
included. ``classes_over`` is the reusable part: any glob of files, any limit.
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_CLASS_LINES = 300


def classes_over(path_glob: str, limit: int, root: pathlib.Path = ROOT) -> list[str]:
    """``path:line: Class (n lines)`` for every class (nested ones too) longer than ``limit``
    lines in the files matching ``path_glob`` (relative to ``root``, ``**`` allowed)."""
    out: list[str] = []
    for path in sorted(root.glob(path_glob)):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                n = (node.end_lineno or node.lineno) - first + 1
                if n > limit:
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {node.name} ({n} lines)")
    return out


def test_no_codegen_class_over_the_limit() -> None:
    found = classes_over("measure/codegen/**/*.py", MAX_CLASS_LINES)
    assert not found, (f"classes over {MAX_CLASS_LINES} lines (split them into collaborators):\n"
                       + "\n".join(found))


def test_classes_over_finds_a_long_class(tmp_path: pathlib.Path) -> None:
    # The check must be able to fail: a 6-line class is over a limit of 5, a 5-line one is not.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "@dataclass\nclass Long:\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n\n"
        "class Short:\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n")
    assert classes_over("pkg/*.py", 5, tmp_path) == ["pkg/m.py:2: Long (6 lines)"]
    assert classes_over("pkg/*.py", 6, tmp_path) == []
    assert classes_over("nothing/*.py", 1, tmp_path) == []
