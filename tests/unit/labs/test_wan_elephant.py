"""The WAN lab's elephant stage, chosen from the spec alone: a fibre on a cycle, its shortest detour, the
best-effort circuit's two XCONs from each PoP's last uplink over that fibre."""
from __future__ import annotations

import networkx as nx
import pytest

from mininet_labs import wan_elephant, wan_load
from topology.spec import LabSpec, from_topohub


def _spec(key: str) -> LabSpec:
    return from_topohub(key, uplinks=wan_load.uplinks_needed(from_topohub(key)))


@pytest.mark.parametrize("key", ["sndlib/abilene", "sndlib/germany50", "gabriel/25/0"])
def test_the_elephant_fibre_has_the_shortest_detour_and_the_circuit_runs_over_it(key: str) -> None:
    spec = _spec(key)
    pair = wan_elephant.elephant_pair(spec)
    g = nx.Graph([(f.a, f.b) for f in spec.links_of_kind("optical")])
    a, b = pair.src.ots, pair.dst.ots
    assert g.has_edge(a, b)
    detour = g.copy()
    detour.remove_edge(a, b)
    assert pair.detour_hops == nx.shortest_path_length(detour, a, b)
    shortest = min(nx.shortest_path_length(nx.restricted_view(g, [], [(f.a, f.b)]), f.a, f.b)
                   for f in spec.links_of_kind("optical") if nx.edge_connectivity(g, f.a, f.b) >= 2)
    assert pair.detour_hops == shortest
    # in: the PoP's last uplink's OTS port; over: the fibre's ports; out: the far PoP's last uplink
    fibre = next(f for f in spec.links_of_kind("optical") if (f.a, f.b) == (a, b))
    ups = {(link.a, link.a_port): link.b_port for link in spec.links_of_kind("adaptation")}
    last = {sw: max(p for s, p in ups if s == sw) for sw in (pair.src.switch, pair.dst.switch)}
    assert pair.uplinks == (last[pair.src.switch], last[pair.dst.switch])
    assert pair.xcons == ((a, ups[(pair.src.switch, pair.uplinks[0])], fibre.a_port),
                          (b, fibre.b_port, ups[(pair.dst.switch, pair.uplinks[1])]))
    assert pair.link() == (pair.src.switch, pair.uplinks[0], pair.dst.switch, pair.uplinks[1])


def test_fibres_in_a_tree_leave_an_elephant_nowhere_to_go() -> None:
    spec = _spec("sndlib/abilene")
    tree = {frozenset((a.ots, b.ots)) for a, b in wan_load.tree_pairs(spec)}
    links = tuple(link for link in spec.links
                  if link.kind != "optical" or frozenset((link.a, link.b)) in tree)
    treed = LabSpec(spec.name, spec.switches, spec.ots, spec.hosts, links, spec.unit_mbps)
    with pytest.raises(ValueError, match="no fibre lies on a cycle"):
        wan_elephant.elephant_pair(treed)
