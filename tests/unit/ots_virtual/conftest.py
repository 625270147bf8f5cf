"""Shared fixtures of the OTS agent tests: a foreign OF1.0 controller and agents connected to it
(the OVS side stays unconnected: no root, no OVS)."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from ots_virtual.agent import OtsAgent
from tests.lib.of10_client import Of10Controller


@pytest.fixture
def ctl() -> Iterator[Of10Controller]:
    c = Of10Controller()
    yield c
    c.close()


@pytest.fixture
def start_agent(ctl: Of10Controller) -> Iterator[Callable[..., OtsAgent]]:
    """``start_agent(bridge, dpid, ports, **kw)``: an agent connected to ``ctl``, stopped after the test."""
    started: list[OtsAgent] = []

    def start(bridge: str, dpid: int, ports: dict[int, str], **kw) -> OtsAgent:
        a = OtsAgent(bridge, dpid, ports, ctl.address, claim=False, ovs_wait=0, **kw)
        a.start()
        started.append(a)
        ctl.wait_connected()
        return a

    yield start
    for a in started:
        a.stop()
