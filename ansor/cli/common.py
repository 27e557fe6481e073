"""What several ``ansor`` subcommands share: time formatting, ``--import MODULE`` (modules
that register the user's workloads before their records are read) and the up-front ``--log``
check of the tuning commands.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Sequence

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
    """Check ``--log`` before any work (``measure.record.check_log_file``: a directory, a
    missing directory, ``/proc``, no permission, ...): print the one-line reason and return
    True when it cannot be used. ``ansor tune`` and ``ansor network tune`` both call this before
    connecting to a cluster or tuning (the tuners check again, for library callers)."""
    from measure.record import RecordFileError, check_log_file  # noqa: PLC0415 - start-up time

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


def load_model(model: str, seq_len: int | None = None, image_size: int | None = None):
    """MODEL of the ``network`` commands: a zoo name (with its size options) or an .onnx path."""
    from ansor import frontend, networks  # noqa: PLC0415 - start-up time of the other commands

    if model.endswith(".onnx") or (model not in networks.list_networks() and os.path.isfile(model)):
        if seq_len is not None or image_size is not None:
            raise InputError(f"{model}: --seq-len and --image-size apply to zoo networks, not to an ONNX file")
        return frontend.from_onnx(model)
    kwargs = {}
    if seq_len is not None:
        kwargs["seq_len"] = seq_len
    if image_size is not None:
        kwargs["image_size"] = image_size
    if model not in networks.list_networks():
        raise InputError(f"unknown model {model!r}: not a zoo name ({', '.join(networks.list_networks())}) "
                         f"nor an ONNX file")
    return networks.get(model, **kwargs)


def print_table(rows) -> None:
    """Rows of strings as a markdown-style table, columns padded to their widest cell."""
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for row in rows:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths)) + " |")
