"""Size limits of the library, checked on every test run: no file over 500 lines, no class over 300.

A file or class that outgrows them is several concepts in one (issue 41: code generation was one
class assembled from seven mixins, ~1,000 lines calling each other through ``self``). Every library
package is covered, the ones a test of their own does not mention too. A class's size is its
source span over the syntax tree, decorators and docstring included; a file's is its line count.
``classes_over`` and ``files_over`` are the reusable part: any glob of files, any limit.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("compute", "sketch", "measure", "cost_model", "ansor")
MAX_FILE_LINES = 500
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


def files_over(path_glob: str, limit: int, root: pathlib.Path = ROOT) -> list[str]:
    """``path (n lines)`` for every file matching ``path_glob`` longer than ``limit`` lines."""
    return [f"{p.relative_to(root)} ({n} lines)" for p in sorted(root.glob(path_glob))
            if (n := len(p.read_text().splitlines())) > limit]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_file_over_the_limit(package: str) -> None:
    found = files_over(f"{package}/**/*.py", MAX_FILE_LINES)
    assert not found, (f"files over {MAX_FILE_LINES} lines (split them, one concept per file):\n"
                       + "\n".join(found))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_class_over_the_limit(package: str) -> None:
    found = classes_over(f"{package}/**/*.py", MAX_CLASS_LINES)
    assert not found, (f"classes over {MAX_CLASS_LINES} lines (split them into collaborators):\n"
                       + "\n".join(found))


def test_every_library_file_is_covered() -> None:
    # The globs reach the nested packages (measure/codegen, ansor/graph, ansor/cli, ansor/bench...).
    covered = {p for pkg in PACKAGES for p in ROOT.glob(f"{pkg}/**/*.py")}
    assert ROOT / "measure" / "codegen" / "__init__.py" in covered
    assert ROOT / "ansor" / "graph" / "executor.py" in covered
    assert ROOT / "ansor" / "graph" / "layout_tuning.py" in covered


def test_the_checks_find_a_long_class_and_file(tmp_path: pathlib.Path) -> None:
    # The checks must be able to fail: a 6-line class is over a limit of 5, a 5-line one is not.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "@dataclass\nclass Long:\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n\n"
        "class Short:\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n")
    assert classes_over("pkg/*.py", 5, tmp_path) == ["pkg/m.py:2: Long (6 lines)"]
    assert classes_over("pkg/*.py", 6, tmp_path) == []
    assert classes_over("nothing/*.py", 1, tmp_path) == []
    assert files_over("pkg/*.py", 11, tmp_path) == ["pkg/m.py (12 lines)"]
    assert files_over("pkg/*.py", 12, tmp_path) == []
