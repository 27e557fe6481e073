"""Reduction-heavy operators of real models beyond the suite (issue 19): the suite's method on
the ``reductions`` set.

A 1-D convolution (Whisper), a 3-D convolution (R3D-18), a grouped convolution (ResNeXt-50), a
transposed convolution (DCGAN), a dilated convolution (ENet), an NCHW convolution (AlexNet), a
dense layer with GELU (BERT), attention scores with their softmax (BERT) and a global average
pool (ResNet-50); `ansor bench --set reductions --list` shows the rows. Each is tuned for
``--trials`` and timed against numpy and PyTorch on the same machine, in the same run. Results go
to ``benchmarks/results/reduction_ops/`` (logs under its ``logs/``, resumed like the suite's).

    python benchmarks/reduction_ops.py                    # 200 trials, 5 rounds, numpy + PyTorch
    python benchmarks/reduction_ops.py --trials 8 --rounds 1 --workloads conv1d_whisper
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ansor.bench.suite import set_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(set_main("reductions", ROOT / "benchmarks" / "results" / "reduction_ops",
                      sys.argv[1:], "benchmarks/reduction_ops.py"))
