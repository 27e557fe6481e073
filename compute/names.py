"""The one rule for user-given names (tensors, axes, ops, workloads, cache scopes) and its checks.

Names travel into records, printed DAGs, tables and (sanitised) into generated code, and a record
file is untrusted input: a name holding a newline, quotes or control characters could break any of
those. So a name is *identifier-like*: it starts with an ASCII letter or ``_``, continues with
ASCII letters, digits, ``_``, ``.`` or ``-``, and has at most ``MAX_NAME_LEN`` characters. The
Python API and every reader of serialised DAGs and records enforce the same rule, so whatever a
program can write, a reader accepts. Names made by the scheduler (``C.rf``, ``k.0``, ``C.local``)
follow it too.

Free text that is only shown (a task's ``desc``) must be printable (no newline, escape or other
control character) and at most ``MAX_DESC_LEN`` characters.
"""
from __future__ import annotations

import math
import re
from typing import Any

MAX_NAME_LEN = 128
MAX_DESC_LEN = 256
NAME_RULE = ("an ASCII letter or '_' followed by ASCII letters, digits, '_', '.' or '-', "
             f"at most {MAX_NAME_LEN} characters")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
# attrs are shown and stored, never interpreted by the compiler; bound their shape anyway.
_MAX_ATTR_DEPTH = 4
_MAX_ATTR_ITEMS = 1024


def is_valid_name(name: object) -> bool:
    return (isinstance(name, str) and 0 < len(name) <= MAX_NAME_LEN
            and _NAME_RE.match(name) is not None)


def _show(value: object) -> str:
    """``repr`` cut to a readable length: the offending value goes into error messages."""
    r = repr(value)
    return r if len(r) <= 80 else r[:77] + "..."


def check_name(name: object, what: str) -> str:
    """``name`` if it follows the rule, else ValueError/TypeError naming ``what`` and the value."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a string, got {type(name).__name__} {_show(name)}")
    if not is_valid_name(name):
        raise ValueError(f"{what} {_show(name)} is not a valid name: use {NAME_RULE}")
    return name


def check_tag(tag: object, what: str) -> str:
    """A compute's tag: empty or a name."""
    if tag == "":
        return ""
    return check_name(tag, what)


def check_desc(desc: object, what: str) -> str:
    """Display-only free text: printable, bounded."""
    if not isinstance(desc, str):
        raise TypeError(f"{what} must be a string, got {type(desc).__name__}")
    if len(desc) > MAX_DESC_LEN:
        raise ValueError(f"{what} has {len(desc)} characters, more than {MAX_DESC_LEN}")
    if not desc.isprintable():
        raise ValueError(f"{what} {_show(desc)} contains a newline or another non-printable "
                         "character")
    return desc


def printable(text: str, limit: int = MAX_DESC_LEN) -> str:
    """``text`` for a terminal: itself if printable and short, else its escaped ``repr``."""
    if text.isprintable() and len(text) <= limit:
        return text
    return _show(text[:limit])


def check_attrs(attrs: object, what: str) -> dict:
    """A compute's attrs: name keys; values numbers, bools, printable strings, None or lists."""
    if not isinstance(attrs, dict):
        raise TypeError(f"{what} must be a dict, got {type(attrs).__name__}")
    count = [0]

    def value(v: Any, where: str, depth: int) -> None:
        count[0] += 1
        if count[0] > _MAX_ATTR_ITEMS:
            raise ValueError(f"{what} holds more than {_MAX_ATTR_ITEMS} values")
        if v is None or isinstance(v, (bool, int)):
            return
        if isinstance(v, float):
            if not math.isfinite(v):
                raise ValueError(f"{where} = {v!r} is not finite")
            return
        if isinstance(v, str):
            check_desc(v, where)
            return
        if isinstance(v, (list, tuple)):
            if depth >= _MAX_ATTR_DEPTH:
                raise ValueError(f"{where} is nested deeper than {_MAX_ATTR_DEPTH} levels")
            for k, x in enumerate(v):
                value(x, f"{where}[{k}]", depth + 1)
            return
        raise TypeError(f"{where} has a value of type {type(v).__name__}: attrs hold numbers, "
                        "bools, strings, None and lists of them")

    for key, v in attrs.items():
        check_name(key, f"{what} key")
        value(v, f"{what}[{key!r}]", 0)
    return attrs


def check_dag_json_names(data: object) -> None:
    """Check every name, tag and attrs of a serialised DAG (``compute_dag.to_json``'s output)
    before anything is built from it; ValueError/TypeError names the field, e.g.
    ``dag.ops[1].reduce_axis_names[0]``. Structure beyond names is checked by the rebuild."""
    if not isinstance(data, dict):
        raise TypeError(f"dag must be an object, got {type(data).__name__}")
    ops = data.get("ops")
    if not isinstance(ops, list):
        raise TypeError("dag.ops must be a list")
    for k, d in enumerate(ops):
        where = f"dag.ops[{k}]"
        if not isinstance(d, dict):
            raise TypeError(f"{where} must be an object, got {type(d).__name__}")
        kind = d.get("kind")
        if kind not in ("placeholder", "compute"):
            raise ValueError(f"{where}.kind {_show(kind)} is neither 'placeholder' nor 'compute'")
        if "name" in d:
            check_name(d["name"], f"{where}.name")
        if kind == "placeholder":
            continue
        for field in ("axis_names", "reduce_axis_names"):
            names = d.get(field)
            if names is None:
                continue
            if not isinstance(names, list):
                raise TypeError(f"{where}.{field} must be a list, got {type(names).__name__}")
            for j, n in enumerate(names):
                check_name(n, f"{where}.{field}[{j}]")
        check_tag(d.get("tag", ""), f"{where}.tag")
        if d.get("attrs") is not None:
            check_attrs(d["attrs"], f"{where}.attrs")
