"""Shared pytest set-up: integration tests are skipped unless root with OVS available."""
from __future__ import annotations

import os
import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    have_net = os.geteuid() == 0 and shutil.which("ovs-vsctl") is not None
    skip = pytest.mark.skip(reason="needs root and Open vSwitch (run `make test` as root)")
    for item in items:
        if "integration" in item.keywords and not have_net:
            item.add_marker(skip)
