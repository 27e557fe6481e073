"""argparse ``type=`` converters for the command lines' numeric options and ``--args``.

Each converter parses the flag's text and checks its range with ``measure.checks``; a bad value
raises ``argparse.ArgumentTypeError``, so argparse exits 2 with ``argument --NAME: why``, the
same as for any other bad argument (no traceback, no check that runs only after work started).
"""
from __future__ import annotations

import argparse
import ast
from typing import Callable

from measure import checks


def _number(text: str, kind: type) -> float | int:
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def _checked(kind: type, check: Callable[..., object], **kw: object) -> Callable[[str], object]:
    def convert(text: str) -> object:
        try:
            return check("", _number(text, kind), **kw)
        except (TypeError, ValueError) as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = check.__name__.replace("check_", "")  # argparse names it in some errors
    return convert


def count(minimum: int = 1) -> Callable[[str], object]:
    """An integer >= ``minimum``."""
    return _checked(int, checks.check_count, minimum=minimum)


def seconds(maximum: float = checks.MAX_TIMEOUT_S) -> Callable[[str], object]:
    """A positive, finite number of seconds, at most ``maximum``."""
    return _checked(float, checks.check_seconds, maximum=maximum)


def nonnegative(maximum: float | None = None) -> Callable[[str], object]:
    """A finite number >= 0 (and <= ``maximum``)."""
    return _checked(float, checks.check_nonnegative, maximum=maximum)


def fraction() -> Callable[[str], object]:
    """A number in (0, 1]."""
    return _checked(float, checks.check_fraction)


seed = _checked(int, checks.check_seed)


def shape_args(text: str) -> tuple:
    """``1024,1024,1024`` or ``(4, 5), (5,)`` -> a tuple of Python literals (never executes
    code: ``ast.literal_eval``)."""
    try:
        value = ast.literal_eval(f"({text},)")
    except (ValueError, SyntaxError, MemoryError, RecursionError) as err:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of numbers/tuples "
            f"({err.__class__.__name__})") from None
    return tuple(value)
