import pytest

from narad import testing


@pytest.fixture(autouse=True)
def _close_apps():
    """Each test's in-process apps stop their listener threads after it."""
    yield
    testing.close_apps()
