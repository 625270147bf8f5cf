"""k shortest simple paths (Yen) and k link-disjoint paths (min-cost flow) on a routing view.

Both work on the pruned, port-split view of :mod:`pce.cspf`, so every path they return already
satisfies the bandwidth, granularity and exclusion constraints of the request.
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

import networkx as nx

from pce.cspf import Constraints, Route, RoutingView, Vertex, best_route


def yen(view: RoutingView, source: Vertex, targets: set[str], objective: str, cons: Constraints) -> Iterator[Route]:
    """Yield simple routes from ``source`` to ``targets`` in non-decreasing cost order, no duplicates.

    Yen's algorithm: each new route deviates from an accepted one at a spur vertex; the root
    before it is kept, its nodes are banned, and the edges the accepted routes with the same
    root take next are banned, so each candidate is new.
    """
    first = best_route(view, source, targets, objective, cons)
    if first is None:
        return
    accepted: list[Route] = [first]
    seen = {(first.vertices, first.keys)}
    yield first
    candidates: list[tuple[tuple[float, float], int, Route]] = []
    tie = itertools.count()
    while True:
        prev = accepted[-1]
        for i in range(len(prev.arcs)):
            root = Route(prev.vertices[: i + 1], prev.arcs[:i])
            spur = root.vertices[-1]
            banned_keys = set(cons.banned_keys)
            for p in accepted:
                if p.vertices[: i + 1] == root.vertices and p.keys[:i] == root.keys and len(p.arcs) > i:
                    banned_keys.add(p.arcs[i].key)
            banned_bases = set(cons.banned_bases) | {v[0] for v in root.vertices[:-1]}
            # a spur leaving a port must not come back to the port's other side
            other = {(spur[0], "out" if spur[1] == "in" else "in")} if spur[1] else set()
            sub = cons.but(banned_keys=frozenset(banned_keys), banned_bases=frozenset(banned_bases),
                           banned_vertices=cons.banned_vertices | frozenset(other))
            tail = best_route(view, spur, targets, objective, sub, root.latency, root.hops)
            if tail is None:
                continue
            total = root + tail
            ident = (total.vertices, total.keys)
            if ident in seen or not total.is_simple():
                continue
            seen.add(ident)
            heapq.heappush(candidates, (total.cost(objective), next(tie), total))
        if not candidates:
            return
        _, _, nxt = heapq.heappop(candidates)
        accepted.append(nxt)
        yield nxt


def disjoint_routes(view: RoutingView, source: Vertex, targets: set[str], objective: str, cons: Constraints,
                    k: int) -> list[Route]:
    """Up to ``k`` pairwise link-disjoint routes of least total cost (min-cost flow, Suurballe-like).

    Every undirected edge becomes a unit-capacity gadget shared by both directions, so two routes
    can never use one link, whichever way they cross it. Returns fewer than ``k`` routes when
    the view has fewer disjoint ones (the caller names that as the failure).
    """
    sink = ("__sink__", "")
    d = nx.DiGraph()
    scale = 1000  # integer costs for the network simplex: microseconds, plus a hop tie-breaker
    for tail, arcs in view.out.items():
        if tail[0] in cons.banned_bases:
            continue
        if view.kind.get(tail[0]) == "host" and tail != source:
            continue
        for arc in arcs:
            if arc.width + 1e-9 < cons.min_width or arc.key in cons.banned_keys:
                continue
            if arc.head[0] in cons.banned_bases:
                continue
            if view.kind.get(arc.head[0]) == "host" and arc.head[0] not in targets:
                continue
            if objective == "least-hops":
                w = 10**9 + int(round(arc.latency * scale))
            else:
                w = int(round(arc.latency * scale)) + 1
            ga, gb = ("__edge__", arc.key, "a"), ("__edge__", arc.key, "b")
            d.add_edge(ga, gb, capacity=1, weight=w, key=arc.key)
            d.add_edge(tail, ga, capacity=1, weight=0)
            d.add_edge(gb, arc.head, capacity=1, weight=0)
            if arc.head[0] in targets:
                d.add_edge(arc.head, sink, capacity=k, weight=0)
    if source not in d or sink not in d:
        return []
    d.add_node("__super__")
    d.add_edge("__super__", source, capacity=k, weight=0)
    flow = nx.max_flow_min_cost(d, "__super__", sink)
    routes: list[Route] = []
    amount = sum(flow["__super__"].values())
    for _ in range(amount):
        route = _take_path(view, flow, source, sink, targets)
        if route is not None:
            routes.append(route)
    routes.sort(key=lambda r: (r.cost(objective), r.keys))
    return routes


def _take_path(view: RoutingView, flow: dict, source: Vertex, sink: Vertex, targets: set[str]) -> Route | None:
    """Peel one unit of flow from ``source`` to the sink into a route (decrementing ``flow``)."""
    verts: list[Vertex] = [source]
    arcs = []
    here = source
    steps = 0
    while here != sink and steps < 10 * (len(view.out) + 2):
        steps += 1
        nxt = next((n for n, f in flow[here].items() if f > 0), None)
        if nxt is None:
            return None
        flow[here][nxt] -= 1
        if isinstance(nxt, tuple) and len(nxt) == 3 and nxt[0] == "__edge__":
            gb = ("__edge__", nxt[1], "b")
            flow[nxt][gb] -= 1
            head = next(n for n, f in flow[gb].items() if f > 0)
            flow[gb][head] -= 1
            arc = next(a for a in view.out[here] if a.key == nxt[1] and a.head == head)
            arcs.append(arc)
            verts.append(head)
            here = head
        else:
            here = nxt
    if not arcs or verts[-1][0] not in targets:
        return None
    return Route(tuple(verts), tuple(arcs))

