"""LLDP discovery and forwarding on a small packet-only ring (no OTS): P-Q-R-P, one host each on P and R.

One lab for the module (our controller subprocess + Mininet), under the machine-wide net lock.
"""
from __future__ import annotations

import subprocess

import pytest

from app.controller.client import wait_until
from mininet_labs.netlock import net_lock

pytestmark = pytest.mark.integration


def ring_spec():
    from topology.spec import HostSpec, LabSpec, LinkSpec, SwitchSpec

    switches = (SwitchSpec("P", 0x501), SwitchSpec("Q", 0x502), SwitchSpec("R", 0x503))
    hosts = (HostSpec("h1", "P", 1, "10.0.0.1", "02:00:00:00:05:01"),
             HostSpec("h3", "R", 1, "10.0.0.3", "02:00:00:00:05:03"))
    links = (LinkSpec("h1", 0, "P", 1, "access", 20), LinkSpec("h3", 0, "R", 1, "access", 20),
             LinkSpec("P", 2, "Q", 1, "packet", 20), LinkSpec("Q", 2, "R", 2, "packet", 20),
             LinkSpec("R", 3, "P", 3, "packet", 20))
    return LabSpec("ring", switches, (), hosts, links)


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    from mininet_labs.session import LabSession

    with net_lock(), LabSession(ring_spec(), tmp_path_factory.mktemp("ring")) as session:  # stops on any exit
        yield session
        assert session.controller_errors() == "", session.controller_errors()


def _flows(session, sw: str) -> str:
    return subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", session.lab.bridge(sw)],
                          capture_output=True, text=True, timeout=10).stdout


def test_all_packet_links_discovered(ring):
    ring.wait_links(timeout=20)
    assert ring.seen_links() == ring.expected_links()
    kinds = {s["name"]: (s["kind"], s["of_version"]) for s in ring.client.switches()}
    assert kinds == {"P": ("packet", "1.3"), "Q": ("packet", "1.3"), "R": ("packet", "1.3")}


def test_copper_links_have_the_capacity_their_ports_report(ring):
    """Not 0 (the PCE's "no capacity"): the slower port's PORT_DESC curr_speed, else the default."""
    from app.config import DEFAULTS
    from topology.graph import MultiLayerGraph

    ring.wait_links(timeout=20)
    speeds = {(sw["name"], p["port_no"]): p["speed_kbps"] for sw in ring.client.switches() for p in sw["ports"]}
    graph = MultiLayerGraph.from_dict(ring.client.topology())
    keys = graph.edges_of_kind("packet")
    assert len(keys) == 3
    for key in keys:
        edge = graph.edge(key)
        known = [speeds[end] / 1000 for end in edge["ports"].items() if speeds[end] > 0]
        assert edge["capacity"] > 0
        assert edge["capacity"] == (min(known) if known else DEFAULTS["controller"]["link_default_mbps"])


def test_lldp_keeps_refreshing(ring):
    ring.wait_links(timeout=20)
    first = {(x["src"]["node"], x["src"]["port"]): x["last_seen"] for x in ring.client.links()}
    wait_until(lambda: all(x["last_seen"] > first[(x["src"]["node"], x["src"]["port"])]
                           for x in ring.client.links()), 10, "every link to be refreshed by LLDP")


def test_hosts_talk_over_shortest_path_and_reroute(ring):
    from mininet_labs.testbed import ping, wait_ping

    ring.wait_links(timeout=20)
    h1 = ring.lab.node("h1")
    assert wait_ping(h1, "10.0.0.3", 15)
    # shortest path P -> R is the direct link P:3
    p_rule = [line for line in _flows(ring, "P").splitlines() if "dl_dst=02:00:00:00:05:03" in line][0]
    assert p_rule.endswith("actions=output:3")
    net = ring.lab.net
    net.configLinkStatus(ring.lab.bridge("P"), ring.lab.bridge("R"), "down")
    try:
        wait_until(lambda: ("P", 3, "R", 3) not in ring.seen_links(), 10, "P-R link deleted")
        # P's rule towards h3 no longer uses the lost link: exactly one, re-routed via Q (P:2)
        wait_until(lambda: [ln.rsplit("actions=", 1)[-1] for ln in _flows(ring, "P").splitlines()
                            if "dl_dst=02:00:00:00:05:03" in ln] == ["output:2"], 10, "P's rule to h3 via Q only")
        assert wait_ping(h1, "10.0.0.3", 15)
    finally:
        net.configLinkStatus(ring.lab.bridge("P"), ring.lab.bridge("R"), "up")
    ring.wait_links(timeout=20)
    assert ping(h1, "10.0.0.3") or wait_ping(h1, "10.0.0.3", 10)


def test_link_expires_without_lldp_and_comes_back(ring):
    """Drop LLDP on one port with a higher-priority OVS rule: the port stays up, the link must expire."""
    ring.wait_links(timeout=20)
    br = ring.lab.bridge("Q")
    rule = "priority=65500,in_port=2,dl_type=0x88cc"
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flow", br, rule + ",actions=drop"], check=True, timeout=10)
    try:
        wait_until(lambda: ("R", 2, "Q", 2) not in ring.seen_links(), 20, "R->Q link to expire")
        assert ("Q", 2, "R", 2) in ring.seen_links()  # the other direction still arrives at R
        expired = ring.client.events(kind="link_delete")
        assert any(e["why"] == "expired" for e in expired)
    finally:
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--strict", "del-flows", br, rule], check=True, timeout=10)
    ring.wait_links(timeout=20)
