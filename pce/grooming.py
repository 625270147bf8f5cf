"""Grooming: reservations share booked circuits instead of each lighting a whole one.

A circuit is one run of a path through the optical layer — adaptation edge, optical ports joined
by XCONs and fibres, adaptation edge — between two packet-switch ports. Its optical ports are taken
whole (one XCON per port), but the circuit itself is a packet link of its container's capacity (the
narrowest port granularity on it), so once a reservation has booked it for a window, later
reservations can ride it: the circuit is a resource of its own, with the piecewise peak of the
reservations booked on it over a window as its load (:func:`pce.bookings.peak_load`).

:func:`booked_circuits` finds the circuits the bookings overlapping a window hold (identified by
their optical-port chain, either direction) and what is free on each; :func:`add_circuit_arcs` puts
each one with room into a routing view as one "circuit" arc between its switches, and
:func:`expand` turns a route over such arcs back into the plain path (edge keys, optical ports,
XCONs) that is stored and provisioned, so a groomed path looks exactly like the path that lit the
circuit. Riding a circuit and lighting a new one are told apart by :func:`circuits_of`.
"""
from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pce.bookings import Booking, BookingCalendar, overlaps, peak_load

#: Key prefix of a booked circuit's arc in a routing view (never an edge key of a graph).
CIRCUIT_PREFIX = "circuit:"
OPTICAL_KINDS = ("xcon", "optical")
_INDEX: weakref.WeakKeyDictionary[Any, tuple[int, dict[str, list[tuple[str, str, str, dict[str, Any]]]]]] = \
    weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Segment:
    """One circuit of a path, in the direction the path crosses it."""

    edges: tuple[str, ...]  # adaptation, xcon/optical ..., adaptation
    oports: tuple[str, ...]  # the optical ports in crossing order
    ends: tuple[str, str]  # the packet switches it joins (entered at, left at)

    @property
    def key(self) -> str:
        """The circuit's identity: its optical-port chain, the same for both directions."""
        chain = min(self.oports, tuple(reversed(self.oports)))
        return CIRCUIT_PREFIX + "~".join(chain)

    def reversed(self) -> Segment:
        return Segment(tuple(reversed(self.edges)), tuple(reversed(self.oports)), (self.ends[1], self.ends[0]))


@dataclass(frozen=True)
class SharedCircuit:
    """A circuit booked by some reservation in the window, with what is left on it."""

    key: str
    segment: Segment  # canonical direction (the chain of ``key``)
    capacity: float  # Mbit/s: its narrowest port's granularity
    peak: float  # the most booked on it at one instant of the window
    holders: tuple[str, ...]  # booking ids on it in the window
    latency: float = 0.0
    edge_room: float = math.inf  # least headroom of its own edges in the window (same bookings)
    tags: tuple[int | None, ...] = ()  # the VLANs of the bookings on it in the window (None: untagged)

    def takes(self, tag: int | None) -> bool:
        """Whether a reservation with VLAN ``tag`` can join: its packet rules on the circuit match the
        VLAN, so it needs one, every sharer one, and none the same (else the rules collide)."""
        return tag is not None and None not in self.tags and tag not in self.tags

    @property
    def free(self) -> float:
        return max(0.0, min(self.capacity - self.peak, self.edge_room))

    def to_dict(self) -> dict[str, Any]:
        return {"circuit": self.key, "ends": list(self.segment.ends), "oports": list(self.segment.oports),
                "capacity": self.capacity, "booked_peak": self.peak, "free": self.free,
                "reservations": list(self.holders), "vlans": list(self.tags)}


@dataclass
class GroomedRoute:
    """A route over circuit arcs turned back into a plain path."""

    bases: list[str]
    keys: list[str]
    xcons: list[tuple[str, str]]
    rides: list[str] = field(default_factory=list)  # circuit keys ridden


def _graph(graph: Any) -> Any:
    return getattr(graph, "g", graph)


EdgeIndex = dict[str, list[tuple[str, str, str, dict[str, Any]]]]


def _edge(g: Any, key: str, index: EdgeIndex | None = None) -> tuple[str, str, dict[str, Any]] | None:
    """The edge ``key`` of ``g``; ``index``: :func:`_edge_index` of ``g`` taken once by a caller that
    looks up many keys (checking the index costs a count of every edge: 2.6 ms on germany50, and
    admission there spent 2.9 s of its 3.0 s per reservation doing it for each edge of each booking)."""
    for u, v, _k, d in (_edge_index(g) if index is None else index).get(key, ()):
        return u, v, d
    return None


def _edge_index(g: Any) -> EdgeIndex:
    """Edge key -> (u, v, key, data), built once per graph object and edge count (a graph is not
    changed while one request is routed; a changed graph is re-indexed)."""
    hit = _INDEX.get(g)
    if hit is not None and hit[0] == g.number_of_edges():
        return hit[1]
    index: EdgeIndex = {}
    for u, v, k, d in g.edges(keys=True, data=True):
        index.setdefault(k, []).append((u, v, k, d))
    _INDEX[g] = (g.number_of_edges(), index)
    return index


def segments(graph: Any, edges: Sequence[str], index: EdgeIndex | None = None) -> list[Segment]:
    """The circuits a path's ordered ``edges`` cross (a 1+1 pair's two paths one after the other is
    fine: each run from an adaptation edge to the next one is read on its own). Runs that are not
    adaptation … adaptation through the graph's optical ports are skipped, not guessed."""
    g = _graph(graph)
    index = _edge_index(g) if index is None else index
    out: list[Segment] = []
    run: list[str] = []
    chain: list[str] = []
    start_sw = ""
    cur = ""
    for key in edges:
        e = _edge(g, key, index)
        if e is None:
            run = []
            continue
        u, v, d = e
        kind = d.get("kind")
        if kind == "adaptation":
            sw, op = (u, v) if g.nodes[v].get("kind") == "oport" else (v, u)
            if run and cur == op:
                run.append(key)
                out.append(Segment(tuple(run), tuple(chain), (start_sw, sw)))
                run = []
            else:
                run, chain, start_sw, cur = [key], [op], sw, op
        elif kind in OPTICAL_KINDS and run and cur in (u, v):
            cur = v if u == cur else u
            run.append(key)
            chain.append(cur)
        else:
            run = []
    return out


def _circuit_capacity(g: Any, oports: Iterable[str]) -> float:
    caps = [g.nodes[o].get("capacity") for o in oports if o in g]
    known = [float(c) for c in caps if c is not None]
    return min(known) if known else math.inf


def booked_circuits(graph: Any, calendar: BookingCalendar, start: float, end: float,
                    edge_headroom: dict[str, float] | None = None) -> dict[str, SharedCircuit]:
    """The circuits booked by bookings overlapping ``[start, end)``, each with the peak of its
    bookings over the window (``edge_headroom``: the view's headroom of plain edges, to keep a
    circuit arc no wider than its own edges)."""
    g = _graph(graph)
    index = _edge_index(g)  # once: the graph does not change while a request is routed
    spans: dict[str, list[Booking]] = {}
    segs: dict[str, Segment] = {}
    for b in calendar.bookings:
        if not overlaps(b.start, b.end, start, end):
            continue
        for seg in segments(g, b.edges, index):
            key = seg.key
            canon = seg if tuple(seg.oports) <= tuple(reversed(seg.oports)) else seg.reversed()
            segs.setdefault(key, canon)
            if b not in spans.setdefault(key, []):
                spans[key].append(b)
    # A circuit booked for part of the window is extended by riding it, so its ports must be nobody
    # else's in the rest: a port in two circuits of the window (at different times) blocks both.
    owners: dict[str, set[str]] = {}
    for key, seg in segs.items():
        for o in seg.oports:
            owners.setdefault(o, set()).add(key)
    out: dict[str, SharedCircuit] = {}
    for key, books in spans.items():
        seg = segs[key]
        if any(o not in g for o in seg.oports):
            continue  # the topology lost a port: nothing can ride it
        if any(len(owners[o]) > 1 for o in seg.oports):
            spare = 0.0  # its ports serve another circuit in part of the window
        else:
            spare = math.inf
        peak = peak_load(((b.start, b.end, b.bandwidth) for b in books), start, end)
        latency = 0.0
        for k in seg.edges:
            e = _edge(g, k, index)
            latency += float((e[2].get("latency") if e else 0.0) or 0.0)
        room = min((edge_headroom.get(k, math.inf) for k in seg.edges), default=math.inf) \
            if edge_headroom is not None else math.inf
        room = min(room, spare)
        out[key] = SharedCircuit(key, seg, _circuit_capacity(g, seg.oports), peak,
                                 tuple(sorted({b.id for b in books})), latency, room,
                                 tuple(dict.fromkeys(b.tag for b in books)))
    return out


def add_circuit_arcs(view: Any, circuits: dict[str, SharedCircuit], tag: int | None = 0) -> None:
    """Give ``view`` (a :class:`pce.cspf.RoutingView`) one arc per direction for every booked
    circuit with room that a request with VLAN ``tag`` may join (:meth:`SharedCircuit.takes`; the
    default 0 is a VLAN nobody has), between its two switches, as wide as what is free on it."""
    from pce.cspf import Arc

    for key, c in circuits.items():
        a, z = c.segment.ends
        if a not in view.kind or z not in view.kind:
            continue
        view.headroom[key] = c.free
        view.kind.setdefault(key, "circuit")
        view.edge_kind[key] = "circuit"
        view.edge_ends[key] = (a, z)
        view.why[key] = (f"shared circuit of {c.capacity:g} Mbit/s with {c.peak:g} booked at peak by "
                         f"{', '.join(c.holders)}"
                         f"{'; its ports serve another circuit in part of the window' if c.edge_room <= 0 else ''}")
        _hide_packet_link(view, c)
        if not c.takes(tag):
            view.headroom[key] = 0.0
            view.why[key] += ("; sharing it needs a VLAN for this reservation and every other on it, "
                              "all different (their rules on it match the VLAN)")
        # (an arc with no room carries nothing, but a refusal can name it as the bottleneck)
        for tail, head in ((a, z), (z, a)):
            view.out.setdefault((tail, ""), []).append(Arc((head, ""), key, "circuit", c.latency,
                                                          view.headroom[key]))
    for arcs in view.out.values():
        arcs.sort(key=lambda arc: (arc.key, arc.head))


def _hide_packet_link(view: Any, c: SharedCircuit) -> None:
    """A lit booked circuit is also a packet link in a live graph (LLDP sees it), with no booking on
    that link's key: routing over it would bypass the circuit's bookings, so it is taken out of the
    view (the circuit's own arc carries what is free on it)."""
    ends = []
    for key, sw in ((c.segment.edges[0], c.segment.ends[0]), (c.segment.edges[-1], c.segment.ends[1])):
        port = (view.edge_attrs.get(key, {}).get("ports") or {}).get(sw)
        if port is None:
            return
        ends.append((sw, int(port)))
    for key, kind in view.edge_kind.items():
        if kind != "packet":
            continue
        ports = view.edge_attrs.get(key, {}).get("ports") or {}
        if sorted((n, int(p)) for n, p in ports.items()) != sorted(ends):
            continue
        view.headroom[key] = 0.0
        view.why[key] = f"the lit {c.key}: booked reservations hold it, ridden through its bookings"
        for sw, _port in ends:
            view.out[(sw, "")] = [a for a in view.out.get((sw, ""), []) if a.key != key]


def expand(route: Any, circuits: dict[str, SharedCircuit], graph: Any) -> GroomedRoute:
    """The plain path of ``route`` (a :class:`pce.cspf.Route`): every circuit arc replaced by the
    circuit's own edges, ports and XCONs in the direction it is crossed."""
    g = _graph(graph)
    bases = [route.vertices[0][0]]
    keys: list[str] = []
    xcons: list[tuple[str, str]] = []
    rides: list[str] = []
    for i, arc in enumerate(route.arcs):
        tail = route.vertices[i][0]
        if arc.kind != "circuit":
            keys.append(arc.key)
            if arc.kind == "xcon":
                xcons.append((tail, arc.head[0]))
            bases.append(arc.head[0])
            continue
        seg = circuits[arc.key].segment
        if seg.ends[0] != tail:
            seg = seg.reversed()
        keys.extend(seg.edges)
        bases.extend(seg.oports)
        bases.append(arc.head[0])
        for p, q in zip(seg.oports, seg.oports[1:], strict=False):
            if _joining_kind(g, p, q) == "xcon":
                xcons.append((p, q))
        rides.append(arc.key)
    return GroomedRoute(bases, keys, xcons, rides)


def _joining_kind(g: Any, p: str, q: str) -> str:
    """The kind of the xcon or optical edge between ports ``p`` and ``q`` ("" if none)."""
    for _u, v, d in g.edges(p, data=True):
        if d.get("kind") in OPTICAL_KINDS and v == q:
            return str(d["kind"])
    return ""


def circuits_of(graph: Any, edges: Sequence[str], calendar: BookingCalendar, start: float,
                end: float) -> list[dict[str, Any]]:
    """For a path: each circuit it crosses, whether it rides one already booked in the window
    (``"rides"``) or lights a new one (``"lights"``), with the circuit's capacity and what is free
    on it before this path is booked."""
    return describe(graph, edges, booked_circuits(graph, calendar, start, end))


def describe(graph: Any, edges: Sequence[str], booked: dict[str, SharedCircuit]) -> list[dict[str, Any]]:
    """:func:`circuits_of` given the window's booked circuits."""
    g = _graph(graph)
    out = []
    for seg in segments(g, edges):
        c = booked.get(seg.key)
        cap = _circuit_capacity(g, seg.oports)
        if c is not None:
            out.append({**c.to_dict(), "ends": list(seg.ends), "oports": list(seg.oports), "use": "rides"})
        else:
            out.append({"circuit": seg.key, "ends": list(seg.ends), "oports": list(seg.oports),
                        "capacity": cap, "booked_peak": 0.0, "free": cap, "reservations": [], "vlans": [],
                        "use": "lights"})
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}
            for d in out]
