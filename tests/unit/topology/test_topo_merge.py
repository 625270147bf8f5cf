"""Merging discovery sources: Fig. 2 from LLDP+scan, from the static file and from the spec agree;
conflicts are reported and resolved by precedence (first source wins)."""
from __future__ import annotations

import copy

from topology.compare import graph_diff, without_hosts
from topology.graph import MultiLayerGraph, dpid_name, oport_id
from topology.merge import merge
from topology.spec import fig2_testbed, spec_to_graph, spec_to_vendor_file
from topology.vendor_file import vendor_to_graph

SPEC = fig2_testbed()


def live_discovery(spec=SPEC, circuits=(), lldp=(), named=False) -> MultiLayerGraph:
    """What the controller sees: switches by dpid (unnamed unless ``named``), OTS ports from
    FEATURES_REPLY, adaptations learnt by the optical scan, active XCONs and LLDP packet links."""
    g = MultiLayerGraph()
    name = {}
    for s in spec.switches:
        name[s.name] = g.add_packet_switch(s.name if named else dpid_name(s.dpid), s.dpid)
    for o in spec.ots:
        name[o.name] = g.add_ots(o.name if named else dpid_name(o.dpid), o.dpid, dict(o.ports), spec.unit_mbps,
                                 source="openflow")
    for link in spec.links_of_kind("adaptation"):
        g.add_adaptation(name[link.a], link.a_port, oport_id(name[link.b], link.b_port), source="scan")
    for ots, a, b in circuits:
        g.set_xcon_active(oport_id(name[ots], a), oport_id(name[ots], b))
    for a, ap, b, bp in lldp:
        g.add_packet_link(name[a], ap, name[b], bp, 10.0, source="lldp")
    return g


def static_doc(adaptations: bool = True) -> dict:
    doc = copy.deepcopy(spec_to_vendor_file(SPEC))
    if not adaptations:
        doc["adaptations"] = []  # packet_switches stay: the file still names the datapaths
    return doc


def truth() -> MultiLayerGraph:
    return without_hosts(spec_to_graph(SPEC))


def test_lldp_scan_plus_static_fibres_equals_static_file_equals_spec():
    merged = merge(live_discovery(), vendor_to_graph(static_doc(adaptations=False)), names=["live", "static"])
    assert merged.conflicts == []
    static_only = vendor_to_graph(static_doc())
    assert graph_diff(merged.graph, truth()) == []
    assert graph_diff(static_only, truth()) == []
    assert graph_diff(merged.graph, static_only) == []
    # placeholders took the real names the file gives the same dpids
    assert merged.graph.node_by_dpid(0xA1) == "A" and merged.graph.node_by_dpid(0x0F02) == "Y"
    # and each edge remembers who found it
    assert merged.graph.edge("adaptation:A:3-X:1")["source"] == "scan"
    assert merged.graph.edge("optical:X:2-Y:1")["source"] == "static"
    assert merged.graph.edge("xcon:X:1-X:2")["source"] == "openflow"


def test_live_state_survives_the_merge():
    circuits = [("X", 1, 2), ("Y", 1, 2), ("Y", 3, 4), ("Z", 1, 2)]
    live = live_discovery(circuits=circuits, lldp=[("A", 3, "B", 1), ("B", 2, "C", 1)])
    result = merge(live, vendor_to_graph(static_doc()))
    assert result.conflicts == []
    g = result.graph
    assert g.active_xcons() == ["xcon:X:1-X:2", "xcon:Y:1-Y:2", "xcon:Y:3-Y:4", "xcon:Z:1-Z:2"]
    assert g.edges_of_kind("packet") == ["packet:A:3-B:1", "packet:B:2-C:1"]
    assert g.edge("packet:A:3-B:1")["source"] == "lldp"
    expected = truth()
    for ots, a, b in circuits:
        expected.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}")
    expected.add_packet_link("A", 3, "B", 1, 10.0)
    expected.add_packet_link("B", 2, "C", 1, 10.0)
    assert graph_diff(g, expected) == []


def test_scan_beats_static_file_on_adaptation_conflict():
    """The static file says X:1 goes to A:3 but the scan saw A:4: the scan wins, conflict listed."""
    spec_live = fig2_testbed()
    live = live_discovery(spec_live)
    # rewire the live view: scan saw A:4 on X:1 (and nothing on X:4)
    a, x = live.node_by_dpid(0xA1), live.node_by_dpid(0x0F01)
    live.remove_edge(f"adaptation:{a}:3-{x}:1")
    live.remove_edge(f"adaptation:{a}:4-{x}:4")
    live.add_adaptation(a, 4, f"{x}:1", source="scan")
    result = merge(live, vendor_to_graph(static_doc()), names=["scan", "fig2-optical.yaml"])
    g = result.graph
    assert g.adaptation_at("X:1") == ("A", 4)
    assert g.peer_at_port("A", 3) is None and g.adaptation_at("X:4") is None
    dropped = {c.where: c for c in result.conflicts}
    assert set(dropped) == {"adaptation:A:3-X:1", "adaptation:A:4-X:4"}
    c = dropped["adaptation:A:3-X:1"]
    assert c.what == "edge" and c.kept == "adaptation:A:4-X:1 (scan)"
    assert "fig2-optical.yaml" in c.dropped and "port already connected elsewhere" in str(c)
    # reversed precedence: the file wins and the scan's observation is the one reported
    rev = merge(vendor_to_graph(static_doc()), live, names=["file", "scan"])
    assert rev.graph.adaptation_at("X:1") == ("A", 3)
    assert [c.where for c in rev.conflicts] == ["adaptation:A:4-X:1"]


def test_granularity_conflict_live_wins():
    doc = static_doc()
    doc["ots"][0]["ports"][6] = "ODU2"
    doc["fibres"] = [f for f in doc["fibres"] if f["a"] != "X:6"]
    result = merge(live_discovery(), vendor_to_graph(doc))
    assert result.graph.g.nodes["X:6"]["granularity"] == "ODU0"
    (c,) = [c for c in result.conflicts if c.what == "port"]
    assert c.where == "X:6" and "ODU0" in c.kept and "ODU2" in c.dropped
    assert "xcon:X:1-X:6" not in result.graph.edges_of_kind("xcon")


def test_ports_are_the_union_with_their_xcons():
    doc = static_doc()
    doc["ots"][1]["ports"][7] = "ODU2"  # a port the live OTS did not report (yet)
    g = merge(live_discovery(), vendor_to_graph(doc)).graph
    assert "Y:7" in g.oports("Y")
    assert {"xcon:Y:1-Y:7", "xcon:Y:4-Y:7"} <= set(g.edges_of_kind("xcon"))


def test_xcon_conflict_first_source_wins():
    a = live_discovery(circuits=[("X", 1, 2)], named=True)
    b = live_discovery(circuits=[("X", 1, 3)])  # unnamed: merged by dpid
    result = merge(a, b)
    assert result.graph.active_xcons() == ["xcon:X:1-X:2"]
    assert [(c.what, c.where) for c in result.conflicts] == [("xcon", "xcon:X:1-X:3")]


def test_attribute_and_naming_conflicts():
    g1 = MultiLayerGraph()
    g1.add_packet_switch("A", 1)
    g1.add_packet_switch("B", 2)
    g1.add_packet_link("A", 1, "B", 1, 10.0, latency=1.0)
    g2 = MultiLayerGraph()
    g2.add_packet_switch("A", 1)
    g2.add_packet_switch("Bee", 2)  # a second real name for dpid 2
    g2.add_packet_link("A", 1, "Bee", 1, 20.0, latency=1.0)
    result = merge(g1, g2, names=["one", "two"])
    assert result.graph.nodes_of_kind("packet") == ["A", "B"]
    assert result.graph.edge("packet:A:1-B:1")["capacity"] == 10.0
    whats = sorted((c.what, c.where) for c in result.conflicts)
    assert whats == [("attribute", "packet:A:1-B:1.capacity"), ("node", "dpid 0x2")]


def test_kind_conflict_drops_node_and_its_edges():
    g1 = MultiLayerGraph()
    g1.add_packet_switch("A", 1)
    g2 = MultiLayerGraph()
    g2.add_ots("A", None, {1: "ODU2", 2: "ODU2"})
    g2.add_ots("B", None, {1: "ODU2"})
    g2.add_optical_link("A:1", "B:1")
    result = merge(g1, g2)
    assert result.graph.kind("A") == "packet"
    assert result.graph.edges_of_kind("optical") == []
    assert {c.what for c in result.conflicts} == {"node", "edge"}


def test_merge_of_one_graph_is_identity():
    g = spec_to_graph(SPEC)
    g.set_xcon_active("X:1", "X:2")
    g.add_packet_link("A", 3, "B", 1, 10.0)
    result = merge(g)
    assert result.conflicts == []
    assert result.graph == g
