"""Whole networks as a typed dataflow graph: the IR (``Graph``, ``Node``, ``TensorType``), a
Python builder (``GraphBuilder``) and the numpy reference interpreter (``run``).

``ansor.networks`` builds a zoo with the builder; ``ansor.frontend.from_onnx`` imports ONNX models.
"""
from .builder import GraphBuilder, Var
from .interpreter import run
from .ir import OPS, Graph, GraphError, Node, OpDef, TensorType, display_name

__all__ = ["OPS", "Graph", "GraphBuilder", "GraphError", "Node", "OpDef", "TensorType", "Var",
           "display_name", "run"]
