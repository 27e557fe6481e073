"""cost_model: program features and the cost models that rank candidate programs."""
from .cost_model import CostModel, RandomModel

__all__ = ["CostModel", "RandomModel"]
