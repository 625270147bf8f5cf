"""Lab specs: the Fig. 2 wiring of docs/contracts.md, validation errors, the generators."""
from __future__ import annotations

import dataclasses

import networkx as nx
import pytest

from topology.errors import SpecError
from topology.spec import (
    HostSpec,
    LabSpec,
    LinkSpec,
    OtsSpec,
    SwitchSpec,
    fig2_testbed,
    from_topohub,
    optical_mesh,
    spec_by_name,
    spec_to_graph,
)


def connected_physically(spec: LabSpec) -> bool:
    """Every switch, OTS port and host reachable over cables and potential XCONs."""
    g = spec_to_graph(spec)
    view = nx.Graph()
    view.add_edges_from((u, v) for u, v in g.g.edges())
    wanted = set(g.nodes_of_kind("packet")) | set(g.nodes_of_kind("host")) | set(g.nodes_of_kind("oport"))
    return wanted <= set(view.nodes) and nx.is_connected(view.subgraph(wanted))


def test_fig2_matches_contract_section_2():
    s = fig2_testbed()
    assert {(x.name, x.dpid) for x in s.switches} == {("A", 0xA1), ("B", 0xB1), ("C", 0xC1)}
    assert {(o.name, o.dpid) for o in s.ots} == {("X", 0x0F01), ("Y", 0x0F02), ("Z", 0x0F03)}
    assert s.dpid_names() == {0xA1: "A", 0xB1: "B", 0xC1: "C", 0x0F01: "X", 0x0F02: "Y", 0x0F03: "Z"}
    assert {(h.name, h.switch, h.port, h.ip) for h in s.hosts} == {
        ("h1", "A", 1, "10.0.0.1"), ("h2", "A", 2, "10.0.0.2"), ("h3", "C", 3, "10.0.0.3"), ("h4", "C", 4, "10.0.0.4")}
    adapt = {(x.a, x.a_port, x.b, x.b_port) for x in s.links_of_kind("adaptation")}
    assert adapt == {("A", 3, "X", 1), ("A", 4, "X", 4), ("B", 1, "Y", 2), ("B", 2, "Y", 3),
                     ("C", 1, "Z", 2), ("C", 2, "Z", 4)}
    fibres = {(x.a, x.a_port, x.b, x.b_port) for x in s.links_of_kind("optical")}
    assert fibres == {("X", 2, "Y", 1), ("X", 3, "Z", 3), ("X", 5, "Z", 5), ("Y", 4, "Z", 1), ("X", 6, "Z", 6)}
    assert s.links_of_kind("packet") == []
    for o in s.ots:
        for p, g in o.ports.items():
            assert g == ("ODU0" if (o.name, p) in {("X", 6), ("Z", 6)} else "ODU2")
    assert all(x.mbps <= 50 for x in s.links)  # userspace datapath budget (environment.md)


def test_fig2_graph_supports_the_papers_circuits():
    g = spec_to_graph(fig2_testbed(unit_mbps=1.0))
    assert g.edge("adaptation:A:3-X:1")["capacity"] == 10.0
    assert g.edge("optical:X:6-Z:6")["capacity"] == 1.25
    # initial path, router bypass at Y, A-X-Z-C and the offload path all exist as potential XCONs
    for a, b in (("X:1", "X:2"), ("Y:1", "Y:2"), ("Y:3", "Y:4"), ("Z:1", "Z:2"), ("Y:1", "Y:4"),
                 ("X:1", "X:3"), ("Z:3", "Z:2"), ("X:4", "X:5"), ("Z:5", "Z:4")):
        g.xcon_key(a, b)
    assert len(g.edges_of_kind("xcon")) == 10 + 6 + 10  # C(5,2) + C(4,2) + C(5,2); ODU0 pairs are cross-OTS


def test_unit_mbps_scales_capacities():
    s = fig2_testbed(unit_mbps=4.0)
    g = spec_to_graph(s)
    assert g.g.nodes["X:1"]["capacity"] == 40.0
    assert next(x for x in s.links if x.kind == "adaptation").mbps == 40.0


def _base(**over):
    kw = dict(name="t", switches=(SwitchSpec("A", 1), SwitchSpec("B", 2)),
              ots=(OtsSpec("X", 3, {1: "ODU2", 2: "ODU2", 3: "ODU0"}), OtsSpec("Y", 4, {1: "ODU2", 2: "ODU0"})),
              hosts=(HostSpec("h1", "A", 1, "10.0.0.1", "00:00:00:00:00:01"),),
              links=(LinkSpec("h1", 0, "A", 1, "access", 10), LinkSpec("A", 2, "X", 1, "adaptation", 10)))
    kw.update(over)
    return LabSpec(**kw)


def test_valid_small_spec():
    assert _base().name == "t"


@pytest.mark.parametrize("over, message", [
    (dict(switches=(SwitchSpec("A", 1), SwitchSpec("A", 2))), "duplicate node names: A"),
    (dict(switches=(SwitchSpec("A", 1), SwitchSpec("B", 3))), "share dpid 0x3"),
    (dict(switches=(SwitchSpec("A", 1), SwitchSpec("B:1", 2))), "bad node name"),
    (dict(ots=(OtsSpec("X", 3, {1: "ODU9"}),)), "OTS X port 1: unknown granularity"),
    (dict(hosts=(HostSpec("h1", "Q", 1, "ip", "mac"),)), "unknown switch 'Q'"),
    (dict(links=(LinkSpec("h1", 0, "A", 1, "access", 10), LinkSpec("A", 1, "X", 1, "adaptation", 10))),
     "port A:1 used twice"),
    (dict(links=(LinkSpec("h1", 0, "A", 1, "access", 10), LinkSpec("A", 2, "X", 9, "adaptation", 10))),
     "OTS X has no port 9"),
    (dict(links=(LinkSpec("h1", 0, "A", 1, "access", 10), LinkSpec("X", 3, "Y", 1, "optical", 10))),
     "granularities differ"),
    (dict(links=(LinkSpec("h1", 0, "A", 1, "access", 10), LinkSpec("A", 2, "Q", 1, "packet", 10))),
     "'Q' is not a known switch"),
    (dict(links=(LinkSpec("h1", 0, "A", 1, "access", 10), LinkSpec("A", 2, "B", 1, "wifi", 10))), "unknown kind"),
    (dict(links=(LinkSpec("h1", 0, "A", 1, "access", 10), LinkSpec("A", 2, "B", 1, "packet", 0))), "mbps > 0"),
    (dict(links=(LinkSpec("h1", 0, "A", 3, "access", 10),)), "declared on A:1"),
    (dict(links=()), "needs exactly one access link"),
    (dict(unit_mbps=0), "unit_mbps must be > 0"),
])
def test_invalid_specs(over, message):
    with pytest.raises(SpecError, match=message) as info:
        _base(**over)
    assert info.value.user_error is True


def test_spec_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        fig2_testbed().name = "x"


@pytest.mark.parametrize("n_packet, n_ots, degree", [(1, 1, 3), (4, 2, 1), (10, 5, 3), (30, 12, 4)])
def test_optical_mesh_sizes_and_connectivity(n_packet, n_ots, degree):
    s = optical_mesh(n_packet, n_ots, degree, seed=3)
    assert len(s.switches) == n_packet and len(s.ots) == n_ots and len(s.hosts) == n_packet
    fibres = s.links_of_kind("optical")
    assert len(fibres) == max(n_ots - 1, min((n_ots * degree + 1) // 2, n_ots * (n_ots - 1) // 2))
    assert len(s.links_of_kind("adaptation")) == 2 * n_packet
    assert connected_physically(s)
    assert optical_mesh(n_packet, n_ots, degree, seed=3) == s  # deterministic for a seed


def test_optical_mesh_rejects_nonsense():
    with pytest.raises(SpecError):
        optical_mesh(0, 3)


def test_from_topohub_abilene():
    s = from_topohub("sndlib/abilene")
    assert len(s.ots) == 12 and len(s.switches) == 12
    assert len(s.links_of_kind("optical")) == 15
    assert any(x.latency_ms > 0 for x in s.links_of_kind("optical"))  # from the link lengths
    assert all(len(f"{n.name}-eth{max(n.ports)}") <= 15 for n in s.ots)  # Mininet interface names
    assert connected_physically(s)


def test_from_topohub_unknown():
    with pytest.raises(SpecError, match="unknown topohub topology"):
        from_topohub("sndlib/nope")


def test_spec_by_name():
    assert spec_by_name("fig2") == fig2_testbed()
    assert len(spec_by_name("mesh-6x3-d2-s1").switches) == 6
    assert spec_by_name("topohub:sndlib/abilene").name == "topohub-sndlib-abilene"
    with pytest.raises(SpecError, match="unknown lab"):
        spec_by_name("nope")
