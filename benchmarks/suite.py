"""The benchmark suite (issue 8): tuned ansor-py kernels against numpy, PyTorch and TVM.

A thin wrapper: the suite lives in the installed package (``ansor.bench.suite``) so that
``ansor bench`` runs the same code wherever ansor-py is installed; see its docstring or
``--help`` for the method and the options. From a checkout, results go to
``benchmarks/results/suite/`` (tuning logs under its ``logs/``) unless ``--out`` says otherwise.

    python benchmarks/suite.py                        # the whole suite: 200 trials, 5 rounds
    python benchmarks/suite.py --trials 8 --workloads gemm_512,softmax --rounds 2
    python benchmarks/suite.py --curve --workloads gemm_1024
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ansor.bench.suite import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="benchmarks/suite.py"))
