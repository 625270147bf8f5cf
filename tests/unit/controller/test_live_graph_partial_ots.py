"""The live graph while an OTS's ports are not read yet: a scan adaptation to a port the graph does
not have is a listed problem, and an LLDP link over it is built as copper, not a KeyError (found by a
metrics scrape right after an OTS connected)."""
from __future__ import annotations

from app.controller.live_graph import live_graph
from app.controller.model import OTS, PACKET, PacketLink, PortInfo, PortRef, SwitchInfo


def _packet(dpid: int, name: str) -> SwitchInfo:
    return SwitchInfo(dpid, PACKET, 4, name, {3: PortInfo(3, f"{name}-eth3", "00:00:00:00:00:03", True)})


def test_an_lldp_link_over_an_adaptation_to_an_unread_ots_port_is_built_and_the_problem_listed():
    a, c = _packet(1, "A"), _packet(3, "C")
    x = SwitchInfo(101, OTS, 1, "X")  # connected, no ports nor capabilities read yet
    adaptations = {(101, 1): PortRef(1, 3)}
    links = [PacketLink(PortRef(1, 3), PortRef(3, 3)), PacketLink(PortRef(3, 3), PortRef(1, 3))]
    g, problems = live_graph([a, c, x], links, adaptations, {}, link_default_mbps=100.0)
    assert any("scan adaptation" in p and "X:1" in p for p in problems), problems
    (edge,) = [d for _, _, d in g.g.edges(data=True) if d.get("kind") == "packet"] or [None]
    assert edge is not None and edge["capacity"] == 100.0, list(g.g.edges(data=True))
