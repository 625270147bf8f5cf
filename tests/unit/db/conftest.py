"""Fixtures of the database-package tests (warnings are errors in this directory)."""
from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    for item in items:
        if "tests/unit/db" in str(item.fspath):
            item.add_marker(pytest.mark.filterwarnings("error"))
