"""argparse ``type=`` converters for the command lines' numeric options and ``--args``.

Each converter parses the flag's text and checks its range with ``measure.checks``; a bad value
raises ``argparse.ArgumentTypeError``, so argparse exits 2 with ``argument --NAME: why``, the
same as for any other bad argument (no traceback, no check that runs only after work started).
Every count has an upper bound, named in the message (issue 40: ``--population 1000000000000``
was accepted and grew memory for minutes); the named converters below (``trials``,
``per_round``, ``population``, ...) are the one place each kind of option gets its bound.
"""
from __future__ import annotations

import argparse
import ast
from typing import Callable

from measure import checks
from measure.cluster_address import ClusterAddressError, check_scheduler_address
from sketch.search_params import MAX_POPULATION

# A network's input size (--seq-len, --image-size): activations grow with its square, and the
# zoo's models use 128-512 tokens and 224-pixel images.
MAX_NETWORK_SIZE = 8192
# A verbosity level past the highest one any command prints.
MAX_VERBOSE = 3
# --args: longer text is not a shape (and ast.literal_eval's cost grows with it).
MAX_ARGS_CHARS = 10_000


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


def count(minimum: int = 1, maximum: int = checks.MAX_TRIALS) -> Callable[[str], object]:
    """An integer in [``minimum``, ``maximum``] (by default at most a million: no count any
    command takes is useful beyond that, and far larger ones exhaust memory)."""
    return _checked(int, checks.check_count, minimum=minimum, maximum=maximum)


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

# The bounded counts, one converter per kind of option (bounds: measure.checks, SearchParams).
trials = count(0, checks.MAX_TRIALS)
early_stopping = count(1, checks.MAX_TRIALS)
per_round = count(1, checks.MAX_PER_ROUND)
repeat = count(1, checks.MAX_REPEAT)  # --repeat, --number, --remeasure-best
threads = count(1, checks.MAX_THREADS)  # --threads, --nthreads
network_size = count(1, MAX_NETWORK_SIZE)  # --seq-len, --image-size
verbose = count(0, MAX_VERBOSE)


def population(minimum: int = 1) -> Callable[[str], object]:
    """--population: at least ``minimum``, at most ``SearchParams``' bound."""
    return count(minimum, MAX_POPULATION)


def rounds(minimum: int = 1) -> Callable[[str], object]:
    """--rounds of a timing comparison (each round starts fresh processes)."""
    return count(minimum, checks.MAX_ROUNDS)


def shape_args(text: str) -> tuple:
    """``1024,1024,1024`` or ``(4, 5), (5,)`` -> a tuple of Python literals (never executes
    code: ``ast.literal_eval``); every integer in it at most ``checks.MAX_EXTENT`` in size."""
    if len(text) > MAX_ARGS_CHARS:
        raise argparse.ArgumentTypeError(f"longer than {MAX_ARGS_CHARS} characters "
                                         f"({len(text)}): not a list of shape arguments")
    try:
        value = ast.literal_eval(f"({text},)")
    except (ValueError, SyntaxError, MemoryError, RecursionError) as err:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of numbers/tuples "
            f"({err.__class__.__name__})") from None
    _check_extents(value)
    return tuple(value)


def _check_extents(value: object) -> None:
    # The kernels index with 32-bit integers: a larger extent would overflow, not just be slow.
    if isinstance(value, (tuple, list)):
        for v in value:
            _check_extents(v)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > checks.MAX_EXTENT:
        raise argparse.ArgumentTypeError(
            f"{checks.fmt_count(value)} is too large: a shape argument must be at most "
            f"{checks.MAX_EXTENT}")


def cluster_address(text: str) -> str:
    """A Dask scheduler address, ``tcp://HOST:PORT`` (normalised; checked before any connection
    is tried: ``measure.cluster_address``)."""
    try:
        return check_scheduler_address(text)[0]
    except ClusterAddressError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
