"""Benchmarking ansor-py against its peers: the suite behind ``ansor bench`` and
``benchmarks/suite.py``, and the timing method every published figure shares.

It lives in the installed package (not only in ``benchmarks/``) so that ``ansor bench`` works
wherever ansor-py is installed and the fresh-process workers can be started with ``python -m``.

* ``timing``: how one system is timed (warm-up, median of repeats) and how a measurement is run
  in a fresh process with a given number of threads; machine and version information.
* ``suite``: the workloads of the suite, how each is built, checked and timed in every system
  (ours, numpy, PyTorch eager and ``torch.compile``); the command-line driver, reports and
  tuning curves.
* ``peers_tvm``: TVM MetaSchedule as a peer (tuning and timing), imported only in its own
  subprocess.
"""
