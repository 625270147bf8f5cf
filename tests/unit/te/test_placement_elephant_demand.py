"""What the placement decider tells the placement about an elephant and about the traffic it has no
per-flow data for (app/te/placement.py, ``PlacementDecider.run``), on ``mesh6``.

The elephant A → C is held to ~3.5 Mbit/s by the congested circuit A:3–C:3. The lit detour A–B–D–C
runs over the B → D circuit, which carries 16 small transfers and an interactive flow — traffic the
monitor counts on the B–D link's ports but takes no per-flow data for (fine data only at the hot
spot's switches A and C). The mesh6 lab measured what happened when the placement saw neither the
elephant's real appetite nor B–D's load: the elephant went onto the detour, grew to ~7.4 Mbit/s
and pushed the B → D interactive flow's RTT p95 from 4 to ~40 ms (docs/labs.md, placement-mesh6).
With both known it gets a circuit of its own."""
from __future__ import annotations

import time

import pytest

from app.te.decisions import OFFLOAD
from app.te.placement import PlacementDecider, PlacementPolicy, edge_hop, unmonitored_load
from mininet_labs.mesh_spec import MESH6_CIRCUIT_LINKS, MESH6_CIRCUITS, mesh6
from monitor.events import UNCONSTRAINED_IMBALANCE, Event
from monitor.flowstats import FlowCount
from pce.otter.graph_flows import GraphFlow
from topology.flow import FiveTuple
from topology.spec import spec_to_graph

ELEPHANT = FiveTuple("10.0.0.1", "10.0.0.3", 17, 45000, 5201)  # h1 (A) -> h3 (C), bulk
SIP_AC = FiveTuple("10.0.0.1", "10.0.0.3", 17, 5060, 5060)  # interactive by its port
SMALL_AC = [FiveTuple("10.0.0.2", "10.0.0.4", 17, 46000 + i, 5202) for i in range(16)]
SIP_BD = FiveTuple("10.0.0.5", "10.0.0.6", 17, 5060, 5060)
MAC = {i: f"00:00:00:00:00:{i:02x}" for i in range(1, 7)}
# default forwarding: A <-> C over the lit circuit A:3-C:3, B <-> D over B:3-D:3
FORWARDING = {"A": {MAC[3]: 3, MAC[4]: 3, MAC[1]: 1, MAC[2]: 2}, "C": {MAC[3]: 1, MAC[4]: 2, MAC[1]: 3, MAC[2]: 3},
              "B": {MAC[6]: 3, MAC[5]: 1}, "D": {MAC[6]: 1, MAC[5]: 3}}


def mesh6_graph():
    g = spec_to_graph(mesh6())
    for hops in MESH6_CIRCUITS.values():
        for ots, a, b in hops:
            g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    for links in MESH6_CIRCUIT_LINKS.values():
        for a, ap, b, bp in links:
            g.add_packet_link(a, ap, b, bp, 10.0, source="lldp")
    return g


def key_between(g, a: str, b: str) -> str:
    return next(k for u, v, k, e in g.g.edges(keys=True, data=True) if e.get("kind") == "packet" and {u, v} == {a, b})


def decide(*, wants: bool = True, loads: bool = True, measured: float = 3.5):
    """The imbalance on A:3-C:3 as the TE app hands it over; fine data of A and C's flows only."""
    now = time.monotonic()
    fine = {ELEPHANT: FlowCount(50_000_000, measured, now), SIP_AC: FlowCount(20_000, 0.08, now),
            **{s: FlowCount(200_000, 0.1, now) for s in SMALL_AC}}
    g = mesh6_graph()
    ac, bd = key_between(g, "A", "C"), key_between(g, "B", "D")
    link_loads = {ac: measured + 1.7, bd: 1.7} if loads else {}  # 16 x 0.1 + 0.08 on each site pair
    d = PlacementDecider(PlacementPolicy("otter"), monitored=lambda: fine, forwarding=lambda: FORWARDING,
                         link_loads=lambda: link_loads, min_gain_s=0.3)
    ev = Event(now, ac, UNCONSTRAINED_IMBALANCE, (ELEPHANT,),
               {"elephant_mbps": [measured], "util": 0.6, "drops": 40, "threshold_mbps": 1.0})
    sent = lambda f: 50_000_000.0 if f == ELEPHANT else None  # noqa: E731
    if not wants:
        return d.run(g, now, {ELEPHANT: measured}, edge_hop(g, ac), ac, sent)
    return d.on_event(ev, g, now, flow_bytes=sent)


def offload_of(out):
    offs = [d for d in out if d.kind == OFFLOAD]
    assert [d.flows for d in offs] == [(ELEPHANT,)], [(d.kind, d.reason) for d in out]
    return offs[0]


def test_knowing_both_the_elephant_gets_a_circuit_of_its_own():
    off = offload_of(decide())
    assert off.detail["circuit"] is not None and "new circuit" in off.reason, off.reason
    path = off.detail["moved"][str(ELEPHANT)]["path"]
    assert all("B:3" not in h and "D:3" not in h for h in path), path  # not over the B-D circuit
    assert off.detail["moved"][str(ELEPHANT)]["mbps"] > 3.5  # placed at what it will take, not its 3.5
    assert off.detail["gain"][str(ELEPHANT)]["current_mbps"] == 3.5  # the gain: at its measured rate
    assert off.detail["background"] == {"B:3-D:3": 1.7}  # A-C's load is all known flows
    assert off.detail["kept"][str(SIP_AC)] == "interactive"


@pytest.mark.parametrize("wants,loads", [(False, True), (True, False)])
def test_missing_either_it_takes_the_detour_over_the_b_d_circuit(wants, loads):
    """Placed at its held-down rate (B-D's load known) it fits on the detour's room; asking for the
    link but blind to B-D's load it sees an empty 10 Mbit/s detour, free of the circuit price."""
    off = offload_of(decide(wants=wants, loads=loads))
    assert off.detail["circuit"] is None and "lit links via A B D C" in off.reason, off.reason


def test_unmonitored_load_is_what_the_known_flows_do_not_explain():
    g = mesh6_graph()
    ac, bd = key_between(g, "A", "C"), key_between(g, "B", "D")
    flows = [GraphFlow("e", "A", "C", 10.0, "bulk", path=("A:3-C:3",)),
             GraphFlow("s", "A", "C", 1.0, "bulk", path=("A:3-C:3",))]
    got = unmonitored_load(g, {ac: 5.05, bd: 2.0, "no-such-link": 3.0}, flows, {"e": 4.0, "s": 1.0})
    assert got == {"B:3-D:3": 2.0}  # A-C: 4 + 1 measured for 5.05 (noise under 0.1); unknown keys skipped
    assert unmonitored_load(g, {ac: 6.0}, flows, {"e": 4.0})["A:3-C:3"] == pytest.approx(1.0)  # s at its bw
