"""Constrained shortest paths over the multi-layer graph (the core of OSCARS-style CSPF).

The undirected :class:`~topology.graph.MultiLayerGraph` is turned into a directed *routing view*
in which every virtual optical port ``p`` is split into ``(p, "in")`` and ``(p, "out")``:

* a physical edge (adaptation or fibre) enters a port at ``in`` and leaves it from ``out``;
* an XCON ``p``–``q`` goes from ``(p, "in")`` to ``(q, "out")`` (and the reverse).

So every walk alternates physical edge / XCON / physical edge through an OTS — light enters a
port, is cross-connected, leaves by another port — and no walk can chain two XCONs at one port
or enter and leave by the same fibre. Packet switches and hosts are single vertices.

Each arc carries its *headroom* in the request window (capacity minus the peak booked load; an
oport is worth its whole capacity when free and 0 when booked or held by a lit circuit), so a
bandwidth constraint is a filter on arcs and "widest" is a threshold search. Searches are plain
Dijkstra (label-setting with a latency resource when a latency bound meets a hop objective);
a walk that revisits a node (possible only through the port split) falls back to an exact
branch-and-bound over simple paths, so results are always simple paths.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pce.bookings import WindowUsage
from pce.errors import InvalidInputError, UnknownTopologyError

Vertex = tuple[str, str]  # (node id, side): side "" for switches/hosts, "in"/"out" for oports
ADDITIVE_OBJECTIVES = ("shortest", "least-hops")
OBJECTIVES = ("shortest", "least-hops", "widest", "fits")
EPS = 1e-9
#: Relative tolerance of a bandwidth check: absorbs float drift of summed bookings (3 + 4 + 3 vs 10).
REL_TOL = 1e-9
#: Expansion budget of the exact simple-path fallback (reached only on pathological inputs).
BNB_BUDGET = 200_000


@dataclass(frozen=True)
class Arc:
    """One directed use of an edge: to ``head``, over edge ``key``."""

    head: Vertex
    key: str
    kind: str
    latency: float
    width: float  # headroom of the edge and of the oport entered, Mbit/s


@dataclass(frozen=True)
class Route:
    """A walk in the routing view: ``vertices[i] --arcs[i]--> vertices[i+1]``."""

    vertices: tuple[Vertex, ...]
    arcs: tuple[Arc, ...] = ()

    @property
    def latency(self) -> float:
        return sum(a.latency for a in self.arcs)

    @property
    def hops(self) -> int:
        return len(self.arcs)

    @property
    def width(self) -> float:
        return min((a.width for a in self.arcs), default=math.inf)

    @property
    def bases(self) -> list[str]:
        return [v[0] for v in self.vertices]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(a.key for a in self.arcs)

    def is_simple(self) -> bool:
        b = self.bases
        return len(set(b)) == len(b)

    def cost(self, objective: str) -> tuple[float, float]:
        return cost_tuple(objective, self.latency, self.hops)

    def __add__(self, other: Route) -> Route:
        if other.vertices[0] != self.vertices[-1]:
            raise ValueError("routes do not join")
        return Route(self.vertices + other.vertices[1:], self.arcs + other.arcs)


def fits(width: float, need: float) -> bool:
    """Whether ``width`` Mbit/s of headroom can carry ``need`` Mbit/s.

    Zero headroom carries nothing, however small the need: an optical port booked by anybody (or
    in a lit circuit) has headroom 0 because it is taken whole, and an absolute epsilon would let
    a 1e-9 Mbit/s request slip onto it. The tolerance is therefore relative to the need.
    """
    if need <= 0:
        return True
    return width > 0 and width >= need * (1.0 - REL_TOL)


def cost_tuple(objective: str, latency: float, hops: int) -> tuple[float, float]:
    """Lexicographic cost: latency then hops for shortest, hops then latency for least-hops."""
    return (hops, latency) if objective == "least-hops" else (latency, hops)


@dataclass(frozen=True)
class Constraints:
    """What a search may use: arcs at least ``min_width`` wide, not the banned nodes or edges."""

    min_width: float = 0.0
    banned_bases: frozenset[str] = frozenset()
    banned_keys: frozenset[str] = frozenset()
    max_latency: float | None = None
    banned_vertices: frozenset[Vertex] = frozenset()

    def but(self, **changes: Any) -> Constraints:
        data = {f: getattr(self, f) for f in ("min_width", "banned_bases", "banned_keys", "max_latency",
                                               "banned_vertices")}
        data.update(changes)
        return Constraints(**data)


def nx_graph(graph: Any) -> Any:
    """The networkx MultiGraph of a MultiLayerGraph (or the graph itself)."""
    return getattr(graph, "g", graph)


@dataclass
class RoutingView:
    """Directed, port-split view of a multi-layer graph with headroom for one time window."""

    kind: dict[str, str]
    headroom: dict[str, float]  # edge key or oport id -> Mbit/s free in the window
    why: dict[str, str]  # element -> why it is unavailable (booked, lit circuit, ...)
    out: dict[Vertex, list[Arc]]
    ots_ports: dict[str, list[str]]
    edge_kind: dict[str, str]
    edge_ends: dict[str, tuple[str, str]]
    edge_attrs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def build(cls, graph: Any, usage: WindowUsage | None = None) -> RoutingView:
        """Build the view of ``graph`` given the bookings' ``usage`` of the window."""
        g = nx_graph(graph)
        usage = usage or WindowUsage(0.0, 0.0)
        kind = {n: d.get("kind", "packet") for n, d in g.nodes(data=True)}
        headroom: dict[str, float] = {}
        why: dict[str, str] = {}
        ots_ports: dict[str, list[str]] = {}
        for n, d in g.nodes(data=True):
            if kind[n] != "oport":
                continue
            ots_ports.setdefault(d.get("ots", n.rsplit(":", 1)[0]), []).append(n)
            cap = _capacity(d.get("capacity"))
            holders = usage.busy_oports.get(n)
            if holders:
                headroom[n] = 0.0
                why[n] = f"booked whole by {', '.join(holders)}"
            else:
                headroom[n] = cap
        # only the ports of an active XCON are looked at (a WAN graph's oports have ~20 XCON edges each)
        lit_ports = {n for u, v, d in g.edges(data=True) if d.get("kind") == "xcon" and d.get("active")
                     for n in (u, v)}
        for n in g.nodes:
            if kind[n] == "oport" and n in lit_ports:
                for _, _, k, d in g.edges(n, keys=True, data=True):
                    if d.get("kind") == "xcon" and d.get("active"):
                        headroom[n] = 0.0
                        why[n] = f"in active XCON {k} (a lit circuit; use its packet link)"
        out: dict[Vertex, list[Arc]] = {}
        edge_kind: dict[str, str] = {}
        edge_ends: dict[str, tuple[str, str]] = {}
        edge_attrs: dict[str, dict[str, Any]] = {}
        for u, v, key, d in g.edges(keys=True, data=True):
            ek = d.get("kind")
            edge_kind[key], edge_ends[key], edge_attrs[key] = ek, (u, v), d
            cap = _capacity(d.get("capacity"))
            booked = usage.edge_peak.get(key, 0.0)
            headroom[key] = max(0.0, cap - booked)
            if booked > 0:
                why[key] = f"{booked:g} Mbit/s booked at peak by {', '.join(usage.peak_holders.get(key, ()))}"
            lat = float(d.get("latency") or 0.0)
            for tail, head in _arcs_of(ek, u, v, kind, g, d):
                width = headroom[key]
                if head[1]:
                    width = min(width, headroom[head[0]])
                out.setdefault(tail, []).append(Arc(head, key, ek, lat, width))
        for arcs in out.values():
            arcs.sort(key=lambda a: (a.key, a.head))
        return cls(kind, headroom, why, out, ots_ports, edge_kind, edge_ends, edge_attrs)

    # ------------------------------------------------------------------ helpers
    def expand(self, node: str) -> set[str]:
        """Node ids a name stands for: an OTS stands for all its virtual ports."""
        if node not in self.kind:
            raise UnknownTopologyError(f"unknown node {node!r}")
        if self.kind[node] == "optical":
            return set(self.ots_ports.get(node, ()))
        return {node}

    def widths(self) -> list[float]:
        """Distinct arc widths, ascending (the candidate thresholds of a widest search)."""
        return sorted({a.width for arcs in self.out.values() for a in arcs})

    def bottleneck(self, route: Route) -> tuple[str | None, float]:
        """The element (edge key or oport) with the least headroom on ``route`` and that headroom."""
        best: tuple[str | None, float] = (None, math.inf)
        for arc in route.arcs:
            for elem in (arc.key, arc.head[0] if arc.head[1] else None):
                if elem is None:
                    continue
                h = self.headroom.get(elem, math.inf)
                # on a tie name the port: its granularity is what the user must change
                if h < best[1] or (h == best[1] and h < math.inf and self.kind.get(elem) == "oport"):
                    best = (elem, h)
        return best


def _capacity(value: Any) -> float:
    if value is None:
        return math.inf
    try:
        cap = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"capacity {value!r} is not a number") from None
    return cap


def _arcs_of(ek: str, u: str, v: str, kind: dict[str, str], g: Any, d: dict[str, Any]) -> list[tuple[Vertex, Vertex]]:
    """Directed arcs of one undirected edge in the port-split view."""
    if ek in ("packet", "access"):
        return [((u, ""), (v, "")), ((v, ""), (u, ""))]
    if ek == "adaptation":
        sw, op = (u, v) if kind[v] == "oport" else (v, u)
        return [((sw, ""), (op, "in")), ((op, "out"), (sw, ""))]
    if ek == "optical":
        return [((u, "out"), (v, "in")), ((v, "out"), (u, "in"))]
    if ek == "xcon":
        gu, gv = g.nodes[u].get("granularity"), g.nodes[v].get("granularity")
        if gu != gv:  # potential XCONs exist only between same-granularity ports
            return []
        return [((u, "in"), (v, "out")), ((v, "in"), (u, "out"))]
    return []


# ---------------------------------------------------------------------- searches
def best_route(
    view: RoutingView,
    source: Vertex,
    targets: set[str],
    objective: str,
    cons: Constraints,
    lat0: float = 0.0,
    hops0: int = 0,
    bounds: dict[str, Any] | None = None,
) -> Route | None:
    """Least-cost simple route from ``source`` to any vertex of a node in ``targets``.

    ``lat0``/``hops0`` are the latency and hops already spent (ERO segments, Yen roots), so the
    latency bound applies to the whole path. ``bounds`` lets repeated searches (Yen's spurs) share
    the lower bounds of the exact fallback: pass ``{"cons": <looser constraints>}`` and it caches
    them there (bounds of looser constraints stay admissible).
    """
    route = _dijkstra(view, source, targets, objective, cons, lat0, hops0)
    if route is None or route.is_simple():
        return route
    lb = None
    if bounds is not None:
        lb = bounds.get("lb")
        if lb is None:
            lb = bounds["lb"] = _lower_bounds(view, targets, objective, bounds["cons"], source)
    return _bnb(view, source, targets, objective, cons, lat0, hops0, lb)


def _arc_ok(arc: Arc, cons: Constraints, view: RoutingView, source: Vertex, targets: set[str]) -> bool:
    if not fits(arc.width, cons.min_width) or arc.key in cons.banned_keys:
        return False
    base = arc.head[0]
    if base in cons.banned_bases or arc.head in cons.banned_vertices:
        return False
    return not (view.kind.get(base) == "host" and base not in targets and arc.head != source)


def _dijkstra(view: RoutingView, source: Vertex, targets: set[str], objective: str, cons: Constraints,
              lat0: float, hops0: int) -> Route | None:
    """Label-setting search; the arc tests of :func:`_arc_ok` are inlined (cheapest first) because
    this loop is the hot path of Yen's spur searches (candidate circuits, k shortest routes)."""
    bound = math.inf if cons.max_latency is None else cons.max_latency + EPS
    # With a latency bound and a hop objective a vertex may need several labels (fewer hops vs
    # less latency); labels popped later at a vertex are useful only if strictly faster.
    pareto = cons.max_latency is not None and objective != "shortest"
    if lat0 > bound:
        return None
    hops_first = objective == "least-hops"  # cost_tuple, inlined
    labels: list[tuple[Vertex, int, Arc | None]] = [(source, -1, None)]
    heap = [(cost_tuple(objective, lat0, hops0), lat0, hops0, 0)]
    settled: set[Vertex] = set()
    min_lat: dict[Vertex, float] = {}
    n = 0
    out, kind = view.out, view.kind
    need, keys, bases, verts = cons.min_width, cons.banned_keys, cons.banned_bases, cons.banned_vertices
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        _, lat, hops, idx = pop(heap)
        vertex = labels[idx][0]
        if pareto:
            if lat >= min_lat.get(vertex, math.inf) - EPS:
                continue
            min_lat[vertex] = lat
        else:
            if vertex in settled:
                continue
            settled.add(vertex)
        if vertex[0] in targets and idx != 0:
            return _unwind(labels, idx)
        if kind.get(vertex[0]) == "host" and idx != 0:
            continue  # hosts are endpoints, never transit
        h1 = hops + 1
        for arc in out.get(vertex, ()):
            head = arc.head
            if (not pareto and head in settled) or arc.key in keys or head in verts:
                continue
            base = head[0]
            if base in bases or not fits(arc.width, need):
                continue
            if kind.get(base) == "host" and base not in targets and head != source:
                continue
            nlat = lat + arc.latency
            if nlat > bound:
                continue
            labels.append((head, idx, arc))
            n += 1
            push(heap, ((h1, nlat) if hops_first else (nlat, h1), nlat, h1, n))
    return None


def _unwind(labels: list[tuple[Vertex, int, Arc | None]], idx: int) -> Route:
    verts: list[Vertex] = []
    arcs: list[Arc] = []
    while idx >= 0:
        vertex, parent, arc = labels[idx]
        verts.append(vertex)
        if arc is not None:
            arcs.append(arc)
        idx = parent
    return Route(tuple(reversed(verts)), tuple(reversed(arcs)))


def _lower_bounds(view: RoutingView, targets: set[str], objective: str, cons: Constraints,
                  source: Vertex) -> dict[Vertex, tuple[float, float]]:
    """Least cost from every vertex to the targets, ignoring simplicity (reverse Dijkstra).

    Lexicographic costs add component-wise and keep their order under addition, so this is an
    admissible bound for the branch-and-bound below.
    """
    rev: dict[Vertex, list[tuple[Vertex, Arc]]] = {}
    for tail, arcs in view.out.items():
        if view.kind.get(tail[0]) == "host" and tail != source:
            continue
        for arc in arcs:
            if _arc_ok(arc, cons, view, source, targets):
                rev.setdefault(arc.head, []).append((tail, arc))
    dist: dict[Vertex, tuple[float, float]] = {}
    heap: list[tuple[tuple[float, float], Vertex]] = []
    for v in {a.head for arcs in view.out.values() for a in arcs if a.head[0] in targets}:
        heap.append(((0.0, 0.0), v))
    heapq.heapify(heap)
    while heap:
        cost, v = heapq.heappop(heap)
        if v in dist:
            continue
        dist[v] = cost
        if v[0] in cons.banned_bases or (v in cons.banned_vertices):
            continue
        for tail, arc in rev.get(v, ()):
            if tail not in dist:
                step = cost_tuple(objective, arc.latency, 1)
                heapq.heappush(heap, ((cost[0] + step[0], cost[1] + step[1]), tail))
    return dist


def _bnb(view: RoutingView, source: Vertex, targets: set[str], objective: str, cons: Constraints,
         lat0: float, hops0: int, lb: dict[Vertex, tuple[float, float]] | None = None) -> Route | None:
    """Exact search over simple routes: depth first, best-bound child first, pruned by
    cost + lower bound >= best found (an A*-guided branch-and-bound)."""
    bound = math.inf if cons.max_latency is None else cons.max_latency + EPS
    if lb is None:
        lb = _lower_bounds(view, targets, objective, cons, source)
    if source not in lb:
        return None
    best: list[Any] = [None, (math.inf, math.inf)]
    budget = [BNB_BUDGET]
    verts: list[Vertex] = [source]
    arcs: list[Arc] = []
    seen = {source[0]}

    def dfs(cost: tuple[float, float], lat: float, hops: int) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            return
        here = verts[-1]
        if here[0] in targets and len(verts) > 1:
            if cost < best[1]:
                best[0], best[1] = Route(tuple(verts), tuple(arcs)), cost
            return
        if view.kind.get(here[0]) == "host" and len(verts) > 1:
            return
        children = []
        for arc in view.out.get(here, ()):
            if arc.head[0] in seen or arc.head not in lb or not _arc_ok(arc, cons, view, source, targets):
                continue
            nlat = lat + arc.latency
            step = cost_tuple(objective, arc.latency, 1)
            ncost = (cost[0] + step[0], cost[1] + step[1])
            h = lb[arc.head]
            if nlat > bound or (ncost[0] + h[0], ncost[1] + h[1]) >= best[1]:
                continue
            if objective == "shortest" and nlat + h[0] > bound:
                continue
            children.append(((ncost[0] + h[0], ncost[1] + h[1]), ncost, nlat, arc))
        children.sort(key=lambda c: (c[0], c[3].key, c[3].head))
        for f, ncost, nlat, arc in children:
            if f >= best[1]:
                break
            verts.append(arc.head)
            arcs.append(arc)
            seen.add(arc.head[0])
            dfs(ncost, nlat, hops + 1)
            seen.discard(arc.head[0])
            verts.pop()
            arcs.pop()

    dfs(cost_tuple(objective, lat0, hops0), lat0, hops0)
    return best[0]


def route_via(
    view: RoutingView,
    source: Vertex,
    waypoints: Sequence[set[str]],
    targets: set[str],
    objective: str,
    cons: Constraints,
) -> Route | None:
    """Route through each waypoint set in order, then to ``targets`` (a loose explicit route).

    Each segment is the best one given the nodes the earlier segments used (they are banned
    so the whole path stays simple); a waypoint the path already crossed is skipped.
    """
    route = Route((source,))
    for goal in [*waypoints, targets]:
        if goal & set(route.bases) and goal is not targets:
            continue
        banned = cons.banned_bases | (set(route.bases) - {route.vertices[-1][0]})
        seg = best_route(view, route.vertices[-1], goal, objective, cons.but(banned_bases=frozenset(banned)),
                         route.latency, route.hops)
        if seg is None:
            return None
        route = route + seg
    return route


_R = TypeVar("_R")


def widest_by_threshold(view: RoutingView, min_width: float, solve: Callable[[float], _R | None]) -> _R | None:
    """Widest route: the largest arc-width threshold at which ``solve`` still finds a route.

    Feasibility only shrinks as the threshold grows, so a binary search over the distinct arc
    widths needs O(log |arcs|) searches; the route returned is ``solve``'s best at that width.
    """
    cands = [w for w in view.widths() if fits(w, min_width)]
    best = solve(min_width)
    if best is None:
        return None
    lo, hi = 0, len(cands) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        found = solve(cands[mid])
        if found is None:
            hi = mid - 1
        else:
            best, lo = found, mid + 1
    return best


def contains_all(view: RoutingView, route: Route, groups: Iterable[set[str]]) -> bool:
    """Whether ``route`` crosses at least one node of each group."""
    bases = set(route.bases)
    return all(bases & grp for grp in groups)
