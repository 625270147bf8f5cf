"""1+1 protection: a working path and a protection path that no single fibre cut takes down together.

Both paths are lit for the whole window and the ingress switch fails over from one to the other by
itself (an OpenFlow fast-failover group), so the protection path must share nothing a cut can break
with the working one: no fibre, no OTS port (hence no XCON) and no packet adaptation port. The
endpoints are the same (``A:1`` → ``C:3``): the two leave the source switch by different uplinks
(Fig. 2: A:3→X:1 and A:4→X:4) and reach the destination switch on different ports. The endpoint
access links are shared, and carry the traffic of one path at a time.

The working path is :func:`pce.reservation.compute_path`'s (objective, ERO, include honoured); the
protection path is the best one around it. If none exists (the working path was the "trap" that
blocks every disjoint partner) and the working path was free to move, the least-cost pair of
disjoint routes is tried instead. :func:`reprotect` is the same search after a failure: a new
protection path around the surviving path and the failed elements.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pce.bookings import Booking, BookingCalendar, as_calendar
from pce.cspf import Route, fits, widest_by_threshold
from pce.errors import NoPathError, PceError
from pce.ksp import disjoint_routes
from pce.reservation import (
    PathRequest,
    PathResult,
    _endpoint_headroom,
    _fail,
    _Problem,
    _problem,
    _result,
    _solve,
    compute_path,
)

PROTECTIONS = ("none", "1+1")
#: the what-if's smallest probe (Mbit/s): any pair at all
_LEAST_MBPS = 1e-6


class NoProtectionError(NoPathError):
    """A working path fits but no protection path shares no risk with it (or none is left after a failure)."""

#: edge kinds a protection path must not share with the working path (access links are the endpoints')
_CUT_KINDS = frozenset({"adaptation", "optical", "packet", "xcon"})


@dataclass
class ProtectedPath:
    """A working and a protection path for one request; both are booked and lit."""

    working: PathResult
    protection: PathResult

    def booking(self, id: str, start: float, end: float, bandwidth: float) -> Booking:
        """One booking holding both paths (the shared access links counted once: one path carries at a time)."""
        edges = dict.fromkeys([*self.working.edges, *self.protection.edges])
        oports = dict.fromkeys([*self.working.oports, *self.protection.oports])
        return Booking(id, start, end, bandwidth, tuple(edges), tuple(oports))

    def to_dict(self) -> dict[str, Any]:
        """The working path's dict with the protection path under ``"protection"`` (what the service stores)."""
        return {**self.working.to_dict(), "protection": self.protection.to_dict()}


def shared_risks(graph: Any, path_edges: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """What a path puts at risk: (its non-access edge keys plus every edge on one of its packet
    ports, the oports it crosses). A disjoint partner may use none of them."""
    g = getattr(graph, "g", graph)
    keys: set[str] = set()
    bases: set[str] = set()
    ports: set[tuple[str, int]] = set()
    for u, v, key, d in g.edges(keys=True, data=True):
        if key not in path_edges or d.get("kind") not in _CUT_KINDS:
            continue
        keys.add(key)
        bases.update(n for n in (u, v) if g.nodes[n].get("kind") == "oport")
        ports.update((str(sw), int(p)) for sw, p in (d.get("ports") or {}).items())
    for _u, _v, key, d in g.edges(keys=True, data=True):
        if d.get("kind") != "access" and any((str(sw), int(p)) in ports for sw, p in (d.get("ports") or {}).items()):
            keys.add(key)
    return frozenset(keys), frozenset(bases)


def _failed(graph: Any, p: _Problem, failed: Iterable[str]) -> tuple[set[str], set[str]]:
    """(edge keys, node ids) of the failed elements: edge keys, node ids (an OTS: all its ports) or a
    packet port ``switch:port`` (every edge on it). Names the graph does not know are skipped (a
    failed element may already be gone from a live graph)."""
    g = getattr(graph, "g", graph)
    keys: set[str] = set()
    bases: set[str] = set()
    edge_keys = {k: d for _u, _v, k, d in g.edges(keys=True, data=True)}
    for name in failed:
        if name in edge_keys:
            keys.add(name)
        elif name in p.view.kind:
            bases |= p.view.expand(name)
        else:
            sw, _, port = name.rpartition(":")
            if sw in g and port.isdigit():
                keys |= {k for k, d in edge_keys.items() if (d.get("ports") or {}).get(sw) == int(port)}
    return keys, bases


def _around(graph: Any, req: PathRequest, bookings: Any, avoid_edges: Iterable[str],
            failed: Iterable[str] = ()) -> tuple[_Problem, Route | None]:
    """The best route for ``req`` sharing no risk with ``avoid_edges`` and avoiding ``failed``."""
    p = _problem(graph, dataclasses.replace(req, include=(), ero=None), bookings)
    keys, bases = shared_risks(graph, list(avoid_edges))
    f_keys, f_bases = _failed(graph, p, failed)
    p.cons = p.cons.but(banned_keys=p.cons.banned_keys | keys | f_keys,
                        banned_bases=p.cons.banned_bases | bases | f_bases)
    ends = {p.src.edge, p.dst.edge} - {None}
    if ends & f_keys or {p.src.node, p.dst.node} & (p.cons.banned_bases | f_bases):
        return p, None  # an endpoint failed: nothing can protect it
    return p, _solve(p, p.cons)


def _no_protection(p: _Problem, working: PathResult) -> NoPathError:
    why = _fail(p)
    return NoProtectionError(f"1+1 protection: no protection path from {p.req.src} to {p.req.dst} sharing no fibre, "
                       f"OTS port or adaptation port with the working path {' → '.join(working.nodes)}: {why}",
                       bottleneck=why.bottleneck, available=why.available)


def protected_paths(graph: Any, req: PathRequest, bookings: Iterable[Booking] | BookingCalendar = ()
                    ) -> ProtectedPath:
    """A working path (as :func:`compute_path` finds it) and a disjoint protection path, both fitting
    ``req.bandwidth`` in the window. NoPathError (a :class:`pce.errors.PceError`) when either has no room
    or no disjoint protection exists."""
    working = compute_path(graph, req, bookings)
    p, route = _around(graph, req, bookings, working.edges)
    if route is not None:
        return ProtectedPath(working, _result(p, route))
    if req.ero is None and not req.include:
        pair = _disjoint_pair(graph, req, bookings)
        if pair is not None:
            return pair
    raise _no_protection(p, working)


def _disjoint_pair(graph: Any, req: PathRequest, bookings: Any) -> ProtectedPath | None:
    """The least-cost pair of link-disjoint routes, if it is also fibre-, port- and adaptation-disjoint
    (the working path first taken alone can block every partner: Suurballe's trap)."""
    p = _problem(graph, req, bookings)
    if not fits(_endpoint_headroom(p)[1], p.cons.min_width):
        return None
    obj = req.objective if req.objective in ("shortest", "least-hops") else "shortest"
    routes = disjoint_routes(p.view, p.source, p.targets, obj, p.cons, 2)
    if len(routes) < 2:
        return None
    first, second = (_result(p, r) for r in routes)
    keys, bases = shared_risks(graph, first.edges)
    if set(second.edges) & keys or set(second.oports) & bases:
        return None
    if p.cons.max_latency is not None and any(r.latency > p.cons.max_latency + 1e-9 for r in routes):
        return None
    return ProtectedPath(first, second)


def reprotect(graph: Any, req: PathRequest, surviving_edges: Iterable[str], failed: Iterable[str] = (),
              bookings: Iterable[Booking] | BookingCalendar = ()) -> PathResult:
    """A new protection path after a failure: disjoint from the path still carrying the traffic
    (``surviving_edges``, its stored edge keys) and avoiding every ``failed`` element (edge keys,
    node ids, OTS names or packet ports ``switch:port``). ``bookings`` are the *other* reservations'
    (this one's own booking would make its paths look taken). NoPathError if none exists."""
    failed = list(failed)
    p, route = _around(graph, req, bookings, list(surviving_edges), failed)
    if route is None:
        why = _fail(p)
        raise NoProtectionError(f"1+1 re-protection: no new protection path from {req.src} to {req.dst} around the "
                          f"surviving path and the failed {', '.join(sorted(failed)) or 'elements'}: {why}",
                          bottleneck=why.bottleneck, available=why.available)
    return _result(p, route)


def available_protected(graph: Any, src: str, dst: str, start: float, end: float,
                        bookings: Iterable[Booking] | BookingCalendar = ()) -> tuple[float, ProtectedPath | None]:
    """What-if for 1+1: the most Mbit/s a working and a disjoint protection path could both carry
    over the whole window, with that pair (``(0.0, None)`` if no disjoint pair exists).

    A binary search over the distinct headrooms of the window (a pair that fits a width fits any
    smaller one), each step one :func:`protected_paths`."""
    cal = as_calendar(bookings)
    p = _problem(graph, PathRequest(src, dst, 0.0, start, end, objective="widest"), cal, bandwidth_required=False)

    def pair(width: float) -> ProtectedPath | None:
        try:
            return protected_paths(graph, PathRequest(src, dst, width, start, end, objective="widest"), cal)
        except PceError:  # no pair that wide (or an unbounded width, which no request can name)
            return None

    best = widest_by_threshold(p.view, _LEAST_MBPS, pair)
    if best is None:
        return 0.0, None
    return min(best.working.available, best.protection.available), best
