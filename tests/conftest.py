"""Test configuration shared by the whole suite.

Hypothesis explores new examples on developers' machines; under CI (``CI=true``) it is
derandomized, so a CI run is reproducible and a failure there can be replayed exactly.

The compile cache (``measure.compile_cache``) of the whole run is a temporary directory: tests
never write to the user's cache, nor read kernels a previous run left there. The variable is set
in ``os.environ`` so that worker processes and subprocesses inherit it.
"""
import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev")


@pytest.fixture(scope="session", autouse=True)
def _private_compile_cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANSOR_CACHE_DIR", str(tmp_path_factory.mktemp("compile-cache")))
        yield
