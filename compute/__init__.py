"""compute: the tensor-expression language, ComputeDAG and its analyses, the operator library,
the numpy reference evaluator and the loop IR that schedules lower to."""
from . import dtype, expr, te
from .compute_dag import ComputeDAG, OpInfo
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor

__all__ = ["ComputeDAG", "ComputeOp", "OpInfo", "Operation", "PlaceholderOp", "Tensor", "dtype",
           "expr", "te"]
