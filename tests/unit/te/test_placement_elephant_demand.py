"""A named elephant asks the placement for the capacity of the link it was named on, not its
measured rate (app/te/placement.py, ``PlacementDecider.run``).

On ``mesh6`` the elephant A → C is held to ~3.5 Mbit/s by the congested circuit A:3–C:3; the lit
detour A–B–D–C has ~8 Mbit/s spare, and the B → D circuit carries 16 small transfers and an
interactive flow. Placed at 3.5 Mbit/s it went onto that detour, then grew to ~7.4 Mbit/s and
pushed the interactive flow's RTT p95 from 4 to ~40 ms (docs/labs.md, placement-mesh6). Asking
for the 10 Mbit/s it would take, it gets a circuit of its own and the B–D flows keep their queue."""
from __future__ import annotations

import time

from app.te.decisions import OFFLOAD
from app.te.placement import PlacementDecider, PlacementPolicy, edge_hop
from mininet_labs.mesh_spec import MESH6_CIRCUIT_LINKS, MESH6_CIRCUITS, mesh6
from mininet_labs.spec import spec_to_graph
from monitor.events import UNCONSTRAINED_IMBALANCE, Event
from monitor.flowstats import FlowCount
from monitor.sflow.records import FiveTuple

ELEPHANT = FiveTuple("10.0.0.1", "10.0.0.3", 17, 45000, 5201)  # h1 (A) -> h3 (C), bulk
SIP_BD = FiveTuple("10.0.0.5", "10.0.0.6", 17, 5060, 5060)  # h5 (B) -> h6 (D), interactive by its port
SMALL_BD = [FiveTuple("10.0.0.5", "10.0.0.6", 17, 47000 + i, 5203) for i in range(16)]
MAC = {i: f"00:00:00:00:00:{i:02x}" for i in range(1, 7)}
# default forwarding: A <-> C over the lit circuit A:3-C:3, B <-> D over B:3-D:3
FORWARDING = {"A": {MAC[3]: 3, MAC[1]: 1}, "C": {MAC[3]: 1, MAC[1]: 3},
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


def decide(policy: str, measured: float = 3.5, wants: bool = True):
    now = time.monotonic()
    fine = {ELEPHANT: FlowCount(50_000_000, measured, now), SIP_BD: FlowCount(20_000, 0.08, now),
            **{s: FlowCount(200_000, 0.1, now) for s in SMALL_BD}}
    d = PlacementDecider(PlacementPolicy(policy), monitored=lambda: fine, forwarding=lambda: FORWARDING,
                         min_gain_s=0.3)
    g = mesh6_graph()
    congested = next(k for _u, _v, k, e in g.g.edges(keys=True, data=True)
                     if e.get("kind") == "packet" and {_u, _v} == {"A", "C"})
    ev = Event(now, congested, UNCONSTRAINED_IMBALANCE, (ELEPHANT,),
               {"elephant_mbps": [measured], "util": 0.6, "drops": 40, "threshold_mbps": 1.0})
    if not wants:
        return d.run(g, now, {ELEPHANT: measured}, edge_hop(g, congested), congested, lambda f: 50_000_000.0 if f == ELEPHANT else None)
    return d.on_event(ev, g, now, flow_bytes=lambda f: 50_000_000.0 if f == ELEPHANT else None)


def test_the_elephant_gets_a_new_circuit_not_the_detour_the_interactive_flow_shares():
    out = decide("otter")
    offs = [d for d in out if d.kind == OFFLOAD]
    assert [d.flows for d in offs] == [(ELEPHANT,)], [(d.kind, d.reason) for d in out]
    (off,) = offs
    assert off.detail["circuit"] is not None and "new circuit" in off.reason, off.reason
    path = off.detail["moved"][str(ELEPHANT)]["path"]
    assert all("B:3" not in h and "D:3" not in h for h in path), path  # not over the B-D circuit
    assert off.detail["moved"][str(ELEPHANT)]["mbps"] > 3.5  # placed at what it will take, not its 3.5
    # the offload gain still judged it at its measured rate
    assert off.detail["gain"][str(ELEPHANT)]["current_mbps"] == 3.5
    assert str(SIP_BD) in off.detail["kept"] and off.detail["kept"][str(SIP_BD)] == "interactive"


def test_placed_at_its_measured_rate_it_took_the_detour():
    """The behaviour before: the same event with the link's capacity not asked for (``wants_mbps``
    0) puts the elephant on the lit detour over B–D — what the mesh6 lab measured."""
    out = decide("otter", wants=False)
    (off,) = [d for d in out if d.kind == OFFLOAD]
    assert off.detail["circuit"] is None and "lit links via A B D C" in off.reason, off.reason
