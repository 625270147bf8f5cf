"""Hand-built OTTER instances shared by the tests."""
from __future__ import annotations

from pce.otter.scenario import FlowSet, Network

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
