"""An OTS port coming up (a lit XCON) makes LLDP probe every up packet port at once: a bypass at Y
re-joins A:3 to C:1 while neither packet port changes state, so without this the new link waited for
the next periodic round (up to ``lldp_interval``) and the traffic stayed dark that long."""
from __future__ import annotations

from types import SimpleNamespace

from os_ken.ofproto import ofproto_v1_3_parser

from app.controller import events, lldp
from app.controller.lldp import LldpDiscovery, parse_lldp
from app.controller.model import OTS, PACKET, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.southbound import CONTEXT as SOUTHBOUND
from app.controller.southbound import OpenFlowSouthbound
from tests.unit.controller.test_forwarding_arp import FakeDp


def make(monkeypatch):
    spawned: list = []
    monkeypatch.setattr(lldp, "hub", SimpleNamespace(spawn=lambda f, *a: spawned.append((f, a)), sleep=lambda s: None))
    view, sb = NetworkView(), OpenFlowSouthbound()
    a = SwitchInfo(0xA1, PACKET, 4, "A", {p: PortInfo(p, f"A-eth{p}", "00:00:00:00:00:0a", p != 4) for p in (1, 3, 4)})
    y = SwitchInfo(0xF02, OTS, 1, "Y", {p: PortInfo(p, f"ODU2-{p}", "02:00:00:00:0f:02", False) for p in (1, 4)})
    view.switches.update({a.dpid: a, y.dpid: y})
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
    assert probed(dp) == [PortRef(0xA1, 1), PortRef(0xA1, 3)]  # A:4 is down: not probed
    old = y.ports[1]
    app._port_change(events.EventPortChange(y, old, PortInfo(1, old.name, old.hw_addr, True), 0.0))
    assert len(spawned) == 1  # the next XCON gets its own burst


def test_an_ots_port_going_dark_probes_nothing(monkeypatch):
    app, dp, y, spawned = make(monkeypatch)
    lit = PortInfo(1, "ODU2-1", "02:00:00:00:0f:02", True)
    app._port_change(events.EventPortChange(y, lit, PortInfo(1, "ODU2-1", "02:00:00:00:0f:02", False), 0.0))
    app._port_change(events.EventPortChange(y, lit, lit, 0.0))  # up before and after: nothing new
    assert spawned == [] and probed(dp) == []
