"""One imbalance event, several groups of elephants (issue 25): the offloads it returns never claim the
same circuit, XCON port or uplink, nor one an earlier event decided and whose plan is still running.
Two host pairs from the same switch to the same switch (Fig. 2: h1 → h3 and h2 → h4, both A → C) are
decided jointly onto one circuit, and that offload's plan, run on the fake network, really moves both;
a group whose only chains share an uplink with a circuit decided before it is skipped with that
reason; a pair with no XCON chain at all is skipped as such."""
from __future__ import annotations

import threading

import pytest

from app.te.damping import Damper
from app.te.decisions import OFFLOAD, SKIP, UNLIT_S, OffloadDecider, five_tuple_match
from app.update.executor import execute, threaded
from app.update.model import FlowRule, XconSpec
from mininet_labs.circuits import FIG2_CIRCUITS
from monitor.events import UNCONSTRAINED_IMBALANCE, Event
from tests.lib.fake_network import FakeNetwork
from tests.unit.te.test_decisions import hops, live_graph
from topology.flow import FiveTuple
from topology.spec import fig2_testbed, spec_to_graph

MAC = {"10.0.0.1": "00:00:00:00:00:01", "10.0.0.2": "00:00:00:00:00:02", "10.0.0.3": "00:00:00:00:00:03",
       "10.0.0.4": "00:00:00:00:00:04"}
E13 = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 5001)  # h1 -> h3
E24 = FiveTuple("10.0.0.2", "10.0.0.4", 6, 40100, 5201)  # h2 -> h4
E42 = FiveTuple("10.0.0.4", "10.0.0.2", 17, 41000, 5301)  # h4 -> h2: the same switches, the other way
CONGESTED = "packet:A:3-B:1"


def imbalance(flows, mbps, circuit=CONGESTED):
    return Event(10.0, circuit, UNCONSTRAINED_IMBALANCE, tuple(flows), {"elephant_mbps": list(mbps), "util": 0.7})


def claimed(dec) -> set[tuple[str, int]]:
    """The OTS ports (XCONs) and packet ends an offload's circuit takes."""
    off = dec.offload
    return {(x.ots, p) for x in off.xcons for p in x.ports} | set(off.ends)


def test_two_host_pairs_between_the_same_switches_get_one_offload_onto_one_circuit():
    d = OffloadDecider(Damper(min_hold_s=30, max_moves=4))
    decs = d.on_event(imbalance([E13, E24], [3.0, 3.0]), live_graph(), now=10.0,
                      loads_mbps={CONGESTED: 7.0}, flow_bytes=lambda f: 50e6)
    offloads = [x for x in decs if x.kind == OFFLOAD]
    assert len(offloads) == 1, [x.reason for x in decs]  # before the fix: two offloads onto c0:A:4-C:2
    (dec,) = offloads
    assert set(dec.flows) == {E13, E24} and dec.offload.ends == (("A", 4), ("C", 2))
    assert "A -> C" in dec.reason
    ins = {(r.switch, dict(r.match)["in_port"], r.out_port) for r in dec.offload.ingress}
    # forward: in at each source host's port, out onto the circuit; reverse: in at each destination host's
    assert ins == {("A", 1, 4), ("A", 2, 4), ("C", 3, 2), ("C", 4, 2)}
    egress = {(r.switch, dict(r.match)["in_port"], r.out_port) for r in dec.offload.egress}
    assert egress == {("C", 2, 3), ("C", 2, 4), ("A", 4, 1), ("A", 4, 2)}
    # the gain of each is judged at its share of the circuit (two flows: 5 Mbit/s each)
    assert set(dec.detail["gain"]) == {str(E13), str(E24)}


def test_the_other_direction_is_a_group_of_its_own_and_finds_the_uplinks_claimed():
    """h4 -> h2 (C -> A) with h1 -> h3 (A -> C): its own group (an offload's release counts its elephants
    at one end), and its only chains start at C:2 and end at A:4, which the first group's circuit took."""
    d = OffloadDecider(Damper(min_hold_s=30, max_moves=4))
    decs = d.on_event(imbalance([E13, E42], [3.0, 2.0]), live_graph(), now=10.0,
                      loads_mbps={CONGESTED: 7.0}, flow_bytes=lambda f: 50e6)
    by_flow = {x.flows[0]: x for x in decs}
    assert by_flow[E13].kind == OFFLOAD and by_flow[E13].flows == (E13,)
    skip = by_flow[E42]
    assert skip.kind == SKIP and skip.detail.get("claimed") is True
    assert skip.reason == ("no free XCON chain between C and A: each of its 2 shares a port or an uplink with "
                           f"the circuit of offload {by_flow[E13].offload.ident}, not in the network's graph yet")


def test_a_later_event_never_claims_the_circuit_of_an_offload_not_lit_yet():
    """The TE app judges each waiting elephant again in an event of its own (its next count): while the
    first offload's plan runs the graph does not show its XCONs, and its circuit is still claimed."""
    d = OffloadDecider(Damper(min_hold_s=30, max_moves=4))
    g = live_graph()
    (first,) = d.on_event(imbalance([E13], [3.0]), g, now=10.0, loads_mbps={CONGESTED: 7.0},
                          flow_bytes=lambda f: 50e6)
    assert first.kind == OFFLOAD
    (second,) = d.on_event(imbalance([E24], [3.0]), g, now=10.2, loads_mbps={CONGESTED: 7.0},
                           flow_bytes=lambda f: 50e6)
    assert second.kind == SKIP and f"offload {first.offload.ident}" in second.reason  # before: c0 again
    d.done(first, False, now=10.5)  # its plan failed and rolled back: the ports are free again
    (third,) = d.on_event(imbalance([E24], [3.0]), g, now=10.6, loads_mbps={CONGESTED: 7.0},
                          flow_bytes=lambda f: 50e6)
    assert third.kind == OFFLOAD and third.offload.ends == (("A", 4), ("C", 2))
    # an outcome that never comes (a plan the app did not run): the claim goes after UNLIT_S
    (fourth,) = d.on_event(imbalance([E13], [3.0]), g, now=10.7, loads_mbps={CONGESTED: 7.0},
                           flow_bytes=lambda f: 50e6)
    assert fourth.kind == SKIP
    (later,) = d.on_event(imbalance([E13], [3.0]), g, now=10.6 + UNLIT_S + 1, loads_mbps={CONGESTED: 7.0},
                          flow_bytes=lambda f: 50e6)
    assert later.kind == OFFLOAD


#: default forwarding on A-B-C for both host pairs: (switch, destination IP, out port)
ROUTES = [(sw, ip, port) for ip, ports in (("10.0.0.3", (3, 2, 3)), ("10.0.0.4", (3, 2, 4)),
                                           ("10.0.0.1", (1, 1, 1)), ("10.0.0.2", (2, 1, 1)))
          for sw, port in zip("ABC", ports, strict=True)]


@pytest.fixture
def net():
    n = FakeNetwork.from_spec(fig2_testbed(), xcon_delay_s=0.02)
    n.preload([XconSpec(*x) for x in FIG2_CIRCUITS["initial"]],
              [FlowRule(sw, "forwarding", 0, 100, (("eth_dst", MAC[ip]),), port) for sw, ip, port in ROUTES])
    yield n
    n.close()


def pkt(f: FiveTuple, reverse: bool = False) -> dict:
    """A packet of ``f`` (or of its reverse direction) as the fake switches match it."""
    return {**dict(five_tuple_match(f, 1, reverse)[1:]), "eth_dst": MAC[f.src if reverse else f.dst]}


def test_the_joint_offload_runs_and_moves_both_host_pairs(net):
    d = OffloadDecider(Damper(min_hold_s=30, max_moves=4), stable_ms=5, verify_timeout_s=1.0)
    decs = d.on_event(imbalance([E13, E24], [3.0, 3.0]), live_graph(), now=10.0,
                      loads_mbps={CONGESTED: 7.0}, flow_bytes=lambda f: 50e6)
    (dec,) = [x for x in decs if x.kind == OFFLOAD]
    stop = threading.Event()

    def traffic():  # the verified flow keeps sending while the plan runs
        while not stop.wait(0.003):
            net.send("h1", pkt(E13))
            net.send("h2", pkt(E24))

    t = threading.Thread(target=traffic, daemon=True)
    t.start()
    try:
        rec = execute(dec.plan, net, run_parallel=threaded)
    finally:
        stop.set()
        t.join()
    assert rec.state == "done", rec.to_json()
    for src, dst, f in (("h1", "h3", E13), ("h2", "h4", E24)):
        there, back = hops(net, src, pkt(f)), hops(net, dst, pkt(f, True))
        assert "B" not in there and there[-1] == dst  # on the circuit (A-X-Z-C), not through B
        assert "B" not in back and back[-1] == src


def fig2_direct_with_host_on_b():
    """Fig. 2 with circuit 'direct' lit (A:3-C:1) and a host hb on B:3 (not in the paper's testbed): A's
    one free uplink, A:4, is the start of every chain A-C (to C:2) and A-B (to B:1 or B:2)."""
    g = spec_to_graph(fig2_testbed())
    for ots, a, b in FIG2_CIRCUITS["direct"]:
        g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    g.add_packet_link("A", 3, "C", 1, 10.0, source="lldp")
    g.add_host("hb", "10.0.0.11", "00:00:00:00:00:0b")
    g.add_access("hb", "B", 3, 20.0)
    return g


def test_a_later_group_never_claims_an_uplink_an_earlier_group_took():
    to_c = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 5001)
    to_b = FiveTuple("10.0.0.2", "10.0.0.11", 6, 40200, 5201)
    d = OffloadDecider(Damper(min_hold_s=30, max_moves=4))
    decs = d.on_event(imbalance([to_c, to_b], [3.0, 3.0], "packet:A:3-C:1"), fig2_direct_with_host_on_b(),
                      now=10.0, loads_mbps={"packet:A:3-C:1": 7.0}, flow_bytes=lambda f: 50e6)
    by_flow = {x.flows[0]: x for x in decs}
    first, second = by_flow[to_c], by_flow[to_b]
    assert first.kind == OFFLOAD and ("A", 4) in first.offload.ends
    # before the fix: a second offload onto a circuit from A:4 as well, whose plan could only fail
    assert second.kind == SKIP, second.reason
    assert "no free XCON chain between A and B" in second.reason
    assert f"offload {first.offload.ident}" in second.reason and "not in the network's graph yet" in second.reason


def test_no_two_offloads_of_one_event_claim_a_port():
    """Every pair of offloads one event returns: disjoint OTS ports and packet ends."""
    to_c = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 5001)
    to_b = FiveTuple("10.0.0.2", "10.0.0.11", 6, 40200, 5201)
    for order in ([to_c, to_b], [to_b, to_c]):
        d = OffloadDecider(Damper(min_hold_s=30, max_moves=4))
        decs = d.on_event(imbalance(order, [3.0, 3.0], "packet:A:3-C:1"), fig2_direct_with_host_on_b(),
                          now=10.0, loads_mbps={"packet:A:3-C:1": 7.0}, flow_bytes=lambda f: 50e6)
        offs = [x for x in decs if x.kind == OFFLOAD]
        assert len(offs) == 1 and offs[0].flows == (order[0],)  # the first group decided takes A:4
        for i, a in enumerate(offs):
            for b in offs[i + 1:]:
                assert not claimed(a) & claimed(b)


def test_a_pair_with_no_xcon_chain_is_skipped_as_such():
    g = live_graph()
    for ots, a, b in (("X", 4, 5), ("Z", 4, 5)):  # A:4 and C:2, the only free uplinks, are taken
        g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    (dec,) = OffloadDecider().on_event(imbalance([E13], [6.0]), g, now=1.0, loads_mbps={CONGESTED: 9.5})
    assert dec.kind == SKIP and dec.reason == "no free XCON chain between A and C"
    assert "without a new circuit" not in dec.reason
