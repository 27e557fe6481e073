"""Run one function of a ``benchmarks/`` script on the library of a given source tree, in a fresh process.

An A/B comparison of two versions of the code (``--trees OLD NEW`` in ``search_round.py`` and
``runtime_sharing.py``) runs the *same* benchmark code, this directory's, on each tree's library:
the fresh interpreter has the tree first on ``sys.path`` (and as ``PYTHONPATH`` and working
directory), this directory second, checks that ``ansor`` really comes from the tree (an installed
copy shadowing it would make both sides measure the same code), calls ``module.function(*args)``
and prints its JSON result as the last line of stdout. Callers alternate the trees over rounds so
that drift in the machine's speed hits both alike.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = """\
import importlib, json, os, sys
tree, here, module, function, args = sys.argv[1:6]
sys.path[:0] = [tree, here]
import ansor
if not os.path.realpath(ansor.__file__).startswith(os.path.realpath(tree) + os.sep):
    sys.exit(f"ansor was imported from {ansor.__file__}, not from the tree {tree}")
print(json.dumps(getattr(importlib.import_module(module), function)(*json.loads(args))))
"""


class TreeRunError(RuntimeError):
    """The function failed (or printed no result) in the tree's process; the message is one line."""


def run_in_tree(tree: str, module: str, function: str, args: Sequence[Any] = (),
                env: dict | None = None, timeout: float | None = None) -> Any:
    """``module.function(*args)`` (a module of this directory; ``args`` JSON values) in a fresh
    interpreter importing the library of ``tree``; its JSON result. ``env``: the environment
    (default this process's), with ``PYTHONPATH`` set to the tree."""
    tree = os.path.abspath(tree)
    full_env = dict(os.environ if env is None else env, PYTHONPATH=tree)
    argv = [sys.executable, "-c", _CHILD, tree, HERE, module, function, json.dumps(list(args))]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=full_env, cwd=tree,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TreeRunError(f"{module}.{function} on {tree} timed out after {timeout:g} s") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()
        why = tail[-1][:300] if tail else f"exit status {proc.returncode}, no output"
        raise TreeRunError(f"{module}.{function} on {tree} failed: {why}")
    return json.loads(lines[-1])


def tree_commit(tree: str) -> str | None:
    """The tree's git commit (``git describe --always --dirty``), or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", tree, "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def check_trees(trees: Sequence[str]) -> list[str]:
    """The trees as absolute paths; exits with a one-line message if one has no ``ansor`` package
    or one is named twice."""
    out = []
    for t in trees:
        if not os.path.isfile(os.path.join(t, "ansor", "__init__.py")):
            sys.exit(f"--trees: {t} is not a source tree of this project (no ansor/__init__.py)")
        out.append(os.path.abspath(t))
    if len(set(map(os.path.realpath, out))) != len(out):
        sys.exit(f"--trees: a tree is named twice: {' '.join(trees)}")
    return out
