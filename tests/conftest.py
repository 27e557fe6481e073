"""Test configuration shared by the whole suite.

Hypothesis explores new examples on developers' machines; under CI (``CI=true``) it is
derandomized, so a CI run is reproducible and a failure there can be replayed exactly.
"""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev")
