"""Odd and prime sizes from real models (issue 18): the suite's method on the ``odd`` set.

GEMMs whose three sizes are primes, a 1001-class classifier, 197 and 77 tokens, 7x7 / 35x35 /
149x149 feature maps and a 3-channel stem (`ansor bench --set odd --list` shows the rows). Tiles
that divide such extents are poor, so these rows measure the search's imperfect tiles and their
tail strategies against numpy and PyTorch on the same machine, in the same run. Results go to
``benchmarks/results/odd_shapes/`` (logs under its ``logs/``, resumed like the suite's).

    python benchmarks/odd_shapes.py                       # 200 trials, 5 rounds, numpy + PyTorch
    python benchmarks/odd_shapes.py --trials 8 --rounds 1 --workloads dense_1001
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ansor.bench.suite import set_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(set_main("odd", ROOT / "benchmarks" / "results" / "odd_shapes", sys.argv[1:],
                      "benchmarks/odd_shapes.py"))
