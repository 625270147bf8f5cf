"""An OTS port coming up (a lit XCON) makes LLDP probe every up packet port at once: a bypass at Y
re-joins A:3 to C:1 while neither packet port changes state, so without this the new link waited for
the next periodic round (up to ``lldp_interval``) and the traffic stayed dark that long."""
from __future__ import annotations

import time

import pytest
from os_ken.ofproto import ofproto_v1_3_parser

from app.controller import events, guard, lldp
from app.controller.lldp import LldpDiscovery, parse_lldp
from app.controller.model import OTS, PACKET, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from tests.lib.timers import FakeTimers
from tests.unit.controller.test_forwarding_arp import FakeDp


class Fakes(FakeTimers):
    """The app's scheduler on fake time; :meth:`run_all` hands the events it posts to the app."""

    def __init__(self, app: LldpDiscovery) -> None:
        super().__init__()
        self.app = app
        app.services = self.scheduler(app.name, lldp.services(app.interval))

    def __len__(self) -> int:
        return len(self.spawned)

    def run_all(self) -> None:
        self.drain({lldp.EventLldpBurst: self.app._burst, lldp.EventLldpRound: self.app._periodic})


def make(monkeypatch):
    view, sb = NetworkView(), OpenFlowSouthbound()
    a = SwitchInfo(0xA1, PACKET, 4, "A", {p: PortInfo(p, f"A-eth{p}", "00:00:00:00:00:0a", p != 4) for p in (1, 3, 4)})
    y = SwitchInfo(0xF02, OTS, 1, "Y", {p: PortInfo(p, f"ODU2-{p}", "02:00:00:00:0f:02", False) for p in (1, 4)})
    view.add_switch(a)
    view.add_switch(y)
    dp = FakeDp(0xA1)
    sb.datapaths[0xA1] = dp
    app = LldpDiscovery(**{VIEW: view, SOUTHBOUND: sb})
    return app, dp, y, Fakes(app)


def probed(dp) -> list[PortRef]:
    return [parse_lldp(m.data) for m in dp.sent if isinstance(m, ofproto_v1_3_parser.OFPPacketOut)]


def test_an_ots_port_coming_up_probes_every_up_packet_port_once(monkeypatch):
    app, dp, y, spawned = make(monkeypatch)
    for port in (1, 4):  # both ends of XCON Y 1<->4 light up: one burst
        old = y.ports[port]
        app._port_change(events.EventPortChange(y, old, PortInfo(port, old.name, old.hw_addr, True), 0.0))
    assert len(spawned) == 1 and probed(dp) == []
    spawned.run_all()
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
    assert len(spawned) == 0 and probed(dp) == []


def test_the_burst_is_probed_again_after_it_in_case_it_raced_the_light(monkeypatch):
    """A CI run lost the one burst of a router bypass (sent 0.4 ms after Y's ports came up) and the new
    link waited for the next round, dark for 1.1 s: the follow-ups probe again 20, 100 and 300 ms on."""
    app, dp, y, spawned = make(monkeypatch)
    slept = spawned.slept
    old = y.ports[1]
    app._port_change(events.EventPortChange(y, old, PortInfo(1, old.name, old.hw_addr, True), 0.0))
    spawned.run_all()
    assert lldp.FOLLOW_UP_S == (0.02, 0.1, 0.3)
    assert slept == [0, 0.02, pytest.approx(0.08), pytest.approx(0.2)]  # posted at once, then the gaps
    assert len(probed(dp)) == 2 * 4


def test_a_newer_burst_takes_over_the_follow_ups(monkeypatch):
    """Two XCONs lit 50 ms apart: the first burst's follow-ups stop where the second's begin (one
    chain of follow-ups at a time, after the latest light)."""
    app, dp, y, spawned = make(monkeypatch)
    # during the first burst's first follow-up wait, another XCON is lit
    spawned.after = {2: lambda: setattr(app, "_bursts", app._bursts + 1)}
    old = y.ports[1]
    app._port_change(events.EventPortChange(y, old, PortInfo(1, old.name, old.hw_addr, True), 0.0))
    spawned.run_all()
    assert len(probed(dp)) == 2  # the first burst only: the newer one sends the follow-ups


def test_a_stopped_app_sends_no_follow_ups(monkeypatch):
    app, dp, y, spawned = make(monkeypatch)
    spawned.after = {2: app.stop}  # stopped during the first follow-up's wait
    old = y.ports[1]
    app._port_change(events.EventPortChange(y, old, PortInfo(1, old.name, old.hw_addr, True), 0.0))
    spawned.run_all()
    assert len(probed(dp)) == 2


def test_the_periodic_round_probes_and_expires_and_a_failing_round_is_counted(monkeypatch):
    app, dp, y, fakes = make(monkeypatch)
    fakes.posted.append(lldp.EventLldpRound())
    fakes.run_all()
    assert probed(dp) == [PortRef(0xA1, 1), PortRef(0xA1, 3)]
    before = len(guard.failures)
    monkeypatch.setattr(app, "_probe_all", lambda **kw: 1 / 0)
    fakes.posted.append(lldp.EventLldpRound())
    fakes.run_all()  # swallowed: the next round comes all the same
    st = app.services.status()["mlte_lldp.round"]
    assert st["runs"] == 2 and st["failures"] == 1 and "ZeroDivisionError" in st["last_error"]
    assert "mlte_lldp.round" in guard.failures[-1]
    del guard.failures[before:]
    app.services.stop()


def test_the_round_is_a_service_posted_at_start_and_every_interval():
    rows = {s.name: s for s in lldp.services(1.5)}
    assert rows["round"].event is lldp.EventLldpRound and rows["round"].interval == 1.5 and rows["round"].first == 0.0
    assert rows["burst"].interval is None  # posted by the app itself (later)


def test_periodic_rounds_skip_packet_ports_whose_ots_port_is_in_no_xcon_and_bursts_do_not(monkeypatch):
    """A:1 and A:3 are attached to Y:1 and Y:4 (the scan found them). Y read back: no XCON on Y:1 -> A:1 is
    dark, skipped by the periodic round; A:3's Y:4 maybe applied (a barrier timed out) -> probed."""
    app, dp, y, spawned = make(monkeypatch)
    view = app.view
    view.set_scan({(y.dpid, 1): PortRef(0xA1, 1), (y.dpid, 4): PortRef(0xA1, 3)})
    app._round()
    assert probed(dp) == [PortRef(0xA1, 1), PortRef(0xA1, 3)]  # Y's XCONs not read back: anything may be lit
    view.set_xcons(y.dpid, {})
    view.mark_unknown(y.dpid, [(4, 7)])
    assert view.dark_adaptation_ports() == {PortRef(0xA1, 1)}
    dp.sent.clear()
    app._round()
    assert probed(dp) == [PortRef(0xA1, 3)]
    dp.sent.clear()
    app._burst_step(lldp.EventLldpBurst())  # a burst (an OTS port came up) probes every up port
    assert probed(dp) == [PortRef(0xA1, 1), PortRef(0xA1, 3)]
    view.set_xcons(y.dpid, {1: 4})  # Y:1 in an XCON now
    assert view.dark_adaptation_ports() == set()
    view.remove_switch(y.dpid)  # Y gone: nothing is known dark
    assert view.dark_adaptation_ports() == set()


def test_a_round_skips_the_ports_whose_link_a_probe_confirmed_since_the_previous_round(monkeypatch):
    """A:1 -> Y's neighbour is a known link; a latency probe crossed it after the last round began: this
    round sends no LLDP frame there, the next one does again (no newer probe)."""
    from app.controller.model import PacketLink

    app, dp, y, spawned = make(monkeypatch)
    view = app.view
    link = PacketLink(PortRef(0xA1, 1), PortRef(0xA1, 3))
    view.add_link(link, time.time())
    app._round()  # the first round: nothing skipped
    assert probed(dp) == [PortRef(0xA1, 1), PortRef(0xA1, 3)]
    assert view.confirm_link(link, app._round_at + 1e-6)
    time.sleep(0.01)  # the next round begins after the confirmation
    dp.sent.clear()
    app._round()
    assert probed(dp) == [PortRef(0xA1, 3)]
    dp.sent.clear()
    app._round()
    assert probed(dp) == [PortRef(0xA1, 1), PortRef(0xA1, 3)]
