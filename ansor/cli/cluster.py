"""``--cluster tcp://HOST:PORT`` for the tuning commands, and ``ansor worker``.

``ansor tune ... --cluster ADDRESS`` and ``ansor network tune ... --cluster ADDRESS`` build on
every worker of the Dask cluster at ADDRESS and measure on its measuring workers
(``measure.dask_builder``, ``measure.dask_runner``). ``ansor worker ADDRESS`` starts a measuring
worker on this machine: ``dask worker ADDRESS --resources measure=1`` with a preload that
checks, at start-up, that ansor-py and LLVM work here (``--no-measure``: a build-only worker).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from ansor import argtypes
from measure.cluster import INSTALL_HINT, MEASURE_RESOURCE
from measure.dask_builder import DaskBuilder
from measure.dask_runner import DaskRunner
from measure.measure import MeasureUnavailableError
from measure.runtime import usable_cpus

RESUME_HINT = ("resume: run the same command again (with --cluster at a live scheduler, or "
               "without --cluster to measure on this machine)")


def add_cluster_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", metavar="ADDRESS", default=None, type=argtypes.cluster_address,
                   help="build and measure on the Dask cluster whose scheduler is at ADDRESS "
                        "(tcp://HOST:PORT); measuring workers: `ansor worker ADDRESS`")


def open_cluster(address: str, prog: str, **runner_settings: Any) -> tuple[DaskBuilder, DaskRunner] | int:
    """A builder and a runner on the cluster at ``address``, or (printed) the exit code of a
    failure to reach it."""
    builder = None
    try:
        builder = DaskBuilder(address)
        return builder, DaskRunner(address, **runner_settings)
    except BaseException as err:
        if builder is not None:  # an open client would hold the interpreter's exit for a minute
            builder.close()
        if not isinstance(err, (ImportError, MeasureUnavailableError, ValueError)):
            raise
        print(f"{prog}: --cluster {address}: {err}", file=sys.stderr)
        return 2


def worker_command(address: str, nthreads: int | None, measure: bool,
                   name: str | None) -> list[str]:
    """The ``dask worker`` command ``ansor worker`` runs."""
    cmd = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1",
           "--nthreads", str(nthreads if nthreads is not None else usable_cpus()),
           "--preload", "measure.cluster_worker"]
    if measure:
        cmd += ["--resources", f"{MEASURE_RESOURCE}=1"]
    if name is not None:
        cmd += ["--name", name]
    return cmd


def cmd_worker(ns: argparse.Namespace) -> int:
    """Replace this process with a Dask worker for tuning runs."""
    try:
        import distributed  # noqa: F401, PLC0415 - only to say what is missing before exec
    except ImportError:
        print(f"ansor worker: needs Dask distributed: {INSTALL_HINT}", file=sys.stderr)
        return 2
    cmd = worker_command(ns.address, ns.nthreads, not ns.no_measure, ns.name)
    if ns.print_command:
        print(shlex.join(cmd))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cmd[0], cmd)  # the worker's own signal handling and restarts, without us between
    return 0  # not reached


def add_worker_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "worker", help="start a Dask worker that builds and measures for tuning runs",
        description="Start a Dask worker connected to the scheduler at ADDRESS (`dask scheduler` "
        "prints it): it builds candidates and, holding the 'measure' resource, measures them one "
        "at a time. Start one per machine; kernels use the tuner's thread count "
        "(ANSOR_NUM_THREADS where `ansor tune` runs). Same as `dask worker ADDRESS --resources "
        "measure=1 --preload measure.cluster_worker`.")
    p.add_argument("address", type=argtypes.cluster_address,
                   help="the scheduler's address, e.g. tcp://10.0.0.1:8786")
    p.add_argument("--nthreads", type=argtypes.threads, default=None, metavar="N",
                   help="builds at a time (default: the usable CPUs); measurements are always "
                        "one at a time")
    p.add_argument("--no-measure", dest="no_measure", action="store_true",
                   help="build only (another worker on this machine, or none, measures)")
    p.add_argument("--name", default=None, help="the worker's name on the dashboard")
    p.add_argument("--print-command", dest="print_command", action="store_true",
                   help="print the dask worker command instead of running it")
