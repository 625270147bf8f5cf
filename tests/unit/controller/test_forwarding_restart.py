"""Forwarding after a controller restart: the switches keep their rules (fake datapaths, no switch).

Line A(0xa1) -- A:2/B:1 -- B(0xb1); h1 at A:1, h3 at B:3. The rules the previous controller left are
read back, adopted, held while the topology is unknown, and after settling the hosts are inferred and
nothing is sent: a restart of an unchanged network changes no rule.
"""
from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3, ofproto_v1_3_parser

from app.controller import events
from app.controller.forwarding import (
    COOKIE_FWD,
    FWD_PRIORITY,
    EventRulesReadBack,
    Forwarding,
    forwarding_rule,
)
from app.controller.model import PACKET, PacketLink, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import FlowStat, OpenFlowSouthbound, flow_stat
from app.controller.view_changes import HostAdded, HostRemoved
from topology import rule_plan

A, B = 0xA1, 0xB1
H1, H3 = "00:00:00:00:00:01", "00:00:00:00:00:03"
OLD_RULES = {A: {H1: 1, H3: 2}, B: {H1: 1, H3: 3}}
LINK = [PacketLink(PortRef(A, 2), PortRef(B, 1)), PacketLink(PortRef(B, 1), PortRef(A, 2))]
P = ofproto_v1_3_parser


class FakeDp:
    ofproto, ofproto_parser = ofproto_v1_3, ofproto_v1_3_parser

    def __init__(self, dpid: int):
        self.id = dpid
        self.sent: list = []
        self._xid = 0

    def send_msg(self, msg) -> None:
        if msg.xid is None:
            self._xid += 1
            msg.set_xid(self._xid)
        self.sent.append(msg)

    def flow_mods(self) -> list:
        return [m for m in self.sent if isinstance(m, P.OFPFlowMod)]


def make_app():
    dps = {A: FakeDp(A), B: FakeDp(B)}
    sws = {d: SwitchInfo(d, PACKET, 4, n, {p: PortInfo(p, f"{n}-eth{p}", "00:00:00:00:00:0a", True) for p in (1, 2, 3)})
           for d, n in ((A, "A"), (B, "B"))}
    view, southbound = NetworkView(), OpenFlowSouthbound()
    for sw in sws.values():
        view.add_switch(sw)
    southbound.datapaths.update(dps)
    app = Forwarding(**{VIEW: view, SOUTHBOUND: southbound})
    app.changes = []  # what the view announced (the inventory app broadcasts them as os-ken events)
    view.subscribe(app.changes.append)
    return app, dps, sws, view  # the view's link methods stand in for the LLDP app


def stats_entry(mac: str, port: int, priority: int = FWD_PRIORITY, cookie: int = COOKIE_FWD) -> FlowStat:
    """A rule as the southbound hands it over (parsed from an os-ken OF1.3 flow-stats entry)."""
    st = P.OFPFlowStats(table_id=0, priority=priority, cookie=cookie, match=P.OFPMatch(eth_dst=mac),
                        instructions=[P.OFPInstructionActions(ofproto_v1_3.OFPIT_APPLY_ACTIONS,
                                                              [P.OFPActionOutput(port)])],
                        packet_count=5, byte_count=500)
    return flow_stat(ofproto_v1_3.OFP_VERSION, st)


def answer(app, dp: FakeDp, rules: dict[str, int]) -> None:
    """The switch's answer to the read-back: its forwarding rules, and a rule of another band."""
    stats = [stats_entry(m, p) for m, p in rules.items()]
    stats.append(stats_entry("00:00:00:00:00:99", 1, priority=rule_plan.ARP.priority()))  # not a forwarding rule
    app._rules_read_back(EventRulesReadBack(dp.id, app._readback[dp.id].token, stats))


def restart(app, dps, sws, lldp, links=LINK):
    """Both switches reconnect to the new controller, answer the read-back, LLDP finds the link."""
    for d in (A, B):
        app._switch_enter(events.EventSwitchEnter(sws[d]))
    for d in (A, B):
        answer(app, dps[d], OLD_RULES[d])
    for link in links:
        lldp.add_link(link, 1.0)
        app._link_add(events.EventLinkAdd(link))


def test_entering_switches_are_not_wiped_and_are_asked_for_our_rules():
    app, dps, sws, _ = make_app()
    app._switch_enter(events.EventSwitchEnter(sws[A]))
    mods = dps[A].flow_mods()
    assert not [m for m in mods if m.command != ofproto_v1_3.OFPFC_ADD]  # the old code deleted every rule here
    assert {m.priority for m in mods} == {rule_plan.TABLE_MISS.priority(), rule_plan.ARP.priority()}
    assert A in app._readback  # a read-back of our rules began


def test_a_restart_of_an_unchanged_network_sends_no_forwarding_rule():
    app, dps, sws, lldp = make_app()
    restart(app, dps, sws, lldp)
    assert app.installed == OLD_RULES and app.holding()
    before = {d: len(dp.flow_mods()) for d, dp in dps.items()}
    app.settle_at = 0.0  # the settle time has passed
    app._settled(None)
    assert {m: h.port for m, h in app.hosts.items()} == {H1: PortRef(A, 1), H3: PortRef(B, 3)}
    assert {d: len(dp.flow_mods()) for d, dp in dps.items()} == before  # not one FLOW_MOD
    assert app.installed == OLD_RULES
    assert [type(c) for c in app.changes if isinstance(c, (HostAdded, HostRemoved))] == [HostAdded, HostAdded]


def test_adopted_rules_are_held_while_the_topology_is_half_known():
    """A host learnt before LLDP found the link: the plan has no path to it from A, yet A keeps its rule."""
    app, dps, sws, lldp = make_app()
    restart(app, dps, sws, lldp, links=[])
    app._learn(H3, "10.0.0.3", PortRef(B, 3))
    assert app.installed[A] == {H1: 1, H3: 2}
    assert not [m for dp in dps.values() for m in dp.flow_mods() if m.command == ofproto_v1_3.OFPFC_DELETE_STRICT]


def test_after_settling_rules_the_plan_does_not_want_go():
    """Settled without the link (it really is gone): the hosts cannot be told from link ends, the
    adopted rules across the missing link are deleted as the plan says."""
    app, dps, sws, lldp = make_app()
    restart(app, dps, sws, lldp, links=[])
    app.settle_at = 0.0
    app._settled(None)
    deleted = {(d, m.match["eth_dst"]) for d, dp in dps.items() for m in dp.flow_mods()
               if m.command == ofproto_v1_3.OFPFC_DELETE_STRICT}
    assert deleted == {(A, H1), (A, H3), (B, H1), (B, H3)}
    assert app.installed == {A: {}, B: {}}


def test_a_held_rule_into_a_port_that_went_down_is_deleted_at_once():
    app, dps, sws, lldp = make_app()
    restart(app, dps, sws, lldp)
    old = sws[A].ports[2]
    app.view.set_port(A, 2, PortInfo(2, old.name, old.hw_addr, False), 1.0)
    for link in lldp.remove_port_links(PortRef(A, 2)):
        app._link_delete(events.EventLinkDelete(link))
    deleted = [(d, m.match["eth_dst"]) for d, dp in dps.items() for m in dp.flow_mods()
               if m.command == ofproto_v1_3.OFPFC_DELETE_STRICT]
    assert deleted == [(A, H3)] and app.installed[B] == OLD_RULES[B]


def test_an_older_answer_is_ignored_and_only_our_rules_count():
    app, dps, sws, _ = make_app()
    app._switch_enter(events.EventSwitchEnter(sws[A]))
    old = app._readback[A].token
    app._switch_enter(events.EventSwitchEnter(sws[A]))  # reconnected: a new read-back
    app._rules_read_back(EventRulesReadBack(A, old, [stats_entry(H1, 1)]))
    assert app.installed[A] == {}
    assert forwarding_rule(stats_entry(H1, 1, cookie=rule_plan.RESERVATION.cookie(5))) is None
    assert forwarding_rule(stats_entry(H1, 4)) == (H1, 4)


def test_a_switch_that_cannot_tell_its_rules_is_started_clean():
    """No answer to the read-back: the rules are unknown, so ours are deleted and planned afresh."""
    app, dps, sws, _ = make_app()
    app._switch_enter(events.EventSwitchEnter(sws[A]))
    dps[A].sent.clear()
    app._rules_read_back(EventRulesReadBack(A, app._readback[A].token, None, "no FLOW_STATS reply"))
    mods = dps[A].flow_mods()
    assert mods[0].command == ofproto_v1_3.OFPFC_DELETE and mods[0].cookie == COOKIE_FWD
    assert mods[0].cookie_mask == rule_plan.ALL_BITS
    assert {m.priority for m in mods[1:]} == {rule_plan.TABLE_MISS.priority(), rule_plan.ARP.priority()}
