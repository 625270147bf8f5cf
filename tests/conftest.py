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


@pytest.fixture(autouse=True, scope="session")
def _api_token_file(tmp_path_factory):
    """The control API's token file of every controller and client a test starts without naming one:
    a temporary file, never the machine's /run/mlte/api-token or ~/.local/state/mlte/api-token. It is
    made at once, as the first controller would: a client test that talks to a fake controller must not
    depend on a real one having run before it in the session (tests/unit/topology/test_topo_cli.py
    failed when run alone)."""
    from app.controller import api_token

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLTE_API_TOKEN_FILE", str(tmp_path_factory.mktemp("api-token") / "api-token"))
        api_token.load_or_create(api_token.resolve())
        yield
