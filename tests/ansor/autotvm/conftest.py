"""Fixtures shared by the template-tuning tests."""
import pytest

from ansor.autotvm.task import _BY_WORKLOAD, _TEMPLATES


@pytest.fixture
def scratch_templates():
    """Register test templates and remove them afterwards."""
    names: list[str] = []
    yield names
    for n in names:
        t = _TEMPLATES.pop(n, None)
        for w in t.workloads if t else ():
            if _BY_WORKLOAD.get(w) == n:
                del _BY_WORKLOAD[w]
