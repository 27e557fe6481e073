"""What several ``ansor`` subcommands share: time formatting, ``--import MODULE`` (modules
that register the user's workloads before their records are read) and the up-front ``--log``
check of the tuning commands.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Sequence

from compute.errors import InputError
from compute.memory import check_bytes, nbytes_of
from compute.tensor import ComputeOp


def fmt_time(sec: float) -> str:
    if sec >= 1:
        return f"{sec:.2f} s"
    if sec >= 1e-3:
        return f"{sec * 1e3:.3f} ms"
    return f"{sec * 1e6:.1f} us"


def import_user_modules(mods: Sequence[str]) -> bool:
    """Import the modules given with --import (they register the user's workloads)."""
    if mods and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for mod in mods:
        try:
            importlib.import_module(mod)
        except ImportError as err:
            print(f"ansor: --import {mod}: {err}", file=sys.stderr)
            return False
    return True


def log_refused(path: str | None, prog: str) -> bool:
    """Check ``--log`` before any work (``measure.log_file.check_log_file``: a directory, a
    missing directory, ``/proc``, no permission, ...): print the one-line reason and return
    True when it cannot be used. ``ansor tune`` and ``ansor network tune`` both call this before
    connecting to a cluster or tuning (the tuners check again, for library callers)."""
    from measure.log_file import RecordFileError, check_log_file  # noqa: PLC0415 - start-up time

    if path is None:
        return False
    try:
        check_log_file(path)
    except RecordFileError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return True
    return False


def check_workload_memory(dag, label: str, reference: bool = False) -> None:
    """Refuse (``MemoryBudgetError``: one line, exit 2) a workload whose tensors do not fit in
    memory, before anything is allocated: ``--args 100000,100000,100000`` failed in numpy with
    a traceback (``ansor build``) or failed every measurement (``ansor tune``). Each tensor is
    checked alone (the message names it), then all together, with a second copy of the outputs
    when the numpy ``reference`` is computed too."""
    import numpy as np  # noqa: PLC0415 - start-up time


    total = 0
    for t in dag.tensors:
        nbytes = nbytes_of(t.shape, np.dtype(t.dtype).itemsize)
        check_bytes(nbytes, f"{label}: tensor {t.name} {list(t.shape)} {t.dtype}")
        total += nbytes * (2 if reference and isinstance(t.op, ComputeOp) else 1)
    outputs = " and the reference's outputs" if reference else ""
    check_bytes(total, f"{label}: the working set ({len(dag.tensors)} tensors{outputs})")


# A --shape dimension beyond this is no tensor a machine can hold (memory is checked later).
MAX_SHAPE_DIM = 2 ** 31 - 1


def parse_shapes(values: Sequence[str] | None) -> dict[str, tuple[int, ...]] | tuple[int, ...] | None:
    """--shape NAME=1x3x224x224 (or NAME=1,3,224,224), repeatable, as ``{name: dims}``; a
    single value without ``NAME=`` is one shape (a one-input model). ``InputError`` (one line,
    exit 2) naming the value at fault."""
    if not values:
        return None
    named: dict[str, tuple[int, ...]] = {}
    for text in values:
        name, sep, dims_text = text.rpartition("=")
        if not sep and len(values) > 1:
            raise InputError(f"--shape {text}: give NAME=DIMS when --shape is repeated")
        if sep and not name:
            raise InputError(f"--shape {text}: the input name before '=' is empty")
        parts = dims_text.replace(",", "x").split("x")
        dims = []
        for part in parts:
            p = part.strip()
            if not (p.isascii() and p.isdigit()) or not 1 <= int(p) <= MAX_SHAPE_DIM:  # '²'.isdigit()
                raise InputError(f"--shape {text}: dimension {part!r} is not an integer in [1, {MAX_SHAPE_DIM}] "
                                 f"(DIMS is like 1x3x224x224)")
            dims.append(int(p))
        if not sep:
            return tuple(dims)
        if name in named:
            raise InputError(f"--shape {text}: input {name!r} is given twice")
        named[name] = tuple(dims)
    return named


def model_options(args: Any) -> dict[str, Any]:
    """The keyword arguments sizing MODEL from a ``network`` command's options
    (``options.add_model_options``): for an .onnx file ``shape``/``batch`` (``from_onnx``),
    for a zoo network ``seq_len``/``image_size``/``batch`` (``networks.get``); only those given.
    ``InputError`` for an option that does not apply to the kind of MODEL."""
    shape = parse_shapes(getattr(args, "shape", None))
    given = {"seq_len": args.seq_len, "image_size": args.image_size, "shape": shape,
             "batch": getattr(args, "batch", None)}
    given = {k: v for k, v in given.items() if v is not None}
    if is_onnx_file(args.model):
        for opt in ("seq_len", "image_size"):
            if opt in given:
                raise InputError(f"{args.model}: --{opt.replace('_', '-')} applies to zoo networks, not to "
                                 f"an ONNX file: give the input's shape with --shape NAME=DIMS "
                                 f"(e.g. --shape input=1x3x224x224) or --batch N")
    elif "shape" in given:
        raise InputError(f"{args.model}: --shape applies to .onnx files; a zoo network is sized by "
                         f"--batch, --seq-len (bert-base-layer) and --image-size (CNNs)")
    return given


def is_onnx_file(model: str) -> bool:
    """MODEL names an ONNX file (the rule is ``network_compare``'s, whose workers load it again)."""
    from ansor.bench.network_compare import is_onnx_file as rule  # noqa: PLC0415 - start-up time

    return rule(model)


def load_model(args: Any):
    """MODEL of a ``network`` command (``args``: its parsed options, ``options.add_model_options``):
    a zoo name with its size options, or an .onnx path with --shape/--batch. Errors are one
    line in the command line's words (exit 2)."""
    return load_graph(args.model, model_options(args))


def load_graph(model: str, kwargs: dict[str, Any]):
    """MODEL with ``model_options``' keyword arguments: ``from_onnx`` for an .onnx file (its
    shape errors said with --shape/--batch), else the zoo network."""
    from ansor import frontend, networks  # noqa: PLC0415 - start-up time of the other commands

    if is_onnx_file(model):
        try:
            return frontend.from_onnx(model, **kwargs)
        except InputError as err:
            cli = getattr(err, "cli_message", None)  # onnx_inputs.ShapeArgumentError
            if cli is None:
                raise
            raise InputError(cli) from None
    if model not in networks.list_networks():
        raise InputError(f"unknown model {model!r}: not a zoo name ({', '.join(networks.list_networks())}) "
                         f"nor an ONNX file")
    return networks.get(model, **kwargs)


def print_table(rows) -> None:
    """Rows of strings as a markdown-style table, columns padded to their widest cell."""
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for row in rows:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths)) + " |")


def check_log(path: str | None) -> None:
    """``--log``, read for schedules: an existing, readable file (a directory or a missing file
    used to fail deep inside the compile with a traceback)."""
    if path is None:
        return
    if not os.path.exists(path):
        raise InputError(f"--log {path}: no such file (tuning records to take schedules from)")
    if os.path.isdir(path):
        raise InputError(f"--log {path}: is a directory, not a file of tuning records")
    if not os.access(path, os.R_OK):
        raise InputError(f"--log {path}: not readable")
