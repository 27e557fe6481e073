"""``ansor network ops``: the ONNX operators ``from_onnx`` imports, read from the importer's own
rule table (``ansor.frontend.supported_operators``), so the list cannot drift from the code.

Two groups: op types imported as graph operators (the compiled network runs them), and op types
evaluated at import only (constants). ``--markdown`` prints the README's form of the list;
``--write-readme [FILE]`` rewrites that section of FILE in place, between the markers
``<!-- ops:begin -->`` and ``<!-- ops:end -->`` (a test checks the README against this command,
so an operator added without regenerating the section fails it).
"""
from __future__ import annotations

import argparse
import sys
import textwrap

from compute.errors import InputError

BEGIN = "<!-- ops:begin -->"
END = "<!-- ops:end -->"
REGENERATE = "ansor network ops --write-readme README.md"
_WIDTH = 100


def operator_groups() -> tuple[list[str], list[str]]:
    """(graph operators, evaluated at import), each sorted. Needs the onnx package."""
    from ansor.frontend import supported_operators  # noqa: PLC0415 - onnx is optional

    ops = supported_operators()
    return ([op for op, kind in ops.items() if kind == "graph"],
            [op for op, kind in ops.items() if kind == "constant"])


def _constant_note(constant: list[str]) -> str:
    return "its inputs must be constants" + (", `Shape`'s excepted since shapes are static"
                                             if "Shape" in constant else "")


def render_text(graph: list[str], constant: list[str]) -> str:
    """The plain listing: two headed, wrapped groups."""
    out = []
    for head, ops in ((f"run as graph operators ({len(graph)}):", graph),
                      (f"evaluated at import to a constant ({len(constant)}; "
                       f"{_constant_note(constant).replace('`', '')}):", constant)):
        out.append(head)
        out.extend(textwrap.wrap(", ".join(ops), _WIDTH, initial_indent="  ", subsequent_indent="  ",
                                 break_on_hyphens=False))
    return "\n".join(out) + "\n"


def render_markdown(graph: list[str], constant: list[str]) -> str:
    """The README's section: two paragraphs of code-quoted op types, wrapped (Markdown joins the
    lines)."""
    paras = [(f"**Run as graph operators** ({len(graph)}): ", graph),
             (f"**Evaluated at import** ({len(constant)}; each becomes a constant and never runs, so "
              f"{_constant_note(constant)}): ", constant)]
    out = []
    for head, ops in paras:
        body = head + ", ".join(f"`{op}`" for op in ops) + "."
        out.append("\n".join(textwrap.wrap(body, _WIDTH, break_on_hyphens=False, break_long_words=False)))
    return "\n\n".join(out) + "\n"


def readme_section(text: str, where: str) -> tuple[int, int]:
    """The (start, end) offsets of the text between the markers in ``text``; InputError naming
    ``where`` when they are missing, repeated or out of order."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise InputError(f"{where}: needs exactly one {BEGIN} line and one {END} line around the "
                         f"supported-operators section")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    if end < start:
        raise InputError(f"{where}: {END} comes before {BEGIN}")
    return start, end


def with_section(text: str, section: str, where: str) -> str:
    """``text`` with the part between the markers replaced by ``section``."""
    start, end = readme_section(text, where)
    return text[:start] + "\n" + section + text[end:]


def _cmd_ops(args: argparse.Namespace) -> int:
    try:
        graph, constant = operator_groups()
    except ImportError as err:  # the onnx extra is not installed
        print(f"ansor network ops: {err}", file=sys.stderr)
        return 1
    if args.write_readme is None:
        sys.stdout.write(render_markdown(graph, constant) if args.markdown else render_text(graph, constant))
        return 0
    path = args.write_readme
    with open(path, encoding="utf-8") as f:
        old = f.read()
    new = with_section(old, render_markdown(graph, constant), path)
    if new == old:
        print(f"{path}: the supported-operators section is up to date ({len(graph) + len(constant)} op types)")
        return 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)
    print(f"{path}: supported-operators section rewritten ({len(graph)} graph, {len(constant)} constant)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``ops`` to the ``network`` subcommands."""
    q = sub.add_parser("ops", help="the ONNX operators the importer supports (graph or evaluated at import)")
    q.add_argument("--markdown", action="store_true", help="print the README's form of the list")
    q.add_argument("--write-readme", nargs="?", const="README.md", default=None, metavar="FILE",
                   help=f"rewrite the list between {BEGIN} and {END} in FILE (default README.md)")
    q.set_defaults(func=_cmd_ops)
    return q
