"""ansor-py: a template-free auto-scheduler for tensor programs on x86 CPUs.

Describe *what* to compute with ``ansor.te``; ``ansor.build`` compiles it to native code through
LLVM. Schedules are ``State`` values built from transform steps (``dag.init_state().split(...)``).
Measurements (``LocalBuilder``, ``LocalRunner``) are isolated in worker processes and recorded as
JSON lines (``RecordToFile``, ``load_records``, ``best_record``, ``distill``). Tuning searches
schedules by itself: ``SearchTask(func=..., args=...).tune(TuningOptions(...))`` returns a
``TuneResult``. Whole networks: ``ansor.networks.get(name)`` and ``ansor.frontend.from_onnx(path)``
give an ``ansor.graph.Graph``, run by the numpy reference ``ansor.graph.run``; ``TaskScheduler``
tunes a network's tasks (``extract_tasks``) with one trial budget. Kernels are tuned on
64-byte-aligned arrays; ``aligned_empty``/``aligned_zeros`` give a caller the same placement.
"""
from compute import te
from compute.compute_dag import ComputeDAG
from compute.workload_registry import make_workload, register_workload
from measure.buffers import aligned_empty, aligned_zeros
from measure.builder import LocalBuilder
from measure.local import measure_batch
from measure.measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult
from measure.record import RecordToFile
from measure.runner import LocalRunner
from sketch.hardware import HardwareParams
from sketch.loop_state import InvalidStepError, Iterator, Stage, State

from .build_module import build
from .records import NoRecordError, best_record, distill, load_records
from .search_task import SearchTask
from .tuning import TuneResult, TuningOptions
from . import frontend, graph, networks  # noqa: E402 - networks: ansor.networks.get(...); onnx loads lazily
from .graph.executor import NetworkModule, compile_network, load_module  # noqa: E402
from .graph.schedules import UntunedTaskError  # noqa: E402
from .graph.plan import extract_tasks  # noqa: E402
from .task_scheduler import (LogEstimatedLatency, PrintTableInfo, TaskFilter,  # noqa: E402
                             TaskScheduler, TaskSchedulerCallback)

__all__ = [
    "BuildResult", "ComputeDAG", "aligned_empty", "aligned_zeros", "HardwareParams",
    "InvalidStepError", "Iterator", "LocalBuilder", "LocalRunner",
    "MeasureErrorNo", "MeasureInput", "MeasureResult", "NoRecordError", "RecordToFile",
    "SearchTask", "Stage", "State", "TuneResult", "TuningOptions", "best_record", "build",
    "distill", "load_records", "compile_network", "extract_tasks", "load_module", "NetworkModule",
    "UntunedTaskError", "make_workload", "measure_batch", "register_workload", "te",
    "LogEstimatedLatency", "PrintTableInfo", "TaskFilter", "TaskScheduler", "TaskSchedulerCallback",
]
__version__ = "0.1.0"
