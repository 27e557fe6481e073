"""cost_model: program features and the cost models that rank candidate programs."""
from .cost_model import CostModel, RandomModel
from .feature import FEATURE_NAMES, FEATURE_VERSION, dump_features, get_per_store_features
from .lgbm_model import LGBModel, LGBParams

__all__ = ["CostModel", "FEATURE_NAMES", "FEATURE_VERSION", "LGBModel", "LGBParams", "RandomModel",
           "dump_features", "get_per_store_features"]
