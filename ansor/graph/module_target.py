"""The CPU a compiled network module was built for, in its ``module.json``, and the check on load.

``export`` records ``"target": {"name", "cpu", "features"}`` (``target_entry``): the target's
name (``measure.targets``), its LLVM CPU and the instruction-set features its kernels may use
(for ``native`` the building host's: that code needs them too). ``load_module`` calls
``check_module_cpu`` before any kernel is loaded: a CPU lacking one of the features refuses the
module in one line naming them (``measure.cpu_features.refusal``, standard library only, which a
standalone loader can reuse), never an illegal instruction later.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from measure.cpu_features import refusal

from .ir import GraphError


def target_entry(name: str) -> dict:
    """module.json's ``target`` for kernels built for ``name``."""
    from measure.targets import get_target  # noqa: PLC0415 - LLVM starts only when a module is written

    t = get_target(name)
    return {"name": t.name, "cpu": t.cpu, "features": t.required_features}


def check_module_cpu(root: Path, entry: Any) -> str:
    """The target name of the module in ``root`` (``entry``: its module.json's ``target``), after
    refusing (``measure.targets.TargetError``, one line) a module whose kernels need a feature
    this CPU lacks. A module from before targets has none: ``native``, unchecked."""
    from measure.targets import TargetError  # noqa: PLC0415 - loads llvmlite: only when a module loads

    if entry is None:
        return "native"
    if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)
            and isinstance(entry.get("features"), list)
            and all(isinstance(f, str) for f in entry["features"])):
        raise GraphError(f"{root}: not a compiled network module: bad target entry in module.json")
    where = str(root) if str(root).endswith("/") else f"{root}/"
    why = refusal(where, entry["name"], entry["features"], prefix="")
    if why is not None:
        raise TargetError(why)
    return entry["name"]
