"""Where a saved cost model came from: the machine and toolchain that measured its training
programs, when, how many tasks and programs, how long the data took to make and how the model
scored on tasks it never saw.

A model file is untrusted input (it may come from anywhere), so its provenance is checked field by
field on load - known keys only, bounded strings of printable characters, finite numbers - and
shown with ``describe``; nothing in it is executed or reaches generated code.
"""
from __future__ import annotations

import math
from typing import Any

# key -> (type, what it is). Strings are at most MAX_TEXT printable characters.
FIELDS: dict[str, tuple[type, str]] = {
    "created": (str, "when the model was trained (UTC, ISO 8601)"),
    "cpu": (str, "the CPU that measured the training programs (its marketing name)"),
    "llvm_cpu": (str, "LLVM's name for that CPU (znver3, znver4, ...)"),
    "vector_lanes": (int, "float32 lanes of one of its vector registers"),
    "num_cores": (int, "the cores its kernels ran on"),
    "toolchain": (str, "llvmlite / LLVM versions of the code generator"),
    "tasks": (int, "tasks trained on"),
    "programs": (int, "measured programs trained on"),
    "task_names": (list, "the tasks trained on (workload and arguments)"),
    "heldout_tasks": (list, "tasks held out of training and evaluated on"),
    "heldout_pairwise": (float, "mean pairwise ranking accuracy on the held-out tasks"),
    "heldout_topk": (float, "mean top-5% recall on the held-out tasks"),
    "dataset_seconds": (float, "wall time measuring the training programs"),
    "train_seconds": (float, "wall time training the model"),
    "ansor_py": (str, "the ansor-py version that trained it"),
}
MAX_TEXT = 300
MAX_LIST = 512


def _text(v: Any, where: str) -> str:
    if not isinstance(v, str) or len(v) > MAX_TEXT or not v.isprintable():
        raise ValueError(f"{where}: must be printable text of at most {MAX_TEXT} characters")
    return v


def check_provenance(doc: Any, path: str) -> dict:
    """``doc`` (a model file's ``provenance``) as a checked dict; ValueError naming the file and
    field otherwise. Unknown keys are refused so a typo or a hostile field never passes silently."""
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: 'provenance' must be an object")
    out: dict = {}
    for key, value in doc.items():
        spec = FIELDS.get(key) if isinstance(key, str) else None
        if spec is None:
            shown = key if isinstance(key, str) and key.isprintable() else repr(key)
            raise ValueError(f"{path}: unknown provenance field {shown[:60]!r}")
        kind, _ = spec
        where = f"{path}: provenance.{key}"
        if kind is str:
            out[key] = _text(value, where)
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 40:
                raise ValueError(f"{where}: must be a non-negative integer")
            out[key] = value
        elif kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{where}: must be a finite number")
            out[key] = float(value)
        else:
            if not isinstance(value, list) or len(value) > MAX_LIST:
                raise ValueError(f"{where}: must be a list of at most {MAX_LIST} names")
            out[key] = [_text(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return out


def describe(prov: dict) -> list[str]:
    """One ``label: value`` line per known field, in the table's order (for ``costmodel info``)."""
    lines = []
    for key, (_, what) in FIELDS.items():
        if key not in prov:
            continue
        v = prov[key]
        if isinstance(v, list):
            v = ", ".join(v) if v else "(none)"
        elif isinstance(v, float):
            v = f"{v:.3f}" if key.startswith("heldout") else f"{v:.1f}"
        lines.append(f"{key}: {v}    ({what})")
    return lines
