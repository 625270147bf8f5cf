"""Layout of the multi-layer graph as SVG primitives for the templates (no JS needed to draw it).

Two bands: the packet layer (switches, hosts above them) on top, the optical layer (OTS boxes with
their ports around them) below; adaptation links cross between the bands. Horizontal order comes
from a seeded spring layout of the graph with every OTS port folded into its OTS, so neighbours sit
near each other and the picture is the same on every request. What the controller marked as failed
(``failed``: the reason, on optical ports and the fibres and adaptation links at them,
docs/failures.md) is drawn as such and listed in :attr:`Drawing.failed`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import networkx as nx

if TYPE_CHECKING:
    from topology.graph import MultiLayerGraph

WIDTH = 900
HOST_Y, PACKET_Y, OPTICAL_Y = 50, 160, 430
PORT_RADIUS = 42


@dataclass
class Drawing:
    width: int
    height: int
    nodes: list[dict] = field(default_factory=list)
    lines: list[dict] = field(default_factory=list)
    boxes: list[dict] = field(default_factory=list)
    #: what the graph marks as failed: ``{"what": "fibre X:3–Z:3", "key", "reason"}``, fibres first
    failed: list[dict] = field(default_factory=list)


def _owner(graph: MultiLayerGraph, node: str) -> str:
    data = graph.g.nodes[node]
    return data["ots"] if data.get("kind") == "oport" else node


def layout(graph: MultiLayerGraph) -> dict[str, tuple[float, float]]:
    """Node → (x, y) in SVG coordinates."""
    g = graph.g
    folded = nx.Graph()
    for n in g.nodes:
        folded.add_node(_owner(graph, n))
    for u, v in g.edges():
        a, b = _owner(graph, u), _owner(graph, v)
        if a != b:
            folded.add_edge(a, b)
    pos = nx.spring_layout(folded, seed=7) if len(folded) > 1 else {n: (0.0, 0.0) for n in folded}
    kinds = {n: g.nodes[n].get("kind") for n in folded}
    out: dict[str, tuple[float, float]] = {}
    for kind, y in (("packet", PACKET_Y), ("optical", OPTICAL_Y)):
        members = sorted((n for n in folded if kinds[n] == kind), key=lambda n: (pos[n][0], n))
        step = WIDTH / (len(members) + 1) if members else 0
        for i, n in enumerate(members):
            out[n] = (step * (i + 1), y)
    hosts_of: dict[str, list[str]] = {}
    for n in folded:
        if kinds[n] == "host":
            sw = next((m for m in folded.neighbors(n) if kinds.get(m) == "packet"), None)
            hosts_of.setdefault(sw or "", []).append(n)
    for sw, hosts in hosts_of.items():
        cx = out.get(sw, (WIDTH / 2, 0))[0]
        for i, h in enumerate(sorted(hosts)):
            out[h] = (cx + (i - (len(hosts) - 1) / 2) * 48, HOST_Y)
    for n, data in g.nodes(data=True):
        if data.get("kind") != "oport":
            continue
        cx, cy = out[data["ots"]]
        ports = sorted(graph.oports(data["ots"]), key=lambda p: g.nodes[p]["port"])
        i = ports.index(n)
        angle = math.pi + 2 * math.pi * i / len(ports)
        out[n] = (cx + PORT_RADIUS * math.cos(angle), cy + PORT_RADIUS * math.sin(angle))
    return out


@dataclass(frozen=True)
class CircuitLink:
    """A lit circuit seen from the packet layer: its monitor key and the switches at its ends."""

    key: str  # packet:A:3-C:1, the key its utilization is stored under
    a_switch: str
    z_switch: str
    title: str


def _label_at(x1: float, y1: float, x2: float, y2: float, bend: float) -> tuple[float, float]:
    """Where a link's utilization label goes: the middle of the line, or of the arc (a quadratic
    Bézier with its control point ``2·bend`` off the chord peaks ``bend`` off it)."""
    return (x1 + x2) / 2, (y1 + y2) / 2 + bend - 6


def draw(graph: MultiLayerGraph, *, path_edges: tuple[str, ...] = (), path_nodes: tuple[str, ...] = (),
         circuit_edges: tuple[str, ...] = (), circuit_links: tuple[CircuitLink, ...] = ()) -> Drawing:
    """SVG primitives; ``path_*`` are highlighted as the reservation's path, circuits in their own colour.

    ``circuit_links`` are circuits the controller recorded: one whose packet link the graph does not
    have yet (LLDP has not crossed it, or the snapshot is older) is drawn as an arc between its
    switches, so a circuit shows — and its utilization can be labelled — as soon as it is lit."""
    pos = layout(graph)
    g = graph.g
    d = Drawing(WIDTH, OPTICAL_Y + PORT_RADIUS + 80)
    d.boxes.append({"x": 5, "y": HOST_Y - 30, "w": WIDTH - 10, "h": PACKET_Y - HOST_Y + 60,
                    "cls": "band-packet", "label": "packet layer"})
    d.boxes.append({"x": 5, "y": OPTICAL_Y - PORT_RADIUS - 95, "w": WIDTH - 10, "h": 2 * PORT_RADIUS + 165,
                    "cls": "band-optical", "label": "optical layer"})
    on_path = set(path_edges)
    circuits = set(circuit_edges)
    keys = {k for _u, _v, k in g.edges(keys=True)}
    for u, v, key, data in g.edges(keys=True, data=True):
        kind = data.get("kind", "")
        if kind == "xcon" and not data.get("active") and key not in on_path and key not in circuits:
            continue  # potential XCONs exist between every same-granularity port pair: draw only used ones
        (x1, y1), (x2, y2) = pos[u], pos[v]
        cls = [f"edge-{kind}"]
        if data.get("source") == "circuit" or (kind == "xcon" and data.get("active")) or key in circuits:
            cls.append("circuit")
        if key in on_path:
            cls.append("on-path")
        title = f"{key} ({kind}, {data.get('capacity', 0):g} Mbit/s)"
        if data.get("failed"):
            cls.append("failed")
            title += f" — failed: {data['failed']}"
            d.failed.append({"what": _failed_edge(kind, u, v, data.get("ports") or {}), "key": key,
                             "reason": str(data["failed"])})
        bend = 0.0
        if kind == "packet" and (data.get("source") == "circuit" or _passes_over(pos, g, u, v)):
            # a circuit seen as a packet link arcs above the copper links; so does any packet link
            # whose straight line would run through another switch (A–C over B reads as "via B")
            bend = -70.0
        elif kind == "optical":
            # fibres between far-apart OTSes arc away from the OTS row so they do not cross other OTSes
            above = [pos[n][1] < pos[g.nodes[n]["ots"]][1] - 1 for n in (u, v)]
            below = [pos[n][1] > pos[g.nodes[n]["ots"]][1] + 1 for n in (u, v)]
            if all(above) or all(below):
                bend = (-1 if all(above) else 1) * (0.08 * abs(x2 - x1) + 8)
        d.lines.append(_line(key, (x1, y1), (x2, y2), " ".join(cls), title, bend, labelled=kind == "packet"))
    for c in circuit_links:
        if c.key in keys or c.a_switch not in pos or c.z_switch not in pos:
            continue
        d.lines.append(_line(c.key, pos[c.a_switch], pos[c.z_switch], "edge-packet circuit circuit-link", c.title,
                             -70.0, labelled=True))
    marked = set(path_nodes)
    for n, data in g.nodes(data=True):
        x, y = pos[n]
        kind = data.get("kind", "")
        label = f"{data['ots']}:{data['port']}" if kind == "oport" else n
        title = f"{n} ({kind}, {data.get('granularity', '')})" if kind == "oport" else f"{n} ({kind})"
        failed = str(data.get("failed") or "")
        if failed:
            title += f" — failed: {failed}"
            d.failed.append({"what": f"port {n}", "key": n, "reason": failed})
        d.nodes.append({"id": n, "x": x, "y": y, "kind": kind, "label": label, "short": str(data.get("port", n)),
                        "on_path": n in marked, "title": title, "failed": failed})
    kind_order = {"optical": 0, "oport": 1, "packet": 2, "host": 3}
    d.nodes.sort(key=lambda nd: kind_order.get(nd["kind"], 9))
    d.failed.sort(key=lambda f: (not f["what"].startswith("fibre"), f["what"]))
    return d


def _failed_edge(kind: str, u: str, v: str, ports: dict[str, Any]) -> str:
    """How the failures list names a failed edge by its ends: ``fibre X:3–Z:3``, ``adaptation A:3–X:1``
    (a switch end with its port)."""
    a, b = sorted(f"{n}:{ports[n]}" if ports.get(n) is not None else n for n in (u, v))
    return f"{'fibre' if kind == 'optical' else kind} {a}–{b}"


def _passes_over(pos: dict[str, tuple[float, float]], g: Any, u: str, v: str) -> bool:
    """Whether another packet switch sits on the straight line between ``u`` and ``v`` (same row)."""
    (x1, y1), (x2, y2) = pos[u], pos[v]
    if abs(y1 - y2) > 1:
        return False
    lo, hi = sorted((x1, x2))
    return any(n not in (u, v) and abs(pos[n][1] - y1) <= 1 and lo < pos[n][0] < hi
               for n, kind in g.nodes(data="kind") if kind == "packet")


def _line(key: str, a: tuple[float, float], b: tuple[float, float], cls: str, title: str, bend: float, *,
          labelled: bool) -> dict:
    """One drawn edge; a packet link also gets the place of its live utilization label."""
    (x1, y1), (x2, y2) = a, b
    line = {"key": key, "x1": x1, "y1": y1, "x2": x2, "y2": y2, "cls": cls, "title": title, "bend": bend,
            "cx": (x1 + x2) / 2, "cy": (y1 + y2) / 2 + 2 * bend, "label": None}
    if labelled:
        line["label"] = _label_at(x1, y1, x2, y2, bend)
    return line
