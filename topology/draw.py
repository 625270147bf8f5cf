"""Pictures of the multi-layer graph: a PNG with the layers visibly apart, and a terminal text form.

The PNG puts the packet layer (switches, hosts, packet links) in an upper band and the optical
layer (each OTS drawn as a box holding its virtual ports, fibres, XCONs) in a lower band;
adaptation edges cross between the bands dashed, active XCONs are thick orange and potential XCONs
faint or hidden. Drawn with matplotlib's object API on an Agg canvas: no pyplot, no global backend.
"""
from __future__ import annotations

import math
from pathlib import Path

import networkx as nx

from topology.errors import TopologyError
from topology.graph import MultiLayerGraph

GRAN_COLOURS = {"ODU0": "#9467bd", "ODU1": "#8c564b", "ODU2": "#1f77b4", "ODU2e": "#17becf",
                "ODU3": "#2ca02c", "ODU4": "#d62728"}
_PACKET_Y, _OPTICAL_Y, _SPREAD_Y = 2.2, -2.2, 1.2


def _principal_axes(p: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """Rotate a layout so its widest direction is horizontal and scale it into [-1, 1]."""
    n = len(p)
    mx = sum(x for x, _ in p.values()) / n
    my = sum(y for _, y in p.values()) / n
    sxx = sum((x - mx) ** 2 for x, _ in p.values())
    syy = sum((y - my) ** 2 for _, y in p.values())
    sxy = sum((x - mx) * (y - my) for x, y in p.values())
    theta = 0.5 * math.atan2(2 * sxy, sxx - syy)
    c, s = math.cos(-theta), math.sin(-theta)
    rot = {k: ((x - mx) * c - (y - my) * s, (x - mx) * s + (y - my) * c) for k, (x, y) in p.items()}
    scale = max(max(abs(x) for x, _ in rot.values()), 1e-9)
    return {k: (x / scale, y / scale) for k, (x, y) in rot.items()}


def _line_layout(nodes: list[str], graph: nx.Graph) -> dict[str, tuple[float, float]]:
    """Few OTSes: on a line, in the order with the shortest total fibre span (ties: by name),
    every other one raised so a fibre between non-neighbours passes under the one between."""
    import itertools

    best, best_cost = nodes, math.inf
    for order in itertools.permutations(nodes):
        idx = {n: i for i, n in enumerate(order)}
        cost = sum(abs(idx[a] - idx[b]) for a, b in graph.edges())
        if cost < best_cost:
            best, best_cost = list(order), cost
    n = len(best)
    return {v: ((i - (n - 1) / 2) / max((n - 1) / 2, 1), 0.75 if i % 2 else -0.25) for i, v in enumerate(best)}


def _layout(graph: MultiLayerGraph, seed: int) -> dict[str, tuple[float, float]]:
    """Positions: OTS centres from a layout of the fibre graph, packet nodes pulled above the OTSes
    they attach to, hosts above their switch, oports on a ring around their OTS centre."""
    g = graph.g
    otses = graph.nodes_of_kind("optical")
    switches = graph.nodes_of_kind("packet")
    hosts = graph.nodes_of_kind("host")
    ots_graph = nx.Graph()
    ots_graph.add_nodes_from(otses)
    for k in graph.edges_of_kind("optical"):
        a, b = graph.edge_ends(k)
        ots_graph.add_edge(g.nodes[a]["ots"], g.nodes[b]["ots"])
    n_ots = max(len(otses), 1)
    width = max(6.0, 4.5 * math.sqrt(n_ots))
    spread = max(_SPREAD_Y, 0.9 * math.sqrt(n_ots))  # optical band height grows with the OTS count
    if len(otses) == 1:
        centre = {otses[0]: (0.0, 0.0)}
    elif len(otses) <= 7:
        centre = _line_layout(otses, ots_graph)
    elif otses:
        raw = nx.kamada_kawai_layout(ots_graph) if nx.is_connected(ots_graph) else \
            nx.spring_layout(ots_graph, seed=seed)
        centre = _principal_axes({n: (float(x), float(y)) for n, (x, y) in raw.items()})
    else:
        centre = {}
    pos: dict[str, tuple[float, float]] = {}
    for n, (x, y) in centre.items():
        pos[n] = (x * width / 2, _OPTICAL_Y - spread + _SPREAD_Y + y * spread)
    # packet switches: above the mean x of their OTSes (or spread evenly when unattached)
    attach: dict[str, list[float]] = {s: [] for s in switches}
    for k in graph.edges_of_kind("adaptation"):
        a, b = graph.edge_ends(k)
        sw, op = (a, b) if g.nodes[a]["kind"] == "packet" else (b, a)
        attach[sw].append(pos[g.nodes[op]["ots"]][0])
    free = [s for s in switches if not attach[s]]
    for i, s in enumerate(free):
        attach[s] = [(i - (len(free) - 1) / 2) * 1.6]
    xs = {s: sum(v) / len(v) for s, v in attach.items()}
    ordered = sorted(switches, key=lambda s: (xs[s], s))
    depth = {s: 0.0 for s in switches}
    wanted = sum(xs.values()) / max(len(xs), 1)
    for prev, cur in zip(ordered, ordered[1:], strict=False):  # keep switches ~1 unit apart
        if xs[cur] - xs[prev] < 1.0:
            xs[cur] = xs[prev] + 1.0
    drift = sum(xs.values()) / max(len(xs), 1) - wanted  # re-centre the row over the OTSes
    xs = {sw: x - drift for sw, x in xs.items()}
    for i, s in enumerate(ordered):
        depth[s] = 0.35 * ((i % 3) - 1) if len(switches) > 6 else 0.0
        pos[s] = (xs[s], _PACKET_Y + depth[s])
    host_of: dict[str, list[str]] = {}
    for k in graph.edges_of_kind("access"):
        a, b = graph.edge_ends(k)
        h, sw = (a, b) if g.nodes[a]["kind"] == "host" else (b, a)
        host_of.setdefault(sw, []).append(h)
    for sw, hs in host_of.items():
        x0, y0 = pos[sw]
        for i, h in enumerate(sorted(hs)):
            pos[h] = (x0 + (i - (len(hs) - 1) / 2) * 0.55, y0 + 1.1)
    for i, h in enumerate(h for h in hosts if h not in pos):
        pos[h] = (i * 0.6, _PACKET_Y + 1.9)
    for ots in otses:
        _place_ports(graph, ots, pos)
    return pos


def _ring_radius(n_ports: int) -> float:
    return 0.7 + 0.04 * max(n_ports - 8, 0)


def _place_ports(graph: MultiLayerGraph, ots: str, pos: dict[str, tuple[float, float]]) -> None:
    """Ports on a ring around the OTS centre, each turned towards what it is cabled to, so
    adaptation and fibre lines leave the box on the side of their far end."""
    ports = graph.oports(ots)
    n = len(ports)
    if not n:
        return
    cx, cy = pos[ots]
    r = _ring_radius(n)
    n_slots = max(2 * n, 8) if n <= 12 else n
    slots = [math.pi / 2 + 2 * math.pi * i / n_slots for i in range(n_slots)]
    step = 2 * math.pi / n_slots
    want: dict[str, float | None] = {}
    for op in ports:
        far = graph.adaptation_at(op)
        target = pos.get(far[0]) if far else None
        peer = graph.fibre_peer(op)
        offset = 0.0
        if target is None and peer is not None:
            other = graph.g.nodes[peer]["ots"]
            target = pos.get(other)
            # parallel fibres to one OTS: k-th one turned k slots aside, mirrored on the far side
            # (clockwise here if this OTS sorts first), so parallel fibres never cross
            bundle = sorted(min(q, graph.fibre_peer(q), key=str) for q in graph.oports(ots)
                            if graph.fibre_peer(q) and graph.g.nodes[graph.fibre_peer(q)]["ots"] == other)
            k = bundle.index(min(op, peer, key=str))
            offset = -k * step if ots < other else k * step
        want[op] = math.atan2(target[1] - cy, target[0] - cx) + offset if target else None
    free = list(range(n_slots))
    # cabled ports first, each takes the free slot nearest its far end; the rest fill in order
    order = sorted((p for p in ports if want[p] is not None), key=lambda p: graph.fibre_peer(p) is not None)
    for op in order + [p for p in ports if want[p] is None]:
        a = want[op]
        best = free[0] if a is None else min(free, key=lambda i: abs(math.remainder(slots[i] - a, 2 * math.pi)))
        free.remove(best)
        ang = slots[best]
        pos[op] = (cx + r * math.cos(ang), cy + r * 0.75 * math.sin(ang))


def _adaptation_ends(graph: MultiLayerGraph, pos: dict[str, tuple[float, float]], spread: float
                     ) -> list[tuple[tuple[float, float], tuple[float, float], int]]:
    """(switch end, optical port end, packet port) of every adaptation; a switch's ends are spread
    side by side just below it, in the order of their optical ports, so parallel uplinks stay apart."""
    by_switch: dict[str, list[tuple[str, int]]] = {}
    for u, v, d in graph.g.edges(data=True):
        if d["kind"] == "adaptation":
            sw, op = (u, v) if graph.g.nodes[u]["kind"] == "packet" else (v, u)
            by_switch.setdefault(sw, []).append((op, d["ports"].get(sw)))
    out = []
    for sw, ends in by_switch.items():
        ends.sort(key=lambda e: pos[e[0]])
        x, y = pos[sw]
        for i, (op, port) in enumerate(ends):
            out.append(((x + (i - (len(ends) - 1) / 2) * spread, y - 0.3), pos[op], port))
    return out


def draw_png(graph: MultiLayerGraph, path: str | Path, title: str | None = None,
             show_potential: bool | None = None, seed: int = 0, dpi: int = 110) -> Path:
    """Draw ``graph`` to a PNG file; ``show_potential`` None = faint potential XCONs when few."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    g = graph.g
    pos = _layout(graph, seed)
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    xmin, xmax = min(xs) - 1.6, max(xs) + 1.2
    ymin, ymax = min(min(ys), _OPTICAL_Y - 1.5) - 0.8, max(max(ys), _PACKET_Y + 1.2) + 0.6
    n = len(pos)
    fig = Figure(figsize=(min(6 + 0.12 * n, 22), min(6 + 0.04 * n, 16)), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    ax.set_axis_off()
    mid = (_PACKET_Y + _OPTICAL_Y) / 2
    ax.axhspan(mid, ymax, color="#eef5ea", zorder=0)
    ax.axhspan(ymin, mid, color="#eaf0f8", zorder=0)
    ax.text(xmin + 0.1, ymax - 0.2, "packet layer", fontsize=11, weight="bold", va="top", color="#2e6b1f")
    ax.text(xmin + 0.1, ymin + 0.15, "optical layer", fontsize=11, weight="bold", va="bottom", color="#1f4e8c")

    def seg(kind: str, active: bool | None = None) -> list[tuple[tuple[float, float], tuple[float, float]]]:
        out = []
        for u, v, d in g.edges(data=True):
            if d["kind"] == kind and (active is None or d.get("active") == active):
                out.append((pos[u], pos[v]))
        return out

    n_potential = len(seg("xcon", False))
    if show_potential is None:
        show_potential = n_potential <= 60
    # OTS boxes behind their ports
    for ots in graph.nodes_of_kind("optical"):
        ports = graph.oports(ots)
        cx, cy = pos[ots]
        r = _ring_radius(len(ports))
        ax.add_patch(FancyBboxPatch((cx - r - 0.2, cy - r * 0.75 - 0.2), 2 * r + 0.4, 1.5 * r + 0.4,
                                    boxstyle="round,pad=0.05", fc="#d6e2f3", ec="#1f4e8c", lw=1.5, zorder=1))
        ax.text(cx - r - 0.15, cy + r * 0.75 + 0.15, ots, ha="left", va="top", fontsize=12, weight="bold",
                color="#1f4e8c", zorder=6)
    if show_potential:
        ax.add_collection(LineCollection(seg("xcon", False), colors="#9aa7b8", linewidths=0.5, alpha=0.35, zorder=2))
    ax.add_collection(LineCollection(seg("optical"), colors="#1f4e8c", linewidths=3.0, zorder=2))
    ax.add_collection(LineCollection(seg("xcon", True), colors="#ff7f0e", linewidths=3.5, zorder=3))
    adaptations = _adaptation_ends(graph, pos, spread=0.02 * (xmax - xmin))
    ax.add_collection(LineCollection([(a, b) for a, b, _ in adaptations], colors="#555555", linewidths=1.3,
                                     linestyles="dashed", zorder=2))
    ax.add_collection(LineCollection(seg("access"), colors="#888888", linewidths=1.0, zorder=2))
    # packet links: drawn as arcs so a circuit A:3-B:1 does not hide under other lines
    rad = -0.25
    for u, v, d in g.edges(data=True):
        if d["kind"] != "packet":
            continue
        u, v = sorted((u, v), key=lambda n: pos[n])  # left to right, so every arc bulges upwards
        (x1, y1), (x2, y2) = pos[u], pos[v]
        ax.add_patch(FancyArrowPatch((x1, y1), (x2, y2), arrowstyle="-",
                                     connectionstyle=f"arc3,rad={rad}",
                                     color="#2e8b57", lw=2.5, zorder=3))
        ports = d.get("ports", {})
        lx = (x1 + x2) / 2 + 0.5 * rad * (y2 - y1)  # midpoint of the quadratic Bezier arc
        ly = (y1 + y2) / 2 - 0.5 * rad * (x2 - x1)
        ax.text(lx, ly + 0.08, f"{u}:{ports.get(u)}–{v}:{ports.get(v)}", fontsize=8, ha="center", va="bottom",
                color="#1d5c12", zorder=7, bbox={"fc": "#eef5ea", "ec": "none", "pad": 0.5})
    # which packet port each adaptation leaves from (a switch's uplinks fan out below it)
    for (x1, y1), _, port in adaptations:
        ax.text(x1, y1, str(port), fontsize=8, ha="center", va="center", color="#333333", zorder=7,
                bbox={"fc": "white", "ec": "#555555", "lw": 0.5, "boxstyle": "round,pad=0.15"})
    for kind, marker, size, colour in (("packet", "s", 520, "#2e8b57"), ("host", "o", 220, "#b0b0b0")):
        nodes = graph.nodes_of_kind(kind)
        if nodes:
            ax.scatter([pos[n][0] for n in nodes], [pos[n][1] for n in nodes], s=size, marker=marker,
                       c=colour, edgecolors="black", zorder=5)
            for nd in nodes:
                ax.text(pos[nd][0], pos[nd][1], nd, ha="center", va="center", fontsize=9 if kind == "packet" else 7,
                        color="white" if kind == "packet" else "black", weight="bold", zorder=6)
    oports = graph.nodes_of_kind("oport")
    if oports:
        ax.scatter([pos[o][0] for o in oports], [pos[o][1] for o in oports], s=150,
                   c=[GRAN_COLOURS.get(g.nodes[o]["granularity"], "#7f7f7f") for o in oports],
                   edgecolors="white", zorder=5)
        for o in oports:
            ax.text(pos[o][0], pos[o][1], str(g.nodes[o]["port"]), ha="center", va="center", fontsize=7,
                    color="white", weight="bold", zorder=6)
    present = {d["kind"] if d["kind"] != "xcon" or not d.get("active") else "active" for _, _, d in g.edges(data=True)}
    handles = [h for kind, h in (
        ("packet", Line2D([], [], color="#2e8b57", lw=2.5, label="packet link")),
        ("adaptation", Line2D([], [], color="#555555", lw=1.3, ls="--", label="adaptation (boxed: packet port)")),
        ("optical", Line2D([], [], color="#1f4e8c", lw=3, label="fibre")),
        ("active", Line2D([], [], color="#ff7f0e", lw=3.5, label="active XCON")),
    ) if kind in present]  # only what the drawing shows
    if show_potential and n_potential:
        handles.append(Line2D([], [], color="#9aa7b8", lw=0.8, alpha=0.6, label="potential XCON"))
    for gname in sorted({g.nodes[o]["granularity"] for o in oports}):
        handles.append(Line2D([], [], marker="o", ls="", color=GRAN_COLOURS.get(gname, "#7f7f7f"),
                              markersize=8, label=f"{gname} port"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, framealpha=0.9)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    out = Path(path)
    try:
        fig.savefig(out, format="png")
    except OSError as exc:
        raise TopologyError(f"{out}: cannot write: {exc.strerror or exc}") from None
    return out


def _mbps(v: float | None) -> str:
    return "?" if v is None else f"{v:g} Mbit/s"


def format_graph(graph: MultiLayerGraph) -> str:
    """A terminal rendering: switches with their ports, OTSes with theirs, links and XCONs."""
    g = graph.g
    lines: list[str] = []
    n_ports = len(graph.nodes_of_kind("oport"))
    lines.append(f"Multi-layer graph: {len(graph.nodes_of_kind('packet'))} packet switches, "
                 f"{len(graph.nodes_of_kind('optical'))} OTS ({n_ports} virtual ports), "
                 f"{len(graph.nodes_of_kind('host'))} hosts, {len(graph.edges_of_kind('packet'))} packet links, "
                 f"{len(graph.edges_of_kind('optical'))} fibres, {len(graph.active_xcons())} active XCONs")
    lines.append("")
    lines.append("Packet layer")
    for sw in graph.nodes_of_kind("packet"):
        dpid = g.nodes[sw].get("dpid")
        lines.append(f"  {sw}" + (f"  dpid {dpid:#018x}" if dpid is not None else ""))
        ports: dict[int, list[str]] = {}
        for u, v, d in g.edges(sw, data=True):
            if d["kind"] not in ("packet", "adaptation", "access"):
                continue
            peer = v if u == sw else u
            port = d["ports"][sw]
            if d["kind"] == "packet":
                desc = f"packet link to {peer}:{d['ports'][peer]} ({_mbps(d['capacity'])}, {d['latency']:g} ms, {d['source']})"
            elif d["kind"] == "adaptation":
                desc = f"optical port {peer} ({_mbps(d['capacity'])}, {d['source']})"
            else:
                desc = f"host {peer} ({_mbps(d['capacity'])})"
            ports.setdefault(port, []).append(desc)
        for port in sorted(ports):
            lines.append(f"    port {port:<3} " + "; ".join(sorted(ports[port])))
    lines.append("")
    lines.append("Optical layer")
    for ots in graph.nodes_of_kind("optical"):
        d = g.nodes[ots]
        dpid = d.get("dpid")
        lines.append(f"  {ots}" + (f"  dpid {dpid:#018x}" if dpid is not None else "")
                     + f"  XCON setup {d.get('setup_time', 0):g} s")
        for op in graph.oports(ots):
            od = g.nodes[op]
            parts = []
            ad = graph.adaptation_at(op)
            if ad:
                parts.append(f"adaptation to {ad[0]}:{ad[1]}")
            peer = graph.fibre_peer(op)
            if peer:
                parts.append(f"fibre to {peer}")
            xc = graph.active_xcon_at(op)
            if xc:
                a, b = graph.edge_ends(xc)
                parts.append(f"XCON with {b if a == op else a}")
            lines.append(f"    {op:<8} {od['granularity']:<6} {_mbps(od['capacity']):<14} " + ", ".join(parts or ["(free)"]))
    hosts = graph.nodes_of_kind("host")
    if hosts:
        lines.append("")
        lines.append("Hosts")
        for h in hosts:
            d = g.nodes[h]
            att = [f"{v if u == h else u}:{e['ports'].get(v if u == h else u)}" for u, v, e in g.edges(h, data=True)
                   if e["kind"] == "access"]
            lines.append(f"  {h:<6} {d.get('ip') or '-':<15} {d.get('mac') or '-':<17} on {', '.join(att) or '-'}")
    return "\n".join(lines) + "\n"
