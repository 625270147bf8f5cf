"""Keepalive: the agent sends ECHO_REQUESTs upstream and re-dials a controller that stops answering
(a dead controller behind a half-open TCP session never closes the connection)."""
from __future__ import annotations

import time

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp

from ots_virtual import of10
from ots_virtual.__main__ import main
from ots_virtual.agent import OtsAgent, check_keepalive

PORTS = {1: "ODU2", 2: "ODU2"}


def wait_until(cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def start_agent(ctl, **kw) -> OtsAgent:
    a = OtsAgent("ut-ka", 0x0F09, PORTS, ctl.address, delay_min=0, delay_max=0, claim=False, ovs_wait=0, **kw)
    a.start()
    ctl.wait_connected()
    return a


def echo_requests(ctl) -> list:
    return [r for r in ctl.received if r.header.msg_type == ofp.OFPT_ECHO_REQUEST]


def test_echo_requests_go_upstream_and_an_answering_controller_keeps_the_session(ctl):
    agent = start_agent(ctl, echo_interval=0.2, echo_timeout=1.0)
    try:
        wait_until(lambda: len(echo_requests(ctl)) >= 6)  # > echo_timeout worth of echoes
        assert ctl.connections == 1 and agent.keepalive_drops == 0
        assert echo_requests(ctl)[0].raw[8:] == b"mlte-ots-keepalive"
    finally:
        agent.stop()


def test_a_controller_that_stops_answering_is_redialled(ctl, monkeypatch):
    agent = start_agent(ctl, echo_interval=0.2, echo_timeout=0.8)
    try:
        wait_until(lambda: len(echo_requests(ctl)) >= 1)
        real_send = ctl._send_raw

        def silent(data: bytes) -> None:  # the controller hangs: the TCP session stays open, no replies
            if of10.parse_header(data).msg_type != ofp.OFPT_ECHO_REPLY:
                real_send(data)

        monkeypatch.setattr(ctl, "_send_raw", silent)
        wait_until(lambda: ctl.connections == 2)  # the agent gave up on the silent session and re-dialled
        assert agent.keepalive_drops >= 1
        monkeypatch.setattr(ctl, "_send_raw", real_send)
        ctl.wait_connected()
        assert ctl.features().datapath_id == 0x0F09  # the new session works
    finally:
        agent.stop()


def test_keepalive_off_sends_no_echo(ctl):
    agent = start_agent(ctl, echo_interval=0, echo_timeout=0)
    try:
        assert ctl.features().datapath_id == 0x0F09
        time.sleep(0.5)
        assert echo_requests(ctl) == [] and ctl.connections == 1
    finally:
        agent.stop()


def test_keepalive_settings_are_checked(capsys):
    check_keepalive(5, 15)
    check_keepalive(0, 0)
    for bad in ((5, 5), (5, 1), (-1, 3)):
        with pytest.raises(ValueError):
            check_keepalive(*bad)
    rc = main(["--bridge", "b", "--dpid", "1", "--ports", "1:ODU2", "--echo-interval", "5", "--echo-timeout", "2"])
    assert rc == 2 and "echo timeout" in capsys.readouterr().err
