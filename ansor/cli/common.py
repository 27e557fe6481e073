"""What several ``ansor`` subcommands share: time formatting and ``--import MODULE`` (modules
that register the user's workloads before their records are read).
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Sequence


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
