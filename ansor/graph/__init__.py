"""Whole networks as a typed dataflow graph: the IR (``Graph``, ``Node``, ``TensorType``), a
Python builder (``GraphBuilder``) and the numpy reference interpreter (``run``).

``ansor.networks`` builds a zoo with the builder; ``ansor.frontend.from_onnx`` imports ONNX models
and ``export_onnx`` writes a graph as one (to run it in onnxruntime).
"""
from .builder import GraphBuilder, Var
from .interpreter import run
from .ir import OPS, Graph, GraphError, Node, OpDef, TensorType, display_name
from .onnx_export import export_onnx, to_onnx

__all__ = ["OPS", "Graph", "GraphBuilder", "GraphError", "Node", "OpDef", "TensorType", "Var",
           "display_name", "export_onnx", "run", "to_onnx"]

# Last: the operator modules build on the modules above (one home per operator, checked here).
from . import ops  # noqa: E402, F401
