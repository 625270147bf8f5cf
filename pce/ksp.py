"""k shortest simple paths (Yen) and k link-disjoint paths (min-cost flow) on a routing view.

Both work on the pruned, port-split view of :mod:`pce.cspf`, so every path they return already
satisfies the bandwidth, granularity and exclusion constraints of the request.
"""
from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator

from pce.cspf import Constraints, Route, RoutingView, Vertex, best_route, cost_tuple, fits


def yen(view: RoutingView, source: Vertex, targets: set[str], objective: str, cons: Constraints) -> Iterator[Route]:
    """Yield simple routes from ``source`` to ``targets`` in non-decreasing cost order, no duplicates.

    Yen's algorithm: each new route deviates from an accepted one at a spur vertex; the root
    before it is kept, its nodes are banned, and the edges the accepted routes with the same
    root take next are banned, so each candidate is new.
    """
    bounds: dict = {"cons": cons}  # spur searches only add bans: one set of lower bounds serves all
    first = best_route(view, source, targets, objective, cons, bounds=bounds)
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
            tail = best_route(view, spur, targets, objective, sub, root.latency, root.hops, bounds)
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


class _Residual:
    """Unit-capacity residual network for successive shortest paths (arcs in pairs: i, i ^ 1)."""

    def __init__(self) -> None:
        self.ids: dict[object, int] = {}
        self.names: list[object] = []
        self.adj: list[list[int]] = []
        self.head: list[int] = []
        self.cap: list[int] = []
        self.cost: list[float] = []

    def node(self, name: object) -> int:
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.names)
            self.names.append(name)
            self.adj.append([])
        return i

    def arc(self, u: object, v: object, cap: int, cost: float) -> None:
        a, b = self.node(u), self.node(v)
        self.adj[a].append(len(self.head))
        self.head.append(b)
        self.cap.append(cap)
        self.cost.append(cost)
        self.adj[b].append(len(self.head))
        self.head.append(a)
        self.cap.append(0)
        self.cost.append(-cost)

    def augment(self, s: int, t: int, pot: list[float]) -> bool:
        """One unit along a least reduced-cost path (Dijkstra with potentials); False if none."""
        n = len(self.names)
        dist = [math.inf] * n
        via = [-1] * n
        dist[s] = 0.0
        heap = [(0.0, s)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            for i in self.adj[u]:
                if self.cap[i] <= 0:
                    continue
                v = self.head[i]
                nd = d + self.cost[i] + pot[u] - pot[v]
                if nd < dist[v] - 1e-12:
                    dist[v], via[v] = nd, i
                    heapq.heappush(heap, (nd, v))
        if dist[t] == math.inf:
            return False
        for v in range(n):
            if dist[v] < math.inf:
                pot[v] += dist[v]
        v = t
        while v != s:
            i = via[v]
            self.cap[i] -= 1
            self.cap[i ^ 1] += 1
            v = self.head[i ^ 1]
        return True


def disjoint_routes(view: RoutingView, source: Vertex, targets: set[str], objective: str, cons: Constraints,
                    k: int) -> list[Route]:
    """Up to ``k`` pairwise link-disjoint routes of least total cost (min-cost flow by successive
    shortest paths, as in Suurballe/Bhandari).

    Every undirected edge becomes a unit-capacity gadget shared by both directions, so two routes
    can never use one link, whichever way they cross it. Returns fewer than ``k`` routes when
    the view has fewer disjoint ones (the caller names that as the failure). If the optimal flow
    only decomposes into invalid walks (turning back on a fibre at a port), the routes are found
    one by one instead, each avoiding the links of the previous ones.
    """
    net = _Residual()
    sink = ("__sink__", "")
    src = ("__super__", "")
    for tail, arcs in view.out.items():
        if tail[0] in cons.banned_bases or tail in cons.banned_vertices:
            continue
        if view.kind.get(tail[0]) == "host" and tail != source:
            continue
        for arc in arcs:
            if not fits(arc.width, cons.min_width) or arc.key in cons.banned_keys:
                continue
            if arc.head[0] in cons.banned_bases or arc.head in cons.banned_vertices:
                continue
            if view.kind.get(arc.head[0]) == "host" and arc.head[0] not in targets:
                continue
            step = cost_tuple(objective, arc.latency, 1)
            w = step[0] * 1e6 + step[1]  # lexicographic: primary, then secondary as tie-breaker
            ga, gb = ("__edge__", arc.key, "a"), ("__edge__", arc.key, "b")
            if ga not in net.ids:
                net.arc(ga, gb, 1, w)
            net.arc(tail, ga, 1, 0.0)
            net.arc(gb, arc.head, 1, 0.0)
            if arc.head[0] in targets:
                net.arc(arc.head, sink, k, 0.0)
    if source not in net.ids or sink not in net.ids:
        return []
    net.arc(src, source, k, 0.0)
    s, t = net.ids[src], net.ids[sink]
    pot = [0.0] * len(net.names)
    amount = 0
    while amount < k and net.augment(s, t, pot):
        amount += 1
    routes = [r for r in (_peel(view, net, source, targets) for _ in range(amount)) if r is not None]
    if len(routes) < amount or not all(r.is_simple() for r in routes) or _shared(routes):
        return _one_by_one(view, source, targets, objective, cons, k)
    routes.sort(key=lambda r: (r.cost(objective), r.keys))
    return routes


def _shared(routes: list[Route]) -> bool:
    keys = [k for r in routes for k in r.keys]
    return len(keys) != len(set(keys))


def _flow(net: _Residual, i: int) -> int:
    """Units on forward arc ``i`` (its residual twin holds them)."""
    return net.cap[i ^ 1] if i % 2 == 0 else 0


def _peel(view: RoutingView, net: _Residual, source: Vertex, targets: set[str]) -> Route | None:
    """Take one unit of flow from ``source`` to the sink as a route (None if it is not a valid one)."""
    verts: list[Vertex] = [source]
    arcs = []
    here = source
    for _ in range(len(net.names)):
        u = net.ids[here]
        nxt = next((i for i in net.adj[u] if _flow(net, i) > 0), None)
        if nxt is None:
            return None
        net.cap[nxt ^ 1] -= 1
        name = net.names[net.head[nxt]]
        if name == ("__sink__", ""):
            break
        if not (isinstance(name, tuple) and len(name) == 3):
            return None
        gb = net.ids[("__edge__", name[1], "b")]
        mid = next(i for i in net.adj[net.head[nxt]] if net.head[i] == gb and _flow(net, i) > 0)
        net.cap[mid ^ 1] -= 1
        out = next((i for i in net.adj[gb] if _flow(net, i) > 0), None)
        if out is None:
            return None
        net.cap[out ^ 1] -= 1
        head = net.names[net.head[out]]
        arc = next((a for a in view.out.get(here, ()) if a.key == name[1] and a.head == head), None)
        if arc is None:  # turned back on the same link: not a path
            return None
        arcs.append(arc)
        verts.append(head)
        here = head
    if not arcs or verts[-1][0] not in targets:
        return None
    return Route(tuple(verts), tuple(arcs))


def _one_by_one(view: RoutingView, source: Vertex, targets: set[str], objective: str, cons: Constraints,
                k: int) -> list[Route]:
    """Fallback: shortest route, ban its links, repeat (valid, not always the least total cost)."""
    routes: list[Route] = []
    banned = set(cons.banned_keys)
    for _ in range(k):
        r = best_route(view, source, targets, objective, cons.but(banned_keys=frozenset(banned)))
        if r is None:
            break
        routes.append(r)
        banned.update(r.keys)
    return routes
