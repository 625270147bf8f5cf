"""Path computation for bandwidth reservations (OSCARS-style CSPF over the multi-layer graph).

This is the API the reservation web service calls (docs/contracts.md section 5):
``compute_path``, ``available_bandwidth`` ("what-if"), ``k_shortest_paths`` and
``disjoint_paths``. A request names two endpoints (switch, host or ``switch:port``), a bandwidth
and a time window; bookings that overlap the window reduce what is left (peak overlapping load
per link; optical ports taken whole). A request that cannot be served raises ``NoPathError``
naming the bottleneck element and what is available there.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from pce.bookings import Booking, BookingCalendar, as_calendar
from pce.cspf import (
    OBJECTIVES,
    Constraints,
    Route,
    RoutingView,
    Vertex,
    best_route,
    contains_all,
    fits,
    nx_graph,
    route_via,
    widest_by_threshold,
)
from pce.errors import InvalidInputError, NoPathError, UnknownTopologyError
from pce.grooming import SharedCircuit, add_circuit_arcs, booked_circuits, describe, expand
from pce.ksp import disjoint_routes, yen

__all__ = [
    "Booking",
    "BookingCalendar",
    "PathRequest",
    "PathResult",
    "available_bandwidth",
    "compute_path",
    "disjoint_paths",
    "k_shortest_paths",
]

#: "fits" picks the tightest of this many latency-ordered feasible candidates (Yen).
FITS_CANDIDATES = 16
#: With "include", orders of at most this many waypoints are all tried (then Yen refines).
INCLUDE_PERMUTE_MAX = 4
#: Yen candidates examined to prove a waypoint route optimal or to filter k paths by "include".
INCLUDE_YEN_LIMIT = 32


@dataclass
class PathRequest:
    """What a reservation asks for: endpoints, Mbit/s, window (epoch seconds) and path options."""

    src: str
    dst: str
    bandwidth: float
    start: float
    end: float
    objective: str = "shortest"  # shortest | least-hops | widest | fits
    max_latency: float | None = None  # ms
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    ero: tuple[str, ...] | None = None  # explicit route: node ids visited in this order
    groom: bool = False  # may ride circuits other bookings hold in the window (pce/grooming.py)
    tag: int | None = None  # its VLAN: sharers of a circuit must each have one of their own (grooming)


@dataclass
class PathResult:
    """A computed path: node ids in order (oports included), edge keys, the oports and XCONs it
    would take, its latency (ms) and its headroom (least free Mbit/s along it in the window)."""

    nodes: list[str]
    edges: list[str]
    oports: list[str]
    xcons: list[tuple[str, str]]
    latency: float
    available: float
    bottleneck: str | None = None  # the element whose headroom is ``available``
    hops: int = 0
    rides: list[str] = field(default_factory=list)  # keys of booked circuits it shares (grooming)
    #: with grooming: each circuit it crosses, "rides" (booked by others) or "lights", its capacity and
    #: what was free on it in the window before this path (pce.grooming.describe)
    circuits: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (infinite headroom, i.e. no capacities known, becomes None)."""
        d = asdict(self)
        d["xcons"] = [list(x) for x in self.xcons]
        if not math.isfinite(self.available):
            d["available"] = None
        return d

    def booking(self, id: str, start: float, end: float, bandwidth: float, tag: int | None = None) -> Booking:
        """The booking that reserves this path (what the service stores after commit)."""
        return Booking(id, start, end, bandwidth, tuple(self.edges), tuple(self.oports), tag)


@dataclass
class _Endpoint:
    node: str
    edge: str | None = None  # access edge of a switch:port endpoint


@dataclass
class _Problem:
    """A validated request resolved against one graph and window."""

    req: PathRequest
    view: RoutingView
    src: _Endpoint
    dst: _Endpoint
    cons: Constraints
    include: list[set[str]] = field(default_factory=list)
    ero: list[set[str]] | None = None
    circuits: dict[str, SharedCircuit] = field(default_factory=dict)  # booked circuits it may ride
    graph: Any = None  # the networkx graph (to expand ridden circuits)

    @property
    def source(self) -> Vertex:
        return (self.src.node, "")

    @property
    def targets(self) -> set[str]:
        return {self.dst.node}


# ---------------------------------------------------------------------- validation
def _number(name: str, value: Any, *, positive: bool = False, allow_zero: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (not allow_zero and value == 0):
        raise InvalidInputError(f"{name} must be {'> 0' if not allow_zero else '>= 0'}, got {value!r}")
    return float(value)


def _iso(ts: float) -> str:
    """An epoch time as ISO 8601 UTC for messages (the raw number if it is out of datetime's range)."""
    try:
        return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return f"{ts:g}"


def _resolve_endpoint(g: Any, name: str, role: str) -> _Endpoint:
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{role} must be a node id or switch:port, got {name!r}")
    if name in g:
        kind = g.nodes[name].get("kind")
        if kind in ("packet", "host"):
            return _Endpoint(name)
        raise InvalidInputError(f"{role} {name!r} is an {kind} node; endpoints are switches, hosts or switch:port")
    node, sep, port_s = name.rpartition(":")
    if not sep or node not in g:
        raise UnknownTopologyError(f"unknown {role} endpoint {name!r}")
    if g.nodes[node].get("kind") != "packet":
        raise InvalidInputError(f"{role} {name!r}: only packet switch ports can be endpoints")
    try:
        port = int(port_s)
    except ValueError:
        raise InvalidInputError(f"{role} {name!r}: port must be an integer") from None
    for _, _, key, d in g.edges(node, keys=True, data=True):
        if d.get("kind") == "access" and d.get("ports", {}).get(node) == port:
            return _Endpoint(node, key)
    return _Endpoint(node)


def _known(view: RoutingView, names: Iterable[str] | str, what: str) -> list[set[str]]:
    if isinstance(names, str):  # a single node id, not its characters
        names = (names,)
    out = []
    for n in names:
        if not isinstance(n, str):
            raise InvalidInputError(f"{what} entries must be node ids, got {n!r}")
        if n not in view.kind:
            raise UnknownTopologyError(f"{what}: unknown node {n!r}")
        out.append(view.expand(n))
    return out


def _problem(graph: Any, req: PathRequest, bookings: Any, bandwidth_required: bool = True) -> _Problem:
    g = nx_graph(graph)
    bw = _number("bandwidth", req.bandwidth, allow_zero=not bandwidth_required)
    start, end = _number("start", req.start), _number("end", req.end)
    if end <= start:
        raise InvalidInputError(f"end ({_iso(end)}) must be after start ({_iso(start)})")
    if req.objective not in OBJECTIVES:
        raise InvalidInputError(f"unknown objective {req.objective!r} (choose: {', '.join(OBJECTIVES)})")
    max_lat = None if req.max_latency is None else _number("max_latency", req.max_latency)
    src = _resolve_endpoint(g, req.src, "src")
    dst = _resolve_endpoint(g, req.dst, "dst")
    if src.node == dst.node:
        raise InvalidInputError(f"src and dst are on the same node {src.node!r}: no path to compute")
    calendar = as_calendar(bookings)
    view = RoutingView.build(graph, calendar.usage(start, end))
    circuits: dict[str, SharedCircuit] = {}
    if req.groom:
        circuits = booked_circuits(graph, calendar, start, end, view.headroom)
        add_circuit_arcs(view, circuits, req.tag)
    excluded: set[str] = set().union(*_known(view, req.exclude, "exclude")) if req.exclude else set()
    if {src.node, dst.node} & excluded:
        raise InvalidInputError("an endpoint cannot be excluded")
    include = _known(view, req.include, "include")
    ero = None
    if req.ero is not None:
        hops = [req.ero] if isinstance(req.ero, str) else list(req.ero)
        if hops and hops[0] in (req.src, src.node):
            hops = hops[1:]
        if hops and hops[-1] in (req.dst, dst.node):
            hops = hops[:-1]
        ero = _known(view, hops, "ero")
    for grp in [*include, *(ero or [])]:
        if grp <= excluded:
            raise InvalidInputError(f"{sorted(grp)} is both required (include/ERO) and excluded")
    # a circuit arc skips its ports: excluding one of them (or its OTS) excludes the circuit
    banned = frozenset(k for k, c in circuits.items() if set(c.segment.oports) & excluded)
    cons = Constraints(min_width=bw, banned_bases=frozenset(excluded), max_latency=max_lat, banned_keys=banned)
    return _Problem(req, view, src, dst, cons, include, ero, circuits, g)


# ---------------------------------------------------------------------- solving
def _additive(p: _Problem, objective: str, cons: Constraints) -> Route | None:
    """Best route for an additive objective honouring ERO / include."""
    if p.ero is not None:
        return route_via(p.view, p.source, p.ero, p.targets, objective, cons)
    if not p.include:
        return best_route(p.view, p.source, p.targets, objective, cons)
    orders = (itertools.permutations(p.include) if len(p.include) <= INCLUDE_PERMUTE_MAX else [p.include])
    best: Route | None = None
    for order in orders:
        r = route_via(p.view, p.source, list(order), p.targets, objective, cons)
        if r is not None and (best is None or r.cost(objective) < best.cost(objective)):
            best = r
    # Yen in cost order: the first route crossing every waypoint is optimal; stop once the
    # candidates cost as much as the waypoint route (then that one is optimal).
    for r in itertools.islice(yen(p.view, p.source, p.targets, objective, cons), INCLUDE_YEN_LIMIT):
        if best is not None and r.cost(objective) >= best.cost(objective):
            break
        if contains_all(p.view, r, p.include):
            return r
    return best


def _solve(p: _Problem, cons: Constraints) -> Route | None:
    obj = p.req.objective
    if obj in ("shortest", "least-hops"):
        return _additive(p, obj, cons)
    if obj == "widest":
        return widest_by_threshold(p.view, cons.min_width,
                                   lambda w: _additive(p, "shortest", cons.but(min_width=w)))
    # fits: the tightest feasible candidate (best fit keeps wide paths for big requests)
    if p.ero is not None:
        cands = [r for r in [_additive(p, "shortest", cons)] if r is not None]
    else:
        stream = (r for r in itertools.islice(yen(p.view, p.source, p.targets, "shortest", cons),
                                              FITS_CANDIDATES * (4 if p.include else 1))
                  if contains_all(p.view, r, p.include))
        cands = list(itertools.islice(stream, FITS_CANDIDATES))
    if not cands:
        return None
    return min(cands, key=lambda r: (r.width, r.latency, r.hops))


def _lighting_keys(view: RoutingView) -> frozenset[str]:
    """The adaptation edges: banning them keeps a route off unlit optical ports (booked circuits are
    ridden through their own arcs)."""
    return frozenset(k for k, kind in view.edge_kind.items() if kind == "adaptation")


def _endpoint_headroom(p: _Problem) -> tuple[str | None, float]:
    best: tuple[str | None, float] = (None, math.inf)
    for ep in (p.src, p.dst):
        if ep.edge is not None and p.view.headroom.get(ep.edge, math.inf) < best[1]:
            best = (ep.edge, p.view.headroom[ep.edge])
    return best


def _result(p: _Problem, route: Route) -> PathResult:
    view = p.view
    plain = expand(route, p.circuits, p.graph)
    edges = ([p.src.edge] if p.src.edge else []) + plain.keys + ([p.dst.edge] if p.dst.edge else [])
    elem, avail = view.bottleneck(route)
    e_elem, e_avail = _endpoint_headroom(p)
    if e_avail < avail:
        elem, avail = e_elem, e_avail
    return PathResult(
        nodes=plain.bases,
        edges=edges,
        oports=[n for n in plain.bases if view.kind.get(n) == "oport"],
        xcons=plain.xcons,
        latency=route.latency,
        available=avail,
        bottleneck=elem,
        hops=len(plain.keys),
        rides=plain.rides,
        circuits=describe(p.graph, edges, p.circuits) if p.req.groom else [],
    )


def _fail(p: _Problem) -> NoPathError:
    """Explain why nothing fits: the limiting element of the widest otherwise-valid path, endpoint
    access links included, so the amount named is the most that path can carry (what the what-if
    says), never a wider endpoint link in front of a narrower core."""
    req = p.req
    what = f"no path from {req.src} to {req.dst} with {req.bandwidth:g} Mbit/s in the window"
    e_elem, e_avail = _endpoint_headroom(p)
    loose = p.cons.but(min_width=0.0)
    best = widest_by_threshold(p.view, 0.0, lambda w: _additive(p, "shortest", loose.but(min_width=w)))
    if best is not None:
        elem, avail = p.view.bottleneck(best)
        if e_elem is not None and e_avail < avail:
            return NoPathError(f"{what}: the widest path is limited by endpoint link {e_elem} with {e_avail:g} "
                               f"Mbit/s available{_why(p, e_elem)}", bottleneck=e_elem, available=e_avail)
        extra = ""
        if elem in p.view.kind and p.view.kind[elem] == "oport" and p.view.headroom[elem] < req.bandwidth \
                and not p.view.why.get(elem):
            extra = " (the port's granularity is smaller than the demand)"
        return NoPathError(f"{what}: the widest path is limited by {elem} with {avail:g} Mbit/s available"
                           f"{_why(p, elem)}{extra}", bottleneck=elem, available=avail)
    if e_elem is not None and not fits(e_avail, p.cons.min_width):
        return NoPathError(f"{what}: endpoint link {e_elem} has {e_avail:g} Mbit/s available"
                           f"{_why(p, e_elem)}", bottleneck=e_elem, available=e_avail)
    if p.cons.max_latency is not None:
        free = _additive(p, "shortest", loose.but(max_latency=None))
        if free is not None:
            return NoPathError(f"{what}: every path is longer than {p.cons.max_latency:g} ms "
                               f"(the shortest takes {free.latency:g} ms)", bottleneck=None, available=None)
    return NoPathError(f"no path from {req.src} to {req.dst}: not connected"
                       f"{' with the given include/exclude/ERO' if (req.include or req.exclude or req.ero) else ''}",
                       bottleneck=None, available=0.0)


def _why(p: _Problem, elem: str | None) -> str:
    reason = p.view.why.get(elem or "")
    return f" ({reason})" if reason else ""


# ---------------------------------------------------------------------- public API
def compute_path(graph: Any, req: PathRequest, bookings: Iterable[Booking] | BookingCalendar = ()) -> PathResult:
    """The path for ``req`` given ``bookings``; raises NoPathError naming the bottleneck if none fits.

    Objectives: ``shortest`` (least latency, then hops), ``least-hops`` (then latency),
    ``widest`` (most headroom, then latency), ``fits`` (least headroom that still fits, then latency).
    """
    p = _problem(graph, req, bookings)
    e_elem, e_avail = _endpoint_headroom(p)
    route = None
    if fits(e_avail, p.cons.min_width):
        if p.circuits:  # grooming: ride booked circuits if that serves the request, light new ones if not
            route = _solve(p, p.cons.but(banned_keys=p.cons.banned_keys | _lighting_keys(p.view)))
        if route is None:
            route = _solve(p, p.cons)
    if route is None:
        raise _fail(p)
    return _result(p, route)


def available_bandwidth(graph: Any, src: str, dst: str, start: float, end: float,
                        bookings: Iterable[Booking] | BookingCalendar = (),
                        groom: bool = False) -> tuple[float, PathResult | None]:
    """What-if: the most Mbit/s one path could carry from ``src`` to ``dst`` over the whole window,
    with that path (``(0.0, None)`` if the endpoints are not connected); ``groom``: riding circuits
    others booked counts too (the path's ``circuits`` say which it rides or lights)."""
    req = PathRequest(src, dst, 0.0, start, end, objective="widest", groom=groom, tag=0)  # 0: a VLAN of its own
    p = _problem(graph, req, bookings, bandwidth_required=False)
    route = _solve(p, p.cons)
    if route is None:
        return 0.0, None
    res = _result(p, route)
    return res.available, res


def k_shortest_paths(graph: Any, req: PathRequest, bookings: Iterable[Booking] | BookingCalendar = (),
                     k: int = 3) -> list[PathResult]:
    """Up to ``k`` distinct simple paths that fit, best first (Yen over the pruned graph).

    Ordered by the request's objective for ``shortest``/``least-hops`` and by latency otherwise.
    With an explicit route there is exactly one candidate. Raises NoPathError if none fits.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}")
    p = _problem(graph, req, bookings)
    obj = req.objective if req.objective in ("shortest", "least-hops") else "shortest"
    e_elem, e_avail = _endpoint_headroom(p)
    routes: list[Route] = []
    if fits(e_avail, p.cons.min_width):
        if p.ero is not None:
            one = _additive(p, obj, p.cons)
            routes = [one] if one is not None else []
        else:
            limit = k * INCLUDE_YEN_LIMIT if p.include else k
            stream = (r for r in itertools.islice(yen(p.view, p.source, p.targets, obj, p.cons), limit)
                      if contains_all(p.view, r, p.include))
            routes = list(itertools.islice(stream, k))
    if not routes:
        raise _fail(p)
    return [_result(p, r) for r in routes]


def disjoint_paths(graph: Any, req: PathRequest, bookings: Iterable[Booking] | BookingCalendar = (),
                   k: int = 2) -> list[PathResult]:
    """``k`` pairwise link-disjoint paths that each fit the request (primary + protection), least
    total cost first. Raises NoPathError if fewer than ``k`` exist (or one breaks the latency bound).
    Include and ERO constraints are not supported here (InvalidInputError)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}")
    if req.include or req.ero:
        raise InvalidInputError("disjoint paths support exclude and max_latency, not include/ERO")
    p = _problem(graph, req, bookings)
    obj = req.objective if req.objective in ("shortest", "least-hops") else "shortest"
    e_elem, e_avail = _endpoint_headroom(p)
    if not fits(e_avail, p.cons.min_width):
        raise _fail(p)
    routes = disjoint_routes(p.view, p.source, p.targets, obj, p.cons.but(max_latency=None), k)
    if not routes:
        raise _fail(p)
    if len(routes) < k:
        raise NoPathError(f"only {len(routes)} link-disjoint path(s) from {req.src} to {req.dst} fit "
                          f"{req.bandwidth:g} Mbit/s, {k} asked", bottleneck=None, available=req.bandwidth)
    if p.cons.max_latency is not None:
        slow = [r for r in routes if r.latency > p.cons.max_latency + 1e-9]
        if slow:
            raise NoPathError(f"the least-cost {k} link-disjoint paths include one of {slow[0].latency:g} ms, "
                              f"over the {p.cons.max_latency:g} ms bound", bottleneck=None, available=None)
    return [_result(p, r) for r in routes]
