"""Learnt hosts become ``host`` nodes with ``access`` edges in the controller's live graph."""
from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_0, ofproto_v1_0_parser, ofproto_v1_3, ofproto_v1_3_parser

from app.controller.inventory import _port_info, port_speed_kbps
from app.controller.live_graph import HOST_SOURCE, combined, live_graph, strip
from app.controller.model import PACKET, HostInfo, PortInfo, PortRef, SwitchInfo, host_label, split_names
from topology.compare import graph_diff, with_known_hosts, without_hosts
from topology.spec import fig2_testbed, spec_to_graph, spec_to_vendor_file
from topology.vendor_file import vendor_to_graph

from .test_graph_view import live_state

TEN_G = 10_000_000  # kbit/s, what OVS reports for a veth port


def fig2_live(hosts, speed_kbps=TEN_G, host_names=None, default=1000.0):
    spec = fig2_testbed()
    switches, adapt, _ = live_state(spec)
    for sw in switches:
        if sw.kind == PACKET:
            sw.ports = {p: PortInfo(p, f"{sw.name}-eth{p}", "00:00:00:00:00:00", True, speed_kbps) for p in (1, 2, 3, 4)}
    names = {h.mac: h.name for h in spec.hosts} if host_names is None else host_names
    live, problems = live_graph(switches, [], adapt, {}, 1.0, hosts, names, default)
    return spec, live, problems


def spec_hosts(spec, with_ip=True):
    dpid = {s.name: s.dpid for s in spec.switches}
    return [HostInfo(h.mac, h.ip if with_ip else None, PortRef(dpid[h.switch], h.port)) for h in spec.hosts]


def test_hosts_make_the_live_graph_equal_the_spec_including_hosts():
    spec, live, problems = fig2_live(spec_hosts(fig2_testbed()))
    assert problems == []
    merged = combined(live, strip(vendor_to_graph(spec_to_vendor_file(spec)), ["adaptation"]))
    assert merged.conflicts == []
    expected = spec_to_graph(spec)
    assert graph_diff(merged.graph, expected, ignore_attrs=("source", "name", "access.capacity")) == []
    edge = merged.graph.edge("access:A:1-h1")
    assert edge["capacity"] == 10_000.0 and edge["ports"] == {"A": 1} and edge["source"] == HOST_SOURCE
    # without the per-kind ignore the (shaped) spec capacity differs: the comparison is real
    assert graph_diff(merged.graph, expected, ignore_attrs=("source", "name")) != []


def test_access_capacity_from_port_speed_or_the_default():
    _, live, _ = fig2_live(spec_hosts(fig2_testbed())[:1], speed_kbps=100_000)
    assert live.edge("access:A:1-h1")["capacity"] == 100.0
    _, live, _ = fig2_live(spec_hosts(fig2_testbed())[:1], speed_kbps=0, default=250.0)
    assert live.edge("access:A:1-h1")["capacity"] == 250.0


def test_unnamed_host_gets_a_mac_label_and_keeps_ip():
    host = HostInfo("02:AA:00:00:00:01", "10.9.9.9", PortRef(0xA1, 2))
    _, live, problems = fig2_live([host], host_names={})
    node = host_label(host.mac)
    assert problems == [] and node == "host-02aa00000001" and ":" not in node
    assert live.g.nodes[node] == {"kind": "host", "ip": "10.9.9.9", "mac": host.mac}
    assert live.edges_at_port("A", 2) == [f"access:A:2-{node}"]


def test_hosts_on_unknown_switches_are_skipped_and_port_clashes_reported():
    on_ots = HostInfo("00:00:00:00:00:09", None, PortRef(0x0F01, 1))
    gone = HostInfo("00:00:00:00:00:08", None, PortRef(0xDEAD, 1))
    first = HostInfo("00:00:00:00:00:01", "10.0.0.1", PortRef(0xA1, 1))
    second = HostInfo("00:00:00:00:00:07", "10.0.0.7", PortRef(0xA1, 1))  # same port: a hub
    _, live, problems = fig2_live([on_ots, gone, first, second])
    assert live.nodes_of_kind("host") == ["h1"]
    assert len(problems) == 1 and "00:00:00:00:00:07" in problems[0] and "A:1" in problems[0]


def test_with_known_hosts_compares_only_what_discovery_has_seen():
    spec = fig2_testbed()
    expected = spec_to_graph(spec)
    _, live, _ = fig2_live(spec_hosts(spec)[:2])
    trimmed = with_known_hosts(expected, live)
    assert sorted(trimmed.nodes_of_kind("host")) == ["h1", "h2"]
    assert len(trimmed.edges_of_kind("access")) == 2
    diff = graph_diff(live, with_known_hosts(without_hosts(expected), live), node_kinds=("host",),
                      edge_kinds=("access",))
    assert "only in first: node h1" in diff  # a host the expectation lacks is still a difference


def test_graph_diff_kind_scoped_ignore():
    spec = fig2_testbed()
    _, a, _ = fig2_live(spec_hosts(spec, with_ip=False))
    _, b, _ = fig2_live(spec_hosts(spec))
    assert graph_diff(a, b, ignore_attrs=("source", "host.ip")) == []
    assert any("ip" in line for line in graph_diff(a, b))
    assert graph_diff(a, b, ignore_attrs=("source", "packet.ip")) != []  # scoped to its kind only


def test_port_speed_from_of13_and_of10_ports():
    p13 = ofproto_v1_3_parser.OFPPort(port_no=1, hw_addr="00:00:00:00:00:01", name=b"A-eth1", config=0, state=0,
                                      curr=0, advertised=0, supported=0, peer=0, curr_speed=TEN_G, max_speed=0)
    assert port_speed_kbps(ofproto_v1_3, p13) == TEN_G
    assert _port_info(ofproto_v1_3, p13).speed_kbps == TEN_G
    p10 = ofproto_v1_0_parser.OFPPhyPort(1, "00:00:00:00:00:01", b"s-eth1", 0, 0,
                                         ofproto_v1_0.OFPPF_1GB_FD | ofproto_v1_0.OFPPF_COPPER, 0, 0, 0)
    assert port_speed_kbps(ofproto_v1_0, p10) == 1_000_000
    assert port_speed_kbps(ofproto_v1_0, p10._replace(curr=ofproto_v1_0.OFPPF_COPPER)) == 0


def test_split_names():
    dpids, hosts = split_names({"0xa1": "A", "178": "B", "00:00:00:00:00:0A": "h10"})
    assert dpids == {0xA1: "A", 0xB2: "B"} and hosts == {"00:00:00:00:00:0a": "h10"}
    for bad in ({"zz": "B"}, {"0xa1": ""}, {"0xa1": 3}, {"-1": "neg"}, ["0xa1"]):
        with pytest.raises(ValueError):
            split_names(bad)


def test_switch_json_reports_port_speed():
    sw = SwitchInfo(0xA1, PACKET, 4, "A", {1: PortInfo(1, "A-eth1", "00:00:00:00:00:01", True, TEN_G)})
    assert sw.to_json()["ports"][0]["speed_kbps"] == TEN_G


def test_a_port_no_host_was_heard_from_is_still_a_port_of_its_switch():
    """A controller just restarted has heard from no host: a reservation from A:1 must still find
    the port (the WAN lab's restart: "src: switch s0 has no port 1 (ports: [2, 3, 4])")."""
    from app.web.errors import ApiError
    from app.web.topology_source import check_endpoint_in_graph, switch_ports

    spec, live, problems = fig2_live([])  # no host learnt
    merged = combined(live, strip(vendor_to_graph(spec_to_vendor_file(spec)), ["adaptation"])).graph
    assert not merged.nodes_of_kind("host")
    assert live.g.nodes["A"]["ports"] == [1, 2, 3, 4] and merged.g.nodes["A"]["ports"] == [1, 2, 3, 4]
    assert switch_ports(merged, "A") == {1, 2, 3, 4}
    check_endpoint_in_graph(merged, "A:1", "src")  # no error
    with pytest.raises(ApiError, match="has no port 9"):
        check_endpoint_in_graph(merged, "A:9", "src")
