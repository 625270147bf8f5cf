"""Hand-built OTTER instances shared by the tests."""
from __future__ import annotations

from pce.otter.scenario import FlowSet, Network
from topology.graph import MultiLayerGraph

BIG = 1e6


def two_path_network(p0_cap=10.0, p1_cap=10.0, shared=BIG, edge_cpu=None) -> Network:
    """One source; p0 (RTT 10 ms) to dest 0, p1 (RTT 100 ms) to dest 0 or 1.

    With ``edge_cpu`` dest 0 is an edge site with that many vCPUs and p1 goes to DC dest 1;
    otherwise both paths end at DC dest 0. Both paths cross the link ``s`` (capacity ``shared``).
    """
    if edge_cpu is None:
        paths = [(0, 0, ["l0", "s"], 10.0, 0.0, 0.0, BIG), (0, 0, ["l1", "s"], 100.0, 0.0, 0.0, BIG)]
        dests = [None]
    else:
        paths = [(0, 0, ["l0", "s"], 10.0, 0.0, 0.0, BIG), (0, 1, ["l1", "s"], 100.0, 0.0, 0.0, BIG)]
        dests = [(edge_cpu, BIG, BIG), None]
    return Network.from_paths(1, paths, {"l0": p0_cap, "l1": p1_cap, "s": shared}, dests)


def flows(*rows: dict) -> FlowSet:
    return FlowSet.from_rows(list(rows))


def short_plus_circuit(short_ms: float = 1.0, fibre_ms: float = 15.0) -> MultiLayerGraph:
    """A–B: a lit 10 Mbit/s link (``short_ms``) and one possible 10 Mbit/s circuit over X–Y (``fibre_ms``)."""
    g = MultiLayerGraph()
    for s in "AB":
        g.add_packet_switch(s)
    g.add_host("h1", "10.0.0.1")
    g.add_host("h2", "10.0.0.2")
    g.add_access("h1", "A", 1, 100.0)
    g.add_access("h2", "B", 1, 100.0)
    g.add_packet_link("A", 2, "B", 2, 10.0, short_ms)
    g.add_ots("X", ports={1: "ODU2", 2: "ODU2"})
    g.add_ots("Y", ports={1: "ODU2", 2: "ODU2"})
    g.add_adaptation("A", 3, "X:1")
    g.add_adaptation("B", 3, "Y:1")
    g.add_optical_link("X:2", "Y:2", latency=fibre_ms)
    return g


def two_links(slow_ms: float) -> MultiLayerGraph:
    """A–B over two lit links: A:2–B:2 (``slow_ms``) and A:4–B:4 (1 ms), no optical layer."""
    g = MultiLayerGraph()
    for s in "AB":
        g.add_packet_switch(s)
    g.add_packet_link("A", 2, "B", 2, 100.0, slow_ms)
    g.add_packet_link("A", 4, "B", 4, 100.0, 1.0)
    return g
