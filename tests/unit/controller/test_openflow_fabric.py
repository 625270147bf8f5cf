"""The controller's real apps and plans, their OpenFlow applied by fake tables (Fig. 2, no switch).

Everything the apps send leaves through the one southbound into :mod:`tests.lib.fakeoftable` tables
wired like the Fig. 2 testbed (:mod:`tests.lib.offabric`); the tests then ask where packets go:
LLDP discovers the lit circuits through the trap rule and PACKET_OUTs, ARP reaches the controller
and is flooded or answered, learnt hosts get shortest-path rules that avoid reserved ports, a
reservation's rules carry its traffic metered over its circuit, and a TE offload moves exactly one
5-tuple onto the offload circuit and back.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from os_ken.lib.packet import arp, ethernet, packet
from os_ken.lib.packet.ether_types import ETH_TYPE_ARP

from app.controller import events
from app.controller.forwarding import Forwarding
from app.controller.lldp import LldpDiscovery
from app.controller.model import PACKET, PacketLink, PortRef
from app.controller.ots_driver import OtsDriver
from app.controller.reservation_circuits import circuit_for
from app.controller.reservation_manager import metered
from app.te.decisions import OffloadDecider
from app.update import planner
from app.update.executor import execute
from mininet_labs.circuits import FIG2_CIRCUITS
from pce.reservation import PathRequest, compute_path
from tests.lib.fakeoftable import CONTROLLER
from tests.lib.offabric import OFFabric
from topology import rule_plan
from topology.flow import FiveTuple
from topology.spec import fig2_testbed, spec_to_graph

TCP = {"ip_proto": 6, "tcp_src": 40000, "tcp_dst": 5001}


class Controller:
    """The apps of a running controller over a fabric; events between them delivered synchronously."""

    def __init__(self, fabric: OFFabric, circuits: list[str]) -> None:
        self.fabric = fabric
        ctx = fabric.contexts()
        self.driver = OtsDriver(**ctx)
        self.fwd = Forwarding(**ctx)
        self.lldp = LldpDiscovery(**ctx)
        self.events: list = []
        for app in (self.driver, self.fwd, self.lldp):
            app.send_event_to_observers = self._event
        # the view's changes reach the apps as the inventory app broadcasts them (the change bus)
        fabric.view.subscribe(lambda change: self._event(events.event_of(change)))
        for name in circuits:
            for ots, a, b in FIG2_CIRCUITS[name]:
                assert self.driver.install(ots, a, b).ok
        for sw in fabric.view.of_kind(PACKET):
            enter = events.EventSwitchEnter(sw)
            self.lldp._switch_enter(enter)
            self.fwd._switch_enter(enter)
        self.fabric.deliver(self.apps)  # the LLDP probes cross the links and come back as PACKET_INs

    @property
    def apps(self) -> list:
        return [self.lldp, self.fwd]

    def _event(self, ev) -> None:
        self.events.append(ev)
        if isinstance(ev, events.EventLinkAdd):
            self.fwd._link_add(ev)
        elif isinstance(ev, events.EventLinkDelete):
            self.fwd._link_delete(ev)
        elif isinstance(ev, events.EventReservedPorts):
            self.fwd._reserved_changed(ev)

    def reserve(self, owner: str, ports) -> None:
        """What the reservation and TE apps do before a plan runs: forwarding keeps off these ports."""
        self.fabric.view.reserve(owner, ports)  # the view announces it: forwarding re-plans

    def arp(self, src: str, dst: str, reply: bool = False) -> list[tuple[str, bytes]]:
        """Host ``src`` asks for ``dst``'s address (or answers ``dst``); what the hosts received."""
        a, b = self.fabric.hosts[src], self.fabric.hosts[dst]
        pkt = packet.Packet()
        pkt.add_protocol(ethernet.ethernet(b.mac if reply else "ff:ff:ff:ff:ff:ff", a.mac, ETH_TYPE_ARP))
        pkt.add_protocol(arp.arp(opcode=arp.ARP_REPLY if reply else arp.ARP_REQUEST, src_mac=a.mac, src_ip=a.ip,
                                 dst_mac=b.mac if reply else "00:00:00:00:00:00", dst_ip=b.ip))
        pkt.serialize()
        return self.fabric.inject(src, bytes(pkt.data), self.apps)

    def learn_hosts(self) -> None:
        """Every host speaks once (an ARP round), as on a lab's first ping."""
        self.arp("h1", "h3")
        self.arp("h3", "h1", reply=True)
        self.arp("h2", "h4")
        self.arp("h4", "h2", reply=True)


def link(fabric: OFFabric, a: tuple[str, int], b: tuple[str, int]) -> PacketLink:
    return PacketLink(PortRef(fabric.dpid(a[0]), a[1]), PortRef(fabric.dpid(b[0]), b[1]))


@pytest.fixture
def fabric() -> OFFabric:
    return OFFabric(fig2_testbed())


def test_lldp_is_trapped_to_the_controller_and_finds_the_lit_circuits(fabric):
    ctl = Controller(fabric, ["initial"])
    lldp_frame = {"in_port": 3, "eth_type": 0x88CC, "eth_dst": "01:80:c2:00:00:0e", "eth_src": "02:00:00:00:00:01"}
    assert fabric.table("A").outputs(lldp_frame) == {CONTROLLER}
    assert fabric.table("A").lookup(lldp_frame).rules[0].priority == rule_plan.LLDP.priority()
    found = set(fabric.view.links.links())
    assert found == {link(fabric, ("A", 3), ("B", 1)), link(fabric, ("B", 1), ("A", 3)),
                     link(fabric, ("B", 2), ("C", 1)), link(fabric, ("C", 1), ("B", 2))}
    assert sum(isinstance(e, events.EventLinkAdd) for e in ctl.events) == 4


def test_arp_reaches_the_controller_is_flooded_to_edges_and_answered_by_proxy(fabric):
    ctl = Controller(fabric, ["initial"])
    probe = {"in_port": 1, "eth_type": ETH_TYPE_ARP, "eth_src": "00:00:00:00:00:01", "eth_dst": "ff:ff:ff:ff:ff:ff"}
    assert fabric.reach("h1", probe) == {"controller@A"}  # never flooded by the switch itself
    got = ctl.arp("h1", "h3")  # h3 unknown yet: the controller copies the request to every edge port
    assert sorted(h for h, _ in got) == ["h2", "h3", "h4"]
    got = ctl.arp("h3", "h1", reply=True)  # the reply goes straight to the asker's port
    assert [h for h, _ in got] == ["h1"]
    got = ctl.arp("h2", "h3")  # h3 is known now: answered by the controller, nothing crosses the network
    assert [h for h, _ in got] == ["h2"]
    answer = packet.Packet(got[0][1]).get_protocol(arp.arp)
    assert (answer.opcode, answer.src_mac, answer.src_ip) == (arp.ARP_REPLY, "00:00:00:00:00:03", "10.0.0.3")


def test_learnt_hosts_get_rules_on_the_shortest_path_and_reserved_ports_are_avoided(fabric):
    ctl = Controller(fabric, ["initial", "offload"])  # A-B-C over two circuits, and A-C direct
    ctl.learn_hosts()
    h1_h3 = fabric.packet("h1", "h3", **TCP)
    assert fabric.reach("h1", h1_h3) == {"h3"}
    assert fabric.path("h1", h1_h3) == [("A", 1, 4), ("C", 2, 3)]  # the direct circuit: one hop
    assert fabric.path("h4", fabric.packet("h4", "h2")) == [("C", 4, 2), ("A", 4, 2)]
    ctl.reserve("reservation9", [("A", 4), ("C", 2)])  # a reservation holds the direct circuit
    assert fabric.path("h1", h1_h3) == [("A", 1, 3), ("B", 1, 2), ("C", 1, 3)]
    assert fabric.path("h3", fabric.packet("h3", "h1")) == [("C", 3, 1), ("B", 2, 1), ("A", 3, 1)]
    unknown = fabric.packet("h1", "h3", eth_dst="00:00:00:00:00:77")
    assert fabric.reach("h1", unknown) == {"controller@A"}  # no rule: the table-miss rule


def test_a_reservation_plan_steers_its_traffic_metered_over_its_circuit(fabric):
    ctl = Controller(fabric, ["offload"])  # default forwarding A-C over the offload circuit
    ctl.learn_hosts()
    g = spec_to_graph(fig2_testbed())
    c = circuit_for(g, 5, "A:1", "C:3", compute_path(g, PathRequest("A:1", "C:3", 5, 0, 3600)).edges)
    c = metered(c, rule_plan.reservation_meter(5))
    live = fabric.live()
    fabric.auto_links = True  # the plan waits for its circuit's link: let the view follow the light
    assert all(live.set_meter(r.switch, r.meter, 5000).ok for r in c.ingress)
    ctl.reserve("reservation5", c.packet_ports)
    plan = planner.provision(c.xcons, c.packet_ports, list(c.segments), list(c.transit), list(c.ingress),
                             verify=False, stable_ms=5, circuit_timeout_s=1.0, plan_id="res5")
    rec = execute(plan, live, sleep=time.sleep)
    assert rec.state == "done", rec.error
    assert (("A", 3), ("C", 1)) == c.segments[0]
    for src, dst in (("h1", "h3"), ("h1", "h4")):  # a port reservation: everything in at A:1 crosses it
        hops = fabric.path(src, fabric.packet(src, dst, **TCP))
        assert hops == [("A", 1, 3), ("C", 1, 3)], (src, dst, hops)
        assert fabric.table("A").lookup({**fabric.packet(src, dst, **TCP), "in_port": 1}).meters == [5]
    assert fabric.path("h3", fabric.packet("h3", "h1")) == [("C", 3, 1), ("A", 3, 1)]
    assert fabric.table("C").lookup({**fabric.packet("h3", "h1"), "in_port": 3}).meters == [5]
    assert fabric.table("A").meters == {5: 5000} and fabric.table("C").meters == {5: 5000}
    assert fabric.path("h2", fabric.packet("h2", "h4")) == [("A", 2, 4), ("C", 2, 4)]  # others stay off it
    assert fabric.table("A").lookup({**fabric.packet("h2", "h4"), "in_port": 2}).meters == []
    rec = execute(planner.release(c.xcons, list(c.transit), list(c.ingress), drain=False, plan_id="res5-off"),
                  live, sleep=time.sleep)
    assert rec.state == "done", rec.error
    assert fabric.table("A").rules_with(rule_plan.RESERVATION.cookie(5), rule_plan.RESERVATION.mask(True)) == []
    assert fabric.far_end(("A", 3)) is None  # its XCONs are gone


def test_a_te_offload_moves_one_five_tuple_onto_the_circuit_and_back(fabric):
    ctl = Controller(fabric, ["initial"])  # A-B-C only
    ctl.learn_hosts()
    h1, h3 = fabric.hosts["h1"], fabric.hosts["h3"]
    five = FiveTuple(h1.ip, h3.ip, 6, 40000, 5001)
    circuit = SimpleNamespace(id="c-offload", xcons=(("X:4", "X:5"), ("Z:5", "Z:4")), a="A", a_port=4, b="C",
                              b_port=2, capacity=10.0, setup_time=0.1)
    off = OffloadDecider()._build(7, [five], ("A", 1), ("C", 3), circuit, 0.0)
    ctl.reserve("te7", off.ends)
    plan = planner.provision(off.xcons, list(off.ends), [off.ends], list(off.egress), list(off.ingress),
                             verify=False, stable_ms=5, plan_id="offload7")
    live = fabric.live()
    fabric.auto_links = True
    rec = execute(plan, live, sleep=time.sleep)
    assert rec.state == "done", rec.error
    elephant = fabric.packet("h1", "h3", **TCP)
    ack = fabric.packet("h3", "h1", ip_proto=6, tcp_src=5001, tcp_dst=40000)
    assert fabric.path("h1", elephant) == [("A", 1, 4), ("C", 2, 3)]
    assert fabric.path("h3", ack) == [("C", 3, 2), ("A", 4, 1)]
    via_b = [("A", 1, 3), ("B", 1, 2), ("C", 1, 3)]
    assert fabric.path("h1", {**elephant, "tcp_src": 40001}) == via_b  # another flow of the same hosts
    udp = fabric.packet("h1", "h3", ip_proto=17, udp_src=40000, udp_dst=5001)
    assert fabric.path("h1", udp) == via_b
    assert fabric.path("h2", fabric.packet("h2", "h4", **TCP)) == [("A", 2, 3), ("B", 1, 2), ("C", 1, 4)]
    rec = execute(planner.release(off.xcons, list(off.egress), list(off.ingress), drain=False, plan_id="rel7"),
                  live, sleep=time.sleep)
    assert rec.state == "done", rec.error
    assert fabric.path("h1", elephant) == via_b
