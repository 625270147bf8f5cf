"""Fixtures of the PostgreSQL and browser tests of the reservation service (warnings are errors here)."""
from __future__ import annotations

import pytest

from tests.lib.postgres import find_bindir, postgres_server


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    for item in items:
        if "/tests/web/" in str(item.fspath):
            item.add_marker(pytest.mark.filterwarnings("error"))


@pytest.fixture(scope="session")
def pg():  # noqa: ANN201
    """One PostgreSQL server for the whole session (stopped and removed at the end)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb/pg_ctl) are not installed: apt-get install postgresql")
    with postgres_server(bindir) as server:
        yield server
