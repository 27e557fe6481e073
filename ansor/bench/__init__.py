"""Benchmarking ansor-py against its peers: the suite behind ``ansor bench`` and
``benchmarks/suite.py``, and the timing method every published figure shares.

It lives in the installed package (not only in ``benchmarks/``) so that ``ansor bench`` works
wherever ansor-py is installed and the fresh-process workers can be started with ``python -m``.

* ``timing``: how one system is timed (warm-up, median of repeats) and how a measurement is run
  in a fresh process with a given number of threads; machine and version information.
* ``workloads``: the suite's workloads and the systems it compares; ``inputs``: the same inputs
  for every system and the check of an output against the numpy reference.
* ``peers``: numpy's and PyTorch's formulations of the workloads; ``peers_tvm``: TVM
  MetaSchedule as a peer (tuning and timing), imported only in its own subprocess.
* ``workers``: the jobs run in fresh processes (tune ours, reference, time one system).
* ``sessions``: tuning sessions (wall time, seconds per trial) and best-so-far curves of a log.
* ``driver``: tuning every workload, the timing rounds, the summary; ``report``: Markdown, PNG.
* ``suite``: the command line (``ansor bench``, ``benchmarks/suite.py``).
"""
