"""``ansor network export MODEL --log LOG -o DIR/net.so``: compile MODEL with the log's best
schedules and write it as one shared library with its weights, metadata, the standalone loader
``ansor_runtime.py``, ``ansor_net.h`` and ``example.c`` (``ansor.graph.export_library``).

``export_and_tell`` is also how ``network tune`` ends: the shippable result and the two lines
that run it where only Python and numpy are installed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from . import options
from .common import check_log, load_model


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``export`` to the ``network`` subcommands."""
    q = sub.add_parser("export", help="compile MODEL and write it as one shared library (C ABI) "
                                      "with a Python loader that needs only numpy")
    options.add_model_options(q)
    q.add_argument("--log", default=None, help="tuning records to take schedules from (without: "
                                                "every task untuned, named in a table)")
    q.add_argument("-o", "--output", required=True, metavar="DIR/NAME.so",
                   help="the library to write; its weights, NAME.json, ansor_runtime.py, "
                        "ansor_net.h and example.c go beside it")
    q.add_argument("--strict", action="store_true", help="fail if a task has no record")
    q.add_argument("--untuned", choices=("rules", "guess"), default="rules",
                   help="a task without a record: the rule-based schedule (default) or the "
                        "pre-trained cost model's zero-trial pick")
    q.add_argument("--nhwc", action="store_true",
                   help="ignore the layouts chosen by layout tuning (LOG.layouts.jsonl)")
    options.add_target_option(q)
    q.set_defaults(func=cmd_export)
    return q


def export_and_tell(network: Any, log: str | None, output: str, prog: str, **compile_kw: Any) -> int:
    """Compile ``network`` (a Graph or its plan) with ``log``'s best schedules, export it to
    ``output`` and print what was written and how to run it; 2 for a bad output path."""
    from ansor.graph.executor import compile_network  # noqa: PLC0415 - start-up time of the CLI
    from ansor.graph.export_library import export_library  # noqa: PLC0415 - as above
    from ansor.graph.ir import GraphError  # noqa: PLC0415 - as above

    if not output.endswith(".so") or os.path.basename(output) == ".so":
        print(f"{prog}: -o {output}: name the library to write, DIR/NAME.so", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    lib = compile_network(network, log_file=log, **compile_kw)
    try:
        res = export_library(lib, output)
    except GraphError as err:  # no linker, a failed link
        print(f"{prog}: {err}", file=sys.stderr)
        return 1
    d = res.library.parent
    weights = next(f for f in res.files if f.suffix == ".weights")
    print(f"exported in {time.perf_counter() - t0:.1f} s to {d}/: {res.library.name} ({res.kernels} "
          f"kernels, linked with {res.linker}), {weights.name} ({weights.stat().st_size / 2**20:.1f} MiB), "
          f"{', '.join(f.name for f in res.files[2:])}")
    feed = ", ".join(f"{n!r}: x{i}" for i, n in enumerate(_inputs(lib)))
    print(f"run it anywhere with Python and numpy (no ansor-py), with {d} on sys.path:")
    print("  import ansor_runtime")
    print(f"  out = ansor_runtime.load({str(res.library)!r}).run({{{feed}}})  # "
          + "; ".join(f"x{i}: {dtype} {list(shape)}" for i, (shape, dtype) in enumerate(_inputs(lib).values())))
    print(f"from C: {d}/example.c (cc example.c -I. ./{res.library.name} -Wl,-rpath,'$ORIGIN')")
    return 0


def _inputs(lib: Any) -> dict:
    """Input name -> (shape, dtype) as a caller gives them (a half-precision boundary's dtype)."""
    return {n: (t.shape, lib.io_dtypes.get(n, t.dtype)) for n, t in lib.input_types.items()}


def cmd_export(args: argparse.Namespace) -> int:
    from ansor.graph.schedules import UntunedTaskError  # noqa: PLC0415 - start-up time of the CLI

    g = load_model(args)
    check_log(args.log)
    try:
        return export_and_tell(g, args.log, args.output, "ansor network export", strict=args.strict,
                               layouts=None if args.nhwc else "auto", untuned=args.untuned,
                               target=args.target)
    except (ValueError, UntunedTaskError) as err:  # --untuned guess without a pre-trained model; --strict
        print(f"ansor network export: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
