"""ansor-py: a template-free auto-scheduler for tensor programs on x86 CPUs.

Describe *what* to compute with ``ansor.te``; ``ansor.build`` compiles it to native code through
LLVM. Schedules are ``State`` values built from transform steps (``dag.init_state().split(...)``).
"""
from compute import te
from sketch.loop_state import InvalidStepError, Iterator, Stage, State

from .build_module import build
from .compute_dag import ComputeDAG

__all__ = ["ComputeDAG", "InvalidStepError", "Iterator", "Stage", "State", "build", "te"]
__version__ = "0.1.0"
