"""The user documentation stays true to the code: the README's supported-operators section is
``ansor network ops --markdown`` (an operator added without regenerating it fails here), the
README's test command is the one CI runs, and every relative link of the README,
``benchmarks/README.md`` and ``docs/`` names a file (and heading) that exists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansor.cli.network_ops import REGENERATE, operator_groups, readme_section, render_markdown

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_operator_section_is_generated():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = readme_section(text, "README.md")
    want = "\n" + render_markdown(*operator_groups())
    assert text[start:end] == want, (
        f"README.md's supported-operators section differs from `ansor network ops --markdown`: "
        f"run `{REGENERATE}` from the repository root")


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = 'python -m pytest -m "not slow" -q'
    assert f"pip install -e '.[test]' && {command}" in readme
    assert "pip install -q -e '.[test]'" in ci and f"\n{command}\n" in ci


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    text = doc.read_text(encoding="utf-8")
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            bad.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            bad.append(f"{target}: no heading with that anchor")
    assert not bad, f"{doc.relative_to(ROOT)}: " + "; ".join(bad)
