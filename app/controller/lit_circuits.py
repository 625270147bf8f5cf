"""Which circuits are lit, read off the multi-layer graph (plain code, no os-ken).

A circuit is a light path between two packet-switch ports: from an oport with an adaptation, through
the active XCON on it, across the fibre at the XCON's other port, through the next active XCON...
until an oport with an adaptation again. Fig. 2's "initial" XCON chain therefore gives two circuits,
A:3–B:1 (X 1→2, Y 1→2) and B:2–C:1 (Y 3→4, Z 1→2), exactly the packet links LLDP then sees.
A chain that ends dark (no XCON, no fibre, no adaptation) is not a circuit and is left out.
"""
from __future__ import annotations

from app.db.feed import CircuitRecord
from topology.graph import MultiLayerGraph


def _walk(g: MultiLayerGraph, start: str) -> CircuitRecord | None:
    a_sw, a_port = g.adaptation_at(start)  # type: ignore[misc]
    cur, hops, caps = start, [], []
    for _ in range(len(g.g)):  # a light path visits each oport at most once
        key = g.active_xcon_at(cur)
        if key is None:
            return None
        u, v = g.edge_ends(key)
        out = v if u == cur else u
        attrs = g.g.nodes[cur]
        hops.append((attrs["ots"], int(attrs["port"]), int(g.g.nodes[out]["port"])))
        caps.append(float(attrs["capacity"]))
        end = g.adaptation_at(out)
        if end is not None:
            return CircuitRecord(f"{a_sw}:{a_port}", f"{end[0]}:{end[1]}", min(caps), tuple(hops))
        nxt = g.fibre_peer(out)
        if nxt is None:
            return None
        cur = nxt
    return None


def lit_circuits(g: MultiLayerGraph) -> list[CircuitRecord]:
    """Every lit circuit once, named from its lexicographically smaller end."""
    found: dict[tuple[str, str], CircuitRecord] = {}
    for oport in g.nodes_of_kind("oport"):
        if g.adaptation_at(oport) is None or g.active_xcon_at(oport) is None:
            continue
        c = _walk(g, oport)
        if c is not None and c.a_end < c.z_end:
            found[(c.a_end, c.z_end)] = c
    return [found[k] for k in sorted(found)]
