"""TE decisions on the Fig. 2 testbed: an elephant among small flows is offloaded onto a new circuit by
an ordered plan (the small flows stay), a short flow is not, and the circuit goes when the elephant does.
Plans run on the fake network (tests/lib/fake_network.py), so every rule and XCON is really applied."""
from __future__ import annotations

import threading

import pytest

from app.te.damping import Damper
from app.te.decisions import OFFLOAD, RELEASE, SKIP, OffloadDecider, five_tuple_match, host_port
from app.update.executor import execute, threaded
from app.update.model import FlowRule, XconSpec
from mininet_labs.circuits import FIG2_CIRCUITS
from monitor.events import ELEPHANT_GONE, UNCONSTRAINED_IMBALANCE, Event
from tests.lib.fake_network import FakeNetwork
from topology.flow import FiveTuple
from topology.spec import fig2_testbed, spec_to_graph

H1, H3 = "00:00:00:00:00:01", "00:00:00:00:00:03"
ELEPHANT = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 5001)
MOUSE = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40001, 5002)


def live_graph():
    """Fig. 2 as the controller sees it with circuit 'initial' lit: XCONs active, LLDP links A-B, B-C."""
    g = spec_to_graph(fig2_testbed())
    for ots, a, b in FIG2_CIRCUITS["initial"]:
        g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    g.add_packet_link("A", 3, "B", 1, 10.0, source="lldp")
    g.add_packet_link("B", 2, "C", 1, 10.0, source="lldp")
    return g


@pytest.fixture
def net():
    n = FakeNetwork.from_spec(fig2_testbed(), xcon_delay_s=0.02)
    fwd = [FlowRule(sw, "forwarding", 0, 100, (("eth_dst", mac),), port) for sw, mac, port in (
        ("A", H3, 3), ("B", H3, 2), ("C", H3, 3), ("C", H1, 1), ("B", H1, 1), ("A", H1, 1))]
    n.preload([XconSpec(*x) for x in FIG2_CIRCUITS["initial"]], fwd)
    yield n
    n.close()


def pkt(f: FiveTuple, reverse: bool = False) -> dict:
    """A packet of ``f`` as the fake switches match it."""
    m = dict(five_tuple_match(f, 1, reverse))
    m.pop("in_port")
    return {**m, "eth_dst": H1 if reverse else H3}


def hops(net, start, packet):
    t = net.trace(start, packet)
    assert not isinstance(t, str), t
    return [h[0] for h in t]


def imbalance(*flows, mbps=(6.0,)):
    return Event(10.0, "packet:A:3-B:1", UNCONSTRAINED_IMBALANCE, tuple(flows),
                 {"elephant_mbps": list(mbps), "util": 0.7, "drops": 40})


def run(net, decision):
    stop = threading.Event()

    def traffic():  # the elephant keeps sending while the plan runs (verification counts it)
        while not stop.wait(0.003):
            net.send("h1", pkt(ELEPHANT))

    t = threading.Thread(target=traffic, daemon=True)
    t.start()
    try:
        return execute(decision.plan, net, run_parallel=threaded)
    finally:
        stop.set()
        t.join()


def test_the_elephant_moves_onto_a_new_circuit_and_the_small_flow_stays(net):
    g = live_graph()
    assert host_port(g, "10.0.0.1") == ("A", 1) and host_port(g, "10.0.0.3") == ("C", 3)
    before = hops(net, "h1", pkt(ELEPHANT))
    assert "B" in before
    d = OffloadDecider(Damper(min_hold_s=30), stable_ms=5, verify_timeout_s=1.0)
    (dec,) = d.on_event(imbalance(ELEPHANT), g, now=10.0, loads_mbps={"packet:A:3-B:1": 4.0},
                        flow_bytes=lambda f: 50e6)
    assert dec.kind == OFFLOAD, dec.reason
    assert {(x.ots, x.ports) for x in dec.offload.xcons} <= {("X", frozenset({4, 5})), ("Z", frozenset({4, 5})),
                                                               ("X", frozenset({3, 4})), ("Z", frozenset({3, 4}))}
    kinds = [s.kind for s in dec.plan.steps]
    assert kinds.index("circuit_up") < kinds.index("verify")
    rec = run(net, dec)
    assert rec.state == "done", rec.to_json()
    d.done(dec, True, now=11.0)
    assert "B" not in hops(net, "h1", pkt(ELEPHANT))  # A -> circuit -> C
    assert hops(net, "h1", pkt(ELEPHANT))[-1] == "h3" and hops(net, "h3", pkt(ELEPHANT, True))[-1] == "h1"
    assert "B" in hops(net, "h1", pkt(MOUSE))  # the small flow stays on A-B-C
    assert "B" not in hops(net, "h3", pkt(ELEPHANT, True))  # its acks come back on the circuit too
    # the same elephant again: already offloaded (and held)
    (again,) = d.on_event(imbalance(ELEPHANT), g, now=12.0, loads_mbps={}, flow_bytes=lambda f: 50e6)
    assert again.kind == SKIP and "already offloaded" in again.reason
    # elephant gone: everything of the offload goes, the flow is back on its old path
    (rel,) = d.on_event(Event(40.0, "packet:A:3-B:1", ELEPHANT_GONE, (ELEPHANT,), {}), g, now=40.0)
    assert rel.kind == RELEASE
    rec = execute(rel.plan, net, run_parallel=threaded)
    assert rec.state == "done", rec.to_json()
    d.done(rel, True, now=41.0)
    assert not [r for r in net.all_flows() if r.band == "steer"]
    assert net.all_xcons() == {XconSpec(*x) for x in FIG2_CIRCUITS["initial"]} or {
        (x.ots, x.ports) for x in net.all_xcons()} == {(o, frozenset({a, b})) for o, a, b in FIG2_CIRCUITS["initial"]}
    assert "B" in hops(net, "h1", pkt(ELEPHANT)) and d.offloads == {}


def test_a_short_flow_is_not_offloaded_and_the_skip_says_why(net):
    d = OffloadDecider()
    (dec,) = d.on_event(imbalance(ELEPHANT), live_graph(), now=10.0, loads_mbps={"packet:A:3-B:1": 9.5},
                        flow_bytes=lambda f: 100e3)  # 100 kB so far: predicted to end before a switch-over pays
    assert dec.kind == SKIP and "switch-over" in dec.reason and dec.plan is None
    assert dec.detail["gain"][str(ELEPHANT)]["pays"] is False


def test_damping_and_unknown_hosts_are_skips_with_reasons(net):
    d = OffloadDecider(Damper(min_hold_s=30))
    d.damper.moved(ELEPHANT, 5.0)
    stranger = FiveTuple("10.9.9.9", "10.0.0.3", 17, 1, 2)
    decs = d.on_event(imbalance(ELEPHANT, stranger, mbps=(6.0, 5.0)), live_graph(), now=10.0)
    reasons = {str(x.flows[0]): x.reason for x in decs}
    assert all(x.kind == SKIP for x in decs)
    assert "held" in reasons[str(ELEPHANT)] and "no learnt host" in reasons[str(stranger)]


def test_no_free_circuit_is_a_skip():
    g = live_graph()
    for ots, a, b in (("X", 4, 5), ("Z", 4, 5)):  # A:4 and C:2, the only free uplinks, are taken
        g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    d = OffloadDecider()
    (dec,) = d.on_event(imbalance(ELEPHANT), g, now=1.0, loads_mbps={"packet:A:3-B:1": 9.5})
    assert dec.kind == SKIP and dec.reason == "no free XCON chain between A and C"


def test_an_offload_a_failure_darkened_is_released_and_the_elephant_falls_back(net):
    """docs/failures.md: the offload's circuit crosses a cut fibre → a release decision (with the cause),
    run on the fake network: the steer rules and the circuit go, the elephant is back on A-B-C."""
    from app.controller.failures import Failures, broken_by

    g = live_graph()
    d = OffloadDecider(Damper(min_hold_s=30), stable_ms=5, verify_timeout_s=1.0)
    (dec,) = d.on_event(imbalance(ELEPHANT), g, now=10.0, loads_mbps={"packet:A:3-B:1": 4.0},
                        flow_bytes=lambda f: 50e6)
    assert run(net, dec).state == "done"
    d.done(dec, True, now=11.0)
    off = dec.offload
    xcon = off.xcons[0]
    f = Failures({(xcon.ots, xcon.out_port): f"loss of light at {xcon.ots}:{xcon.out_port}"})
    cause = broken_by(off.xcons, off.ends, f)
    assert cause == f"loss of light at {xcon.ots}:{xcon.out_port}"
    assert broken_by(off.xcons, off.ends, Failures({("Y", 1): "x"})) is None  # not on its circuit
    rel = d.broken(off, cause)
    assert rel.kind == RELEASE and cause in rel.reason and rel.offload is off
    assert execute(rel.plan, net, run_parallel=threaded).state == "done"
    d.done(rel, True, now=12.0)
    assert not [r for r in net.all_flows() if r.band == "steer"] and d.offloads == {}
    assert "B" in hops(net, "h1", pkt(ELEPHANT))
