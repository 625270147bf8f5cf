"""Copper packet links found by LLDP get a capacity from their ports' speeds (never 0 = "no capacity")."""
from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_0, ofproto_v1_0_parser, ofproto_v1_3, ofproto_v1_3_parser

from app.config import merge_config
from app.controller.inventory import _port_info
from app.controller.live_graph import DEFAULT_LINK_MBPS, combined, link_speed_mbps, live_graph
from app.controller.model import PACKET, PacketLink, PortInfo, PortRef, SwitchInfo
from app.errors import ConfigError
from topology.spec import fig2_testbed, spec_to_vendor_file
from topology.vendor_file import vendor_to_graph

from .test_graph_view import live_state


def switch(dpid: int, name: str, speeds: dict[int, int]) -> SwitchInfo:
    ports = {p: PortInfo(p, f"{name}-eth{p}", "00:00:00:00:00:00", True, kbps) for p, kbps in speeds.items()}
    return SwitchInfo(dpid, PACKET, 4, name, ports)


def both_ways(a: PortRef, b: PortRef) -> list[PacketLink]:
    return [PacketLink(a, b), PacketLink(b, a)]


@pytest.mark.parametrize(("speed_a", "speed_b", "expected"), [
    (100_000, 1_000_000, 100.0),  # the slower end
    (10_000_000, 10_000_000, 10_000.0),  # veth ports in OVS report 10 Gbit/s
    (0, 40_000, 40.0),  # only one end reports a speed
    (0, 0, 250.0),  # neither: the configured default
])
def test_copper_link_capacity(speed_a: int, speed_b: int, expected: float) -> None:
    s1, s2 = switch(1, "S1", {2: speed_a}), switch(2, "S2", {3: speed_b})
    g, problems = live_graph([s1, s2], both_ways(PortRef(1, 2), PortRef(2, 3)), {}, {}, link_default_mbps=250.0)
    assert problems == []
    assert g.edge("packet:S1:2-S2:3")["capacity"] == expected


def test_a_port_missing_from_the_description_falls_back_to_the_default() -> None:
    s1, s2 = switch(1, "S1", {}), switch(2, "S2", {})
    g, _ = live_graph([s1, s2], both_ways(PortRef(1, 2), PortRef(2, 3)), {}, {})
    assert g.edge("packet:S1:2-S2:3")["capacity"] == DEFAULT_LINK_MBPS > 0


def test_speeds_as_the_inventory_decodes_them_of13_and_of10() -> None:
    of13 = _port_info(ofproto_v1_3, ofproto_v1_3_parser.OFPPort(
        port_no=1, hw_addr="00:00:00:00:00:01", config=0, state=0, curr=0, advertised=0, supported=0, peer=0,
        curr_speed=100_000, max_speed=0, name=b"s1-eth1"))
    of10 = _port_info(ofproto_v1_0, ofproto_v1_0_parser.OFPPhyPort(
        port_no=1, hw_addr="00:00:00:00:00:02", config=0, state=0, curr=ofproto_v1_0.OFPPF_10MB_FD,
        advertised=0, supported=0, peer=0, name=b"s2-eth1"))
    s1 = SwitchInfo(1, PACKET, 4, "S1", {1: of13})
    s2 = SwitchInfo(2, PACKET, 1, "S2", {1: of10})
    assert link_speed_mbps(s1, 1, s2, 1, 1000.0) == 10.0
    s2.ports = {1: PortInfo(1, "s2-eth1", "00:00:00:00:00:02", True, 0)}
    assert link_speed_mbps(s1, 1, s2, 1, 1000.0) == 100.0


def test_a_circuit_stays_as_wide_as_its_optical_containers() -> None:
    spec = fig2_testbed()
    switches, adapt, _ = live_state(spec)
    for sw in switches:
        if sw.kind == PACKET:  # fast ports must not widen a 10 Mbit/s ODU2 circuit
            sw.ports = {p: PortInfo(p, f"{sw.name}-eth{p}", "00:00:00:00:00:00", True, 10_000_000) for p in (1, 2, 3, 4)}
    g, problems = live_graph(switches, both_ways(PortRef(0xA1, 3), PortRef(0xB1, 1)), adapt, {})
    assert problems == []
    assert g.edge("packet:A:3-B:1")["capacity"] == 10.0


def test_a_circuit_adapted_only_in_the_static_file_gets_its_container_capacity() -> None:
    """No scan yet: the live graph cannot tell the circuit from copper (10 Gbit/s ports); once merged
    with the file's adaptations it is as wide as the ODU2 containers, and copper links keep their speed."""
    spec = fig2_testbed()
    switches, _adapt, _ = live_state(spec)
    for sw in switches:
        if sw.kind == PACKET:
            sw.ports = {p: PortInfo(p, f"{sw.name}-eth{p}", "00:00:00:00:00:00", True, 10_000_000) for p in (1, 2, 3, 4)}
    live, _ = live_graph(switches, both_ways(PortRef(0xA1, 3), PortRef(0xB1, 1))
                         + both_ways(PortRef(0xA1, 2), PortRef(0xB1, 4)), {}, {})
    assert live.edge("packet:A:3-B:1")["capacity"] == 10_000.0
    merged = combined(live, vendor_to_graph(spec_to_vendor_file(spec))).graph
    assert merged.edge("packet:A:3-B:1")["capacity"] == 10.0
    assert merged.edge("packet:A:2-B:4")["capacity"] == 10_000.0  # (A:2 and B:4 are not adapted)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf")])
def test_link_default_mbps_is_checked(bad: float) -> None:
    assert merge_config({"controller": {"link_default_mbps": 40}})["controller"]["link_default_mbps"] == 40.0
    with pytest.raises(ConfigError, match="link_default_mbps"):
        merge_config({"controller": {"link_default_mbps": bad}})


def test_db_queue_max_is_checked() -> None:
    with pytest.raises(ConfigError, match="db_queue_max"):
        merge_config({"controller": {"db_queue_max": 0}})
