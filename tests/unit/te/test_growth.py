"""Balanced growth on the Fig. 2 testbed: circuit 'direct' (packet link A:3-C:1) grows a parallel circuit
(A:4-C:2) that takes the flows whose source port falls in its share, and loses it again when calm.
Plans run on the fake network (tests/lib/fake_network.py), so every rule and XCON is really applied."""
from __future__ import annotations

import pytest

from app.te.damping import Damper
from app.te.growth import GROW, SHRINK, SKIP, GrowthDecider, covered, hosts_behind, split_values
from app.update.executor import execute, threaded
from app.update.model import FlowRule, XconSpec
from mininet_labs.circuits import FIG2_CIRCUITS
from monitor.events import BALANCED_GROWTH, HOT_SPOT, Event
from tests.lib.fake_network import FakeNetwork
from topology.spec import fig2_testbed, spec_to_graph

LINK = "packet:A:3-C:1"
HOSTS = {"h1": ("10.0.0.1", "00:00:00:00:00:01", "A", 1), "h2": ("10.0.0.2", "00:00:00:00:00:02", "A", 2),
         "h3": ("10.0.0.3", "00:00:00:00:00:03", "C", 3), "h4": ("10.0.0.4", "00:00:00:00:00:04", "C", 4)}


def live_graph():
    """Fig. 2 as the controller sees it with circuit 'direct' lit: packet link A:3-C:1 (10 Mbit/s)."""
    g = spec_to_graph(fig2_testbed())
    for ots, a, b in FIG2_CIRCUITS["direct"]:
        g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    g.add_packet_link("A", 3, "C", 1, 10.0, source="lldp")
    return g


@pytest.fixture
def net():
    n = FakeNetwork.from_spec(fig2_testbed(), xcon_delay_s=0.01)
    fwd = []
    for _ip, mac, sw, port in HOSTS.values():  # default forwarding: eth_dst -> port, over A:3-C:1
        fwd.append(FlowRule(sw, "forwarding", 0, 100, (("eth_dst", mac),), port))
        other = "C" if sw == "A" else "A"
        fwd.append(FlowRule(other, "forwarding", 0, 100, (("eth_dst", mac),), 1 if other == "C" else 3))
    n.preload([XconSpec(*x) for x in FIG2_CIRCUITS["direct"]], fwd)
    yield n
    n.close()


def growth_event(util: float = 0.85) -> Event:
    return Event(10.0, LINK, BALANCED_GROWTH, (), {"util": util, "flows": 12, "top_share": 0.1})


def packet(src: str, dst: str, sport: int, proto: int = 6) -> dict:
    names = ("tcp_src", "tcp_dst") if proto == 6 else ("udp_src", "udp_dst")
    return {"eth_type": 0x0800, "eth_dst": HOSTS[dst][1], "ipv4_src": HOSTS[src][0], "ipv4_dst": HOSTS[dst][0],
            "ip_proto": proto, names[0]: sport, names[1]: 5001}


def first_hop_port(net, src: str, pkt: dict) -> int:
    hops = net.trace(src, pkt)
    assert not isinstance(hops, str), hops
    assert hops[-1][0] in HOSTS, hops  # delivered to a host
    return hops[0][2]


def test_split_values_cover_the_share_as_prefixes():
    for share, n in ((0.5, 4), (0.375, 3), (0.9, 7), (0.01, 1), (0.99, 7)):
        vals = split_values(share)
        hit = [p for p in range(64) if any(p & m == v for v, m in vals)]
        assert covered(vals) == n / 8
        assert hit == [p for p in range(64) if p % 8 < n]  # disjoint prefixes of the low 3 bits
    with pytest.raises(ValueError):
        split_values(1.0)


def test_hosts_behind_each_end_of_the_link():
    g = live_graph()
    assert {(h.ip, h.out_port) for h in hosts_behind(g, "A", ("C", 1), LINK)} == {("10.0.0.3", 3), ("10.0.0.4", 4)}
    assert {(h.ip, h.out_port) for h in hosts_behind(g, "C", ("A", 3), LINK)} == {("10.0.0.1", 1), ("10.0.0.2", 2)}


def test_balanced_growth_adds_a_parallel_circuit_splits_the_flows_and_releases_it_when_calm(net):
    g = live_graph()
    d = GrowthDecider(Damper(min_hold_s=5.0, on=0.7, off=0.4), stable_ms=5, calm_intervals=3)
    (dec,) = d.on_event(growth_event(), g, now=10.0)
    assert dec.kind == GROW, dec.reason
    gr = dec.growth
    assert gr.new_ends == (("A", 4), ("C", 2)) and gr.share == 0.5
    # an XCON chain from X:4 (A:4) to Z:4 (C:2) over free ports (the joint model picks which)
    assert any(x.ots == "X" and 4 in x.ports for x in gr.xcons) and any(x.ots == "Z" and 4 in x.ports for x in gr.xcons)
    assert not {(x.ots, p) for x in gr.xcons for p in x.ports} & {("X", 1), ("X", 3), ("Z", 3), ("Z", 2)}
    assert "ODU2" in dec.detail["in_place"]
    rec = execute(dec.plan, net, run_parallel=threaded)
    assert rec.state == "done", rec.to_json()
    d.done(dec, True, now=11.0)
    # every flow is delivered; those whose source port's low 3 bits are < 4 take the new circuit (A:4)
    for sport in range(40000, 40032):
        for proto in (6, 17):
            want = 4 if sport % 8 < 4 else 3
            assert first_hop_port(net, "h1", packet("h1", "h3", sport, proto)) == want
            assert first_hop_port(net, "h2", packet("h2", "h4", sport, proto)) == want
            back = first_hop_port(net, "h3", packet("h3", "h1", sport, proto))
            assert back == (2 if sport % 8 < 4 else 1)  # and the reverse direction at C
    # non-IP traffic and traffic local to A stay where default forwarding puts it
    assert first_hop_port(net, "h1", {"eth_type": 0x0806, "eth_dst": HOSTS["h3"][1]}) == 3
    assert first_hop_port(net, "h1", packet("h1", "h2", 40000)) == 2
    # still busy: nothing happens; calm but within the hold time: a skip that says so
    assert d.observe(LINK, 9.0, now=12.0) is None
    assert d.observe(LINK, 2.0, now=12.5) is None and d.observe(LINK, 2.0, now=13.0) is None
    held = d.observe(LINK, 2.0, now=13.5)
    assert held.kind == SKIP and "held" in held.reason
    # one busy poll resets the calm count (hysteresis: 5 Mbit/s is above off = 0.4 x 10)
    assert d.observe(LINK, 5.0, now=16.5) is None
    assert d.observe(LINK, 3.0, now=17.0) is None and d.observe(LINK, 3.0, now=17.5) is None
    shrink = d.observe(LINK, 3.0, now=18.0)
    assert shrink.kind == SHRINK, shrink.reason
    rec = execute(shrink.plan, net, run_parallel=threaded)
    assert rec.state == "done", rec.to_json()
    d.done(shrink, True, now=18.5)
    assert not [r for r in net.all_flows() if r.band == "split"]
    assert {(x.ots, x.ports) for x in net.all_xcons()} == {(o, frozenset({a, b})) for o, a, b in FIG2_CIRCUITS["direct"]}
    assert first_hop_port(net, "h1", packet("h1", "h3", 40000)) == 3 and d.growths == {}
    # growing again right after the shrink is held back (no flapping)
    (again,) = d.on_event(growth_event(), g, now=19.0)
    assert again.kind == SKIP and "held" in again.reason


def test_skips_say_why():
    g = live_graph()
    d = GrowthDecider()
    assert d.on_event(Event(1.0, LINK, HOT_SPOT), g, now=1.0) == []
    (fits,) = d.on_event(growth_event(0.3), g, now=1.0)
    assert fits.kind == SKIP and "no circuit needed" in fits.reason
    (gone,) = d.on_event(Event(1.0, "packet:A:9-C:9", BALANCED_GROWTH, (), {"util": 0.9}), g, now=1.0)
    assert gone.kind == SKIP and "not in the graph" in gone.reason
    taken = live_graph()
    for ots, a, b in (("X", 4, 5), ("Z", 4, 5)):  # A:4 and C:2, the only free uplinks, are taken
        taken.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    (none,) = d.on_event(growth_event(), taken, now=1.0)
    assert none.kind == SKIP and "no free circuit" in none.reason and none.plan is None
    (grow,) = d.on_event(growth_event(), g, now=1.0)
    d.done(grow, True, now=1.5)
    (twice,) = d.on_event(growth_event(), g, now=100.0)
    assert twice.kind == SKIP and "already grown" in twice.reason
    assert d.observe("packet:B:1-C:1", 0.0, now=100.0) is None  # not grown: nothing to shrink
