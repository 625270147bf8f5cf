"""``MultiLayerGraph.copy`` is the JSON round trip's graph (same nodes, links, attributes and iteration
order: the PCE's tie-breaks follow it), and its layer filter keeps exactly the chosen kinds."""
from __future__ import annotations

from mininet_labs.circuits import FIG2_CIRCUITS
from topology.graph import MultiLayerGraph
from topology.spec import fig2_testbed, optical_mesh, spec_to_graph


def _lit_fig2() -> MultiLayerGraph:
    g = spec_to_graph(fig2_testbed())
    for ots, a, b in FIG2_CIRCUITS["initial"]:
        g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    g.add_packet_link("B", 2, "C", 1, 10.0, source="lldp")
    g.add_packet_link("A", 3, "B", 1, 10.0, source="lldp")
    return g


def _order(g: MultiLayerGraph) -> tuple[list, list, list]:
    return (list(g.g.nodes(data=True)), list(g.g.edges(keys=True, data=True)), [list(g.g.adj[n]) for n in g.g])


def test_copy_is_the_round_trip_in_the_same_order_and_independent():
    for g in (_lit_fig2(), spec_to_graph(optical_mesh(6, 4, seed=2))):
        c = g.copy()
        assert c == g and _order(c) == _order(MultiLayerGraph.from_dict(g.to_dict()))
        key = c.edges_of_kind("packet")[0] if c.edges_of_kind("packet") else c.edges_of_kind("access")[0]
        c.edge(key)["capacity"] = 123.0
        c.edge(key)["ports"][next(iter(c.edge(key)["ports"]))] = 99
        assert g.edge(key)["capacity"] != 123.0 and 99 not in g.edge(key)["ports"].values()


def test_a_layer_copy_keeps_only_its_kinds_in_the_full_copys_order():
    g = _lit_fig2()
    layer = g.copy(("packet", "host"), ("packet", "access"))
    assert {d["kind"] for _n, d in layer.g.nodes(data=True)} == {"packet", "host"}
    assert {d["kind"] for _u, _v, d in layer.g.edges(data=True)} == {"packet", "access"}
    full = g.copy()
    keep = [(u, v, k, d) for u, v, k, d in full.g.edges(keys=True, data=True) if d["kind"] in ("packet", "access")]
    assert list(layer.g.edges(keys=True, data=True)) == keep
    assert sorted(layer.edges_of_kind("packet")) == sorted(g.edges_of_kind("packet"))
