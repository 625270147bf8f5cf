"""MultiLayerGraph: building, invariants, lookups, layer views and the JSON round trip."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topology import granularity as gran
from topology.errors import TopologyError
from topology.graph import MultiLayerGraph, dpid_name, edge_key, oport_id
from topology.spec import fig2_testbed, optical_mesh, spec_to_graph


def small() -> MultiLayerGraph:
    g = MultiLayerGraph()
    g.add_packet_switch("A", 0xA1)
    g.add_packet_switch("B", 0xB1)
    g.add_ots("X", 0xF01, {1: "ODU2", 2: "ODU2", 3: "ODU2", 6: "ODU0", 7: "odu0"}, unit_mbps=2.0, setup_time=0.2)
    g.add_ots("Y", 0xF02, {1: "ODU2", 2: "ODU2"}, unit_mbps=2.0)
    g.add_host("h1", "10.0.0.1", "00:00:00:00:00:01")
    return g


def test_granularity_units_and_names():
    assert gran.units("ODU0") == 1.25 and gran.units("ODU2") == 10 and gran.units("ODU4") == 100
    assert gran.normalize("odu2e") == "ODU2e"
    assert gran.capacity_mbps("ODU2", 2.5) == 25.0
    assert gran.from_port_name("ODU2-3") == "ODU2" and gran.from_port_name("eth0") is None
    assert gran.from_port_name("ODU2e-12") == "ODU2e" and gran.from_port_name("ODU2-x") is None
    with pytest.raises(TopologyError, match="unknown granularity"):
        gran.normalize("ODU9")


def test_add_ots_creates_oports_and_potential_xcons_per_granularity():
    g = small()
    assert g.oports("X") == ["X:1", "X:2", "X:3", "X:6", "X:7"]
    assert g.g.nodes["X:6"] == {"kind": "oport", "ots": "X", "port": 6, "granularity": "ODU0", "capacity": 2.5}
    assert g.g.nodes["X:1"]["capacity"] == 20.0
    xcons = [k for k in g.edges_of_kind("xcon") if k.startswith("xcon:X")]
    # 3 ODU2 ports -> 3 pairs, 2 ODU0 ports -> 1 pair, no ODU0-ODU2 pair
    assert xcons == ["xcon:X:1-X:2", "xcon:X:1-X:3", "xcon:X:2-X:3", "xcon:X:6-X:7"]
    e = g.edge("xcon:X:1-X:2")
    assert e["active"] is False and e["setup_time"] == 0.2 and e["capacity"] == 20.0
    with pytest.raises(TopologyError, match="granularities differ"):
        g.xcon_key("X:1", "X:6")
    with pytest.raises(TopologyError, match="different OTSes"):
        g.xcon_key("X:1", "Y:1")


def test_add_ots_port_later_adds_its_xcons():
    g = small()
    g.add_ots_port("Y", 5, "ODU2")
    assert {"xcon:Y:1-Y:5", "xcon:Y:2-Y:5"} <= set(g.edges_of_kind("xcon"))
    with pytest.raises(TopologyError, match="already has port 5"):
        g.add_ots_port("Y", 5, "ODU2")


def test_edge_keys_are_stable_and_sorted():
    g = small()
    k1 = g.add_packet_link("B", 2, "A", 4, 10.0)
    assert k1 == "packet:A:4-B:2" == edge_key("packet", "A:4", "B:2") == edge_key("packet", "B:2", "A:4")
    assert g.add_adaptation("A", 3, "X:1") == "adaptation:A:3-X:1"
    assert g.add_optical_link("Y:1", "X:2") == "optical:X:2-Y:1"
    assert g.add_access("h1", "A", 1, 20.0) == "access:A:1-h1"
    assert g.edge(k1)["ports"] == {"A": 4, "B": 2}


def test_adaptation_capacity_defaults_to_oport():
    g = small()
    g.add_adaptation("A", 3, "X:6")
    assert g.edge("adaptation:A:3-X:6")["capacity"] == 2.5


@pytest.mark.parametrize("call, message", [
    (lambda g: g.add_packet_switch("A", 5), "already exists"),
    (lambda g: g.add_packet_switch("C", 0xA1), "already used by node 'A'"),
    (lambda g: g.add_packet_switch("C:1"), "must not contain ':'"),
    (lambda g: g.add_ots("Z", None, {0: "ODU2"}), "positive integers"),
    (lambda g: g.add_ots("Z", None, {1: "ODU7"}), "port 1: unknown granularity"),
    (lambda g: g.add_packet_link("A", 1, "X", 1), "is optical, expected packet"),
    (lambda g: g.add_packet_link("A", 1, "A", 2), "loop"),
    (lambda g: g.add_packet_link("A", 1, "Q", 2), "unknown node 'Q'"),
    (lambda g: g.add_adaptation("A", 3, "X:9"), "unknown node 'X:9'"),
    (lambda g: g.add_optical_link("X:1", "X:2"), "two ports of one OTS"),
    (lambda g: g.add_optical_link("X:6", "Y:1"), "different granularity"),
    (lambda g: g.add_packet_link("A", 1, "B", 1, capacity=-1), "capacity must be >= 0"),
    (lambda g: g.oport("X", 4), "OTS X has no port 4"),
])
def test_invalid_operations_raise_topology_error(call, message):
    g = small()
    with pytest.raises(TopologyError, match=message) as info:
        call(g)
    assert info.value.user_error is True


def test_port_occupancy_rules():
    g = small()
    g.add_adaptation("A", 3, "X:1")
    with pytest.raises(TopologyError, match="already used by adaptation:A:3-X:1"):
        g.add_adaptation("A", 3, "X:2")  # one cable per packet port
    with pytest.raises(TopologyError, match="already used by adaptation:A:3-X:1"):
        g.add_adaptation("B", 1, "X:1")  # one cable per oport
    with pytest.raises(TopologyError, match="already used"):
        g.add_optical_link("X:1", "Y:1")
    # a packet link over the circuit may share the port with the adaptation edge...
    g.add_packet_link("A", 3, "B", 1, 20.0, source="lldp")
    # ...but not with another packet link, unless it replaces it (the circuit moved)
    with pytest.raises(TopologyError, match="already used by packet:A:3-B:1"):
        g.add_packet_link("A", 3, "B", 2)
    g.add_packet_link("A", 3, "B", 2, replace=True)
    assert g.edges_of_kind("packet") == ["packet:A:3-B:2"]
    g.add_access("h1", "A", 1)
    with pytest.raises(TopologyError, match="already used by access"):
        g.add_packet_link("A", 1, "B", 5)
    with pytest.raises(TopologyError, match="already exists"):
        g.add_access("h1", "A", 1)


def test_xcon_activation_one_rule_per_port():
    g = small()
    assert g.set_xcon_active("X:2", "X:1") == "xcon:X:1-X:2"
    assert g.active_xcons() == ["xcon:X:1-X:2"]
    assert g.active_xcon_at("X:1") == "xcon:X:1-X:2" and g.active_xcon_at("X:3") is None
    with pytest.raises(TopologyError, match="X:1 is already in active xcon:X:1-X:2"):
        g.set_xcon_active("X:1", "X:3")
    g.set_xcon_active("X:1", "X:2", True)  # idempotent
    g.set_xcon_active("X:1", "X:2", False)
    g.set_xcon_active("X:1", "X:3")
    assert g.active_xcons() == ["xcon:X:1-X:3"]
    with pytest.raises(TopologyError, match="potential XCON"):
        g.remove_edge("xcon:X:1-X:3")


def test_lookups():
    g = small()
    g.add_adaptation("A", 3, "X:1")
    g.add_packet_link("A", 3, "B", 1)
    g.add_optical_link("X:2", "Y:1", latency=1.5)
    g.add_access("h1", "A", 1)
    assert g.node_by_dpid(0xF01) == "X" and g.node_by_dpid(0xA1) == "A" and g.node_by_dpid(7) is None
    assert g.oport("X", 1) == oport_id("X", 1) == "X:1"
    assert g.peer_at_port("A", 3) == "X:1"
    assert g.peer_at_port("A", 3, kinds=("packet",)) == "B"
    assert g.peer_at_port("A", 1) == "h1" and g.peer_at_port("A", 9) is None
    assert g.edges_at_port("A", 3) == ["adaptation:A:3-X:1", "packet:A:3-B:1"]
    assert g.adaptation_at("X:1") == ("A", 3) and g.adaptation_at("X:2") is None
    assert g.fibre_peer("X:2") == "Y:1" and g.fibre_peer("Y:1") == "X:2"
    assert g.edge_ends("optical:X:2-Y:1") == ("X:2", "Y:1")
    assert g.kind("X:2") == "oport" and dpid_name(10) == "dp-000000000000000a"
    g.remove_edge("packet:A:3-B:1")
    assert g.peer_at_port("A", 3, kinds=("packet",)) is None
    with pytest.raises(TopologyError, match="unknown edge"):
        g.edge("packet:nope")


def test_layer_views():
    g = spec_to_graph(fig2_testbed())
    g.set_xcon_active("X:1", "X:2")
    g.add_packet_link("A", 3, "B", 1, 10.0)
    pkt = g.packet_layer()
    assert set(pkt.nodes) == {"A", "B", "C", "h1", "h2", "h3", "h4"}
    assert {d["kind"] for _, _, d in pkt.edges(data=True)} == {"packet", "access"}
    opt = g.optical_layer()
    assert all(g.g.nodes[n]["kind"] in ("optical", "oport") for n in opt.nodes)
    assert {d["kind"] for _, _, d in opt.edges(data=True)} == {"optical", "xcon"}
    active = g.optical_layer(active_only=True)
    assert sorted(k for _, _, k, d in active.edges(keys=True, data=True) if d["kind"] == "xcon") == ["xcon:X:1-X:2"]
    phys = g.physical()
    assert "packet:A:3-B:1" not in {k for _, _, k in phys.edges(keys=True)}
    assert "adaptation:A:3-X:1" in {k for _, _, k in phys.edges(keys=True)}


def test_json_round_trip_exact_fig2_with_state():
    g = spec_to_graph(fig2_testbed(unit_mbps=2.0))
    for a, b in (("X:1", "X:2"), ("Y:1", "Y:2"), ("Y:3", "Y:4"), ("Z:1", "Z:2")):
        g.set_xcon_active(a, b)
    g.add_packet_link("A", 3, "B", 1, 20.0, 0.5, source="lldp")
    g.add_packet_switch(dpid_name(2**64 - 1), 2**64 - 1)
    text = g.to_json()
    data = json.loads(text)
    assert set(data) >= {"nodes", "links"}
    link = next(x for x in data["links"] if x["key"] == "packet:A:3-B:1")
    assert link["u"] == "A" and link["v"] == "B" and link["source"] == "lldp" and link["ports"] == {"A": 3, "B": 1}
    back = MultiLayerGraph.from_json(text)
    assert back == g
    assert back.to_json() == text
    assert MultiLayerGraph.from_json(data) == g  # a dict works too
    assert back.active_xcons() == g.active_xcons()
    # the copy is independent
    c = g.copy()
    c.set_xcon_active("X:1", "X:2", False)
    assert g.edge("xcon:X:1-X:2")["active"] is True


def test_from_json_rejects_bad_documents():
    with pytest.raises(TopologyError, match="not valid JSON"):
        MultiLayerGraph.from_json("{")
    with pytest.raises(TopologyError, match="'nodes' and 'links'"):
        MultiLayerGraph.from_json("[]")
    with pytest.raises(TopologyError, match="unknown kind"):
        MultiLayerGraph.from_json({"nodes": [{"id": "A", "kind": "router"}], "links": []})
    with pytest.raises(TopologyError, match="unknown end node"):
        MultiLayerGraph.from_json({"nodes": [{"id": "A", "kind": "packet"}],
                                   "links": [{"u": "A", "v": "B", "key": "k", "kind": "packet"}]})


@settings(max_examples=15, deadline=None)
@given(n_packet=st.integers(1, 8), n_ots=st.integers(1, 6), degree=st.integers(1, 4), seed=st.integers(0, 50),
       active=st.integers(0, 10))
def test_json_round_trip_property(n_packet, n_ots, degree, seed, active):
    g = spec_to_graph(optical_mesh(n_packet, n_ots, degree, seed))
    done = 0
    for key in g.edges_of_kind("xcon"):
        if done >= active:
            break
        a, b = g.edge_ends(key)
        if g.active_xcon_at(a) is None and g.active_xcon_at(b) is None:
            g.set_xcon_active(a, b)
            done += 1
    assert MultiLayerGraph.from_json(g.to_json()) == g
    # invariant: no oport in two active XCONs, XCONs only within one OTS and one granularity
    for key in g.active_xcons():
        a, b = g.edge_ends(key)
        assert g.active_xcon_at(a) == key == g.active_xcon_at(b)
    for key in g.edges_of_kind("xcon"):
        a, b = g.edge_ends(key)
        na, nb = g.g.nodes[a], g.g.nodes[b]
        assert na["ots"] == nb["ots"] and na["granularity"] == nb["granularity"]


def test_edge_lookup_survives_direct_changes_to_g():
    g = small()
    g.add_adaptation("A", 3, "X:1")
    assert g.edge("adaptation:A:3-X:1")["capacity"] == 20.0
    g.g.remove_edge("A", "X:1", "adaptation:A:3-X:1")  # callers may edit the networkx graph
    with pytest.raises(TopologyError, match="unknown edge"):
        g.edge("adaptation:A:3-X:1")
    g.g.add_edge("A", "X:1", key="adaptation:A:3-X:1", kind="adaptation", ports={"A": 3}, capacity=5.0,
                 source="scan")
    assert g.edge_ends("adaptation:A:3-X:1") == ("A", "X:1") and g.edge("adaptation:A:3-X:1")["capacity"] == 5.0
