"""Structural comparison of two multi-layer graphs (discovered vs. expected).

Used by the tests ("the static-file path gives the same graph") and by ``mlte lab --discover`` to
say what discovery missed. ``source`` is ignored by default: the same link found by LLDP and
written in a spec is the same link.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from topology.graph import EDGE_KINDS, NODE_KINDS, MultiLayerGraph


def _keep(attr: str, kind: str, ignore: set[str]) -> bool:
    return attr not in ignore and f"{kind}.{attr}" not in ignore


def _nodes(g: MultiLayerGraph, kinds: set[str], ignore: set[str]) -> dict[str, dict[str, Any]]:
    return {n: {k: v for k, v in d.items() if _keep(k, d["kind"], ignore)}
            for n, d in g.g.nodes(data=True) if d["kind"] in kinds}


def _edges(g: MultiLayerGraph, kinds: set[str], ignore: set[str]) -> dict[str, dict[str, Any]]:
    return {k: {a: v for a, v in d.items() if _keep(a, d["kind"], ignore)}
            for _, _, k, d in g.g.edges(keys=True, data=True) if d["kind"] in kinds}


#: what a switch reports of itself rather than the topology: the ports a live packet switch listed
#: (a spec or vendor file names only the ports on its links); never a difference
INVENTORY_ATTRS = ("packet.ports",)


def graph_diff(a: MultiLayerGraph, b: MultiLayerGraph, node_kinds: Iterable[str] = NODE_KINDS,
               edge_kinds: Iterable[str] = EDGE_KINDS, ignore_attrs: Iterable[str] = ("source",)) -> list[str]:
    """Differences between ``a`` and ``b`` restricted to some kinds, one readable line each.

    An empty list means the two graphs are the same for those kinds (ignoring ``ignore_attrs``; an
    entry ``"<kind>.<attr>"`` ignores the attribute only on nodes/edges of that kind, e.g.
    ``"access.capacity"``: a discovered access edge is as wide as the port reports, not as shaped).
    """
    nk, ek, ign = set(node_kinds), set(edge_kinds), set(ignore_attrs) | set(INVENTORY_ATTRS)
    out: list[str] = []
    for label, ga, gb in (("node", _nodes(a, nk, ign), _nodes(b, nk, ign)),
                          ("edge", _edges(a, ek, ign), _edges(b, ek, ign))):
        for key in sorted(ga.keys() - gb.keys()):
            out.append(f"only in first: {label} {key}")
        for key in sorted(gb.keys() - ga.keys()):
            out.append(f"only in second: {label} {key}")
        for key in sorted(ga.keys() & gb.keys()):
            da, db = ga[key], gb[key]
            for attr in sorted(da.keys() | db.keys()):
                if da.get(attr) != db.get(attr):
                    out.append(f"{label} {key}: {attr} {da.get(attr)!r} != {db.get(attr)!r}")
    return out


def without_hosts(g: MultiLayerGraph) -> MultiLayerGraph:
    """A copy of ``g`` without hosts and access edges (LLDP and the scan do not see hosts)."""
    out = g.copy()
    out.g.remove_nodes_from(out.nodes_of_kind("host"))
    return out


def with_known_hosts(expected: MultiLayerGraph, discovered: MultiLayerGraph) -> MultiLayerGraph:
    """A copy of ``expected`` keeping only the hosts ``discovered`` has (and their access edges).

    The controller learns a host when it sends traffic, so a discovered graph holds some or all of
    the spec's hosts; compared against this, a host discovered at the wrong port, with the wrong
    address, or not in the spec at all is still a difference.
    """
    out = expected.copy()
    out.g.remove_nodes_from([h for h in out.nodes_of_kind("host") if h not in discovered.g
                             or discovered.g.nodes[h].get("kind") != "host"])
    return out
