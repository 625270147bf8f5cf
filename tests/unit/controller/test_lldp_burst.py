"""An OTS port coming up (a lit XCON) makes LLDP probe every up packet port at once: a bypass at Y
re-joins A:3 to C:1 while neither packet port changes state, so without this the new link waited for
the next periodic round (up to ``lldp_interval``) and the traffic stayed dark that long."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from os_ken.ofproto import ofproto_v1_3_parser

from app.controller import events, lldp
from app.controller.lldp import LldpDiscovery, parse_lldp
from app.controller.model import OTS, PACKET, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from tests.unit.controller.test_forwarding_arp import FakeDp


def make(monkeypatch, sleep=lambda s: None):
    spawned: list = []
    monkeypatch.setattr(lldp, "hub", SimpleNamespace(spawn=lambda f, *a: spawned.append((f, a)), sleep=sleep))
    view, sb = NetworkView(), OpenFlowSouthbound()
    a = SwitchInfo(0xA1, PACKET, 4, "A", {p: PortInfo(p, f"A-eth{p}", "00:00:00:00:00:0a", p != 4) for p in (1, 3, 4)})
    y = SwitchInfo(0xF02, OTS, 1, "Y", {p: PortInfo(p, f"ODU2-{p}", "02:00:00:00:0f:02", False) for p in (1, 4)})
    view.add_switch(a)
    view.add_switch(y)
    dp = FakeDp(0xA1)
    sb.datapaths[0xA1] = dp
    return LldpDiscovery(**{VIEW: view, SOUTHBOUND: sb}), dp, y, spawned


def probed(dp) -> list[PortRef]:
    return [parse_lldp(m.data) for m in dp.sent if isinstance(m, ofproto_v1_3_parser.OFPPacketOut)]


def test_an_ots_port_coming_up_probes_every_up_packet_port_once(monkeypatch):
    app, dp, y, spawned = make(monkeypatch)
    for port in (1, 4):  # both ends of XCON Y 1<->4 light up: one burst
        old = y.ports[port]
        app._port_change(events.EventPortChange(y, old, PortInfo(port, old.name, old.hw_addr, True), 0.0))
    assert len(spawned) == 1 and probed(dp) == []
    f, args = spawned.pop()
    f(*args)
    rounds = 1 + len(lldp.FOLLOW_UP_S)  # the burst and its follow-ups
    assert probed(dp) == [PortRef(0xA1, 1), PortRef(0xA1, 3)] * rounds  # A:4 is down: not probed
    old = y.ports[1]
    app._port_change(events.EventPortChange(y, old, PortInfo(1, old.name, old.hw_addr, True), 0.0))
    assert len(spawned) == 1  # the next XCON gets its own burst


def test_an_ots_port_going_dark_probes_nothing(monkeypatch):
    app, dp, y, spawned = make(monkeypatch)
    lit = PortInfo(1, "ODU2-1", "02:00:00:00:0f:02", True)
    app._port_change(events.EventPortChange(y, lit, PortInfo(1, "ODU2-1", "02:00:00:00:0f:02", False), 0.0))
    app._port_change(events.EventPortChange(y, lit, lit, 0.0))  # up before and after: nothing new
    assert spawned == [] and probed(dp) == []


def test_the_burst_is_probed_again_after_it_in_case_it_raced_the_light(monkeypatch):
    """A CI run lost the one burst of a router bypass (sent 0.4 ms after Y's ports came up) and the new
    link waited for the next round, dark for 1.1 s: the follow-ups probe again 20, 100 and 300 ms on."""
    slept: list[float] = []
    app, dp, y, spawned = make(monkeypatch, sleep=slept.append)
    old = y.ports[1]
    app._port_change(events.EventPortChange(y, old, PortInfo(1, old.name, old.hw_addr, True), 0.0))
    f, args = spawned.pop()
    f(*args)
    assert lldp.FOLLOW_UP_S == (0.02, 0.1, 0.3)
    assert slept == [0, 0.02, pytest.approx(0.08), pytest.approx(0.2)]  # hub.sleep(0) first, then the gaps
    assert len(probed(dp)) == 2 * 4


def test_a_newer_burst_takes_over_the_follow_ups(monkeypatch):
    """Two XCONs lit 50 ms apart: the first burst's follow-ups stop where the second's begin (one
    chain of follow-ups at a time, after the latest light)."""
    app, dp, y, spawned = make(monkeypatch)
    state = {"n": 0}

    def sleep(_s: float) -> None:
        state["n"] += 1
        if state["n"] == 2:  # during the first burst's first follow-up wait, another XCON is lit
            app._bursts += 1

    monkeypatch.setattr(lldp, "hub", SimpleNamespace(spawn=lambda f, *a: spawned.append((f, a)), sleep=sleep))
    old = y.ports[1]
    app._port_change(events.EventPortChange(y, old, PortInfo(1, old.name, old.hw_addr, True), 0.0))
    f, args = spawned.pop()
    f(*args)
    assert len(probed(dp)) == 2  # the first burst only: the newer one sends the follow-ups


def test_a_stopped_app_sends_no_follow_ups(monkeypatch):
    app, dp, y, spawned = make(monkeypatch, sleep=lambda s: setattr(app, "is_active", s == 0))
    old = y.ports[1]
    app._port_change(events.EventPortChange(y, old, PortInfo(1, old.name, old.hw_addr, True), 0.0))
    f, args = spawned.pop()
    f(*args)
    assert len(probed(dp)) == 2
