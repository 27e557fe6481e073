"""The ``ansor`` command line.

``ansor`` with no arguments runs the built-in default job (default vs hand-written schedules);
``ansor tune`` with no workload runs the README's quick start, a short GEMM tuning run compared
with numpy; ``ansor tune NAME --args ... --trials N --log FILE`` tunes any library workload;
``ansor workloads`` lists the operator library; ``ansor build NAME --args ...`` compiles a
workload's default schedule, checks it against the numpy reference and times it;
``ansor records ...`` summarises, distills and re-measures tuning logs; ``ansor costmodel ...``
evaluates and trains the cost model; ``ansor network ...`` lists the network zoo, shows a
network's tuning tasks and compiles and runs one (an .onnx MODEL's dynamic inputs sized with
``--shape NAME=1x3x224x224`` / ``--batch N``); ``ansor bench`` runs the benchmark suite;
``ansor worker ADDRESS`` starts a Dask worker that builds and measures for the tuning commands'
``--cluster ADDRESS``. ``ansor --version`` prints the version; ``python -m ansor`` is ``ansor``.

The options the commands share (--log, --trials, --timeout, -v/-q, --cost-model, --seed,
--threads, ...) are defined once, in ``options``. This module assembles the parser and dispatches; each command group is a module of this package
(``build``, ``tune``, ``records``, ``costmodel``, ``network``, ``cluster``).
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Sequence

from compute.errors import InputError
from measure.runtime import check_num_threads

from . import build, cluster, costmodel, network, options, records, tune


def package_version() -> str:
    """The installed distribution's version, else (a source tree run without installing) the
    package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("ansor-py")
    except PackageNotFoundError:
        import ansor  # noqa: PLC0415

        return getattr(ansor, "__version__", "unknown")


def _check_num_threads() -> bool:
    """``$ANSOR_NUM_THREADS`` checked before any work (kernels read it in worker processes,
    where a bad value only showed up later, as failed measurements); its warning (more threads
    than CPUs) printed as one line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_num_threads()
        except ValueError as err:
            print(f"ansor: {err}", file=sys.stderr)
            return False
    for w in caught:
        print(f"ansor: warning: {w.message}", file=sys.stderr)
    return True


def cmd_bench(argv: Sequence[str]) -> int:
    """``ansor bench``: the benchmark suite, which parses its own options. Imported here, only
    when this command runs: the suite's harness (workers, peers, reports) is not part of the
    rest of the command line and must not be loaded (or break) every ``ansor`` start-up."""
    from ansor.bench.suite import main as bench_main

    return bench_main(list(argv))


def debug_requested(args: Sequence[str]) -> bool:
    """``--debug`` anywhere on the command line, or ``ANSOR_DEBUG`` set to anything but 0/empty:
    errors propagate with their traceback instead of the one-line message."""
    return "--debug" in args or os.environ.get("ANSOR_DEBUG", "") not in ("", "0")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Exit status: 0 success, 1 a run that failed (a full disk, an I/O error,
    or a bug of ours), 2 bad usage or bad input. A user's error is one line on stderr, never a
    traceback (``--debug``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(args)
    args = [a for a in args if a != "--debug"]
    # A warning is one line too, not Python's two (with the source line). The formatter, not
    # showwarning: callers recording warnings (catch_warnings(record=True)) still get them.
    shown = warnings.formatwarning
    if not debug:
        warnings.formatwarning = _one_line_warning
    try:
        return _dispatch(args)
    except (KeyboardInterrupt, Exception) as err:  # noqa: BLE001 - no traceback by default
        if debug:
            raise
        line, code = _failure(err)
        print(line, file=sys.stderr)
        return code
    finally:
        warnings.formatwarning = shown


def _failure(err: BaseException) -> tuple[str, int]:
    """The one line and the exit status for an exception that ended a command: bad input (2),
    the machine's failure (1: a full disk, an I/O error, a lost peer, memory), or a bug of ours
    (1, with how to see the traceback)."""
    if isinstance(err, KeyboardInterrupt):
        return "ansor: interrupted", 130
    if isinstance(err, InputError):
        return f"ansor: {str(err).strip()}", 2
    if isinstance(err, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        return f"ansor: {_one_line(err)}", 2
    if isinstance(err, OSError):
        return f"ansor: {_one_line(err)}", 1
    if isinstance(err, MemoryError):
        return f"ansor: out of memory{': ' + _one_line(err) if str(err) else ''}", 1
    return (f"ansor: internal error: {type(err).__name__}: {_one_line(err)} (run with --debug or "
            "ANSOR_DEBUG=1 for the traceback, and please report it)"), 1


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """``warnings.formatwarning`` for the command line: ``ansor: warning: MESSAGE``."""
    return f"ansor: warning: {str(message).strip()}\n"


def _one_line(err: BaseException) -> str:
    """An exception's message on one line (a multi-line message keeps its first line and says
    how many followed)."""
    text = str(err).strip() or type(err).__name__
    lines = text.splitlines()
    return lines[0] if len(lines) == 1 else f"{lines[0]} (+{len(lines) - 1} more line(s))"


def _dispatch(args: list[str]) -> int:
    argv = args
    if args[:1] == ["bench"]:
        return cmd_bench(args[1:])
    parser = argparse.ArgumentParser(prog="ansor", description="Template-free auto-scheduler for "
                                     "tensor programs on x86 CPUs. With no command: the default job.")
    sub = parser.add_subparsers(dest="command")
    build.add_parsers(sub)
    tune.add_parser(sub)
    records.add_parser(sub)
    sub.add_parser("bench", add_help=False, help="the benchmark suite: tune and time workloads "
                   "against numpy, PyTorch and TVM (ansor bench --help)")
    costmodel.add_parser(sub)
    network.register(sub)
    cluster.add_worker_parser(sub)
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error (also: ANSOR_DEBUG=1)")
    parser.add_argument("--version", action="version", version=f"ansor-py {package_version()}")
    ns = parser.parse_args(options.verbose_alias(argv))
    # --threads is ANSOR_NUM_THREADS for this command: set before the check and any kernel.
    with options.threads_env(getattr(ns, "threads", None)):
        return _run(ns)


def _run(ns: argparse.Namespace) -> int:
    runs_kernels = ns.command not in ("workloads", "records") or (
        ns.command == "records" and ns.records_command == "verify")
    if ns.command == "network":
        return int(ns.func(ns)) if _check_num_threads() else 2
    if runs_kernels and not _check_num_threads():
        return 2
    handlers = {None: build.cmd_default, "workloads": build.cmd_workloads,
                "build": build.cmd_build, "tune": tune.cmd_tune, "records": records.cmd_records,
                "costmodel": costmodel.cmd_costmodel, "worker": cluster.cmd_worker}
    return handlers[ns.command](ns)
