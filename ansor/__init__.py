"""ansor: the public face of ansor-py (filled in as the layers land)."""
from compute import te
from compute.compute_dag import ComputeDAG

__all__ = ["ComputeDAG", "te"]
