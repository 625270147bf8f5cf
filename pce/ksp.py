"""k shortest simple paths (Yen) and k link-disjoint paths (min-cost flow) on a routing view.

Both work on the pruned, port-split view of :mod:`pce.cspf`, so every path they return already
satisfies the bandwidth, granularity and exclusion constraints of the request.
"""
from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Any

from pce.cspf import Arc, Constraints, Route, RoutingView, Vertex, _bnb, best_route, cost_tuple, fits

#: One arc of an :class:`IndexedView`: head, edge key, latency, head is a gated base, the view's arc.
_IArc = tuple[int, str, float, bool, Arc]


def _other_side(spur: Vertex) -> set[Vertex]:
    """A spur leaving a port must not come back to the port's other side."""
    return {(spur[0], "out" if spur[1] == "in" else "in")} if spur[1] else set()


def _offer(candidates: list[Any], seen: set[Any], tie: Iterator[int], total: Route, objective: str) -> None:
    """Yen's candidate heap takes ``total`` unless it was offered before or revisits a node."""
    ident = (total.vertices, total.keys)
    if ident in seen or not total.is_simple():
        return
    seen.add(ident)
    heapq.heappush(candidates, (total.cost(objective), next(tie), total))


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
            other = _other_side(spur)
            sub = cons.but(banned_keys=frozenset(banned_keys), banned_bases=frozenset(banned_bases),
                           banned_vertices=cons.banned_vertices | frozenset(other))
            tail = best_route(view, spur, targets, objective, sub, root.latency, root.hops, bounds)
            if tail is None:
                continue
            _offer(candidates, seen, tie, root + tail, objective)
        if not candidates:
            return
        _, _, nxt = heapq.heappop(candidates)
        accepted.append(nxt)
        yield nxt


class _Everything:
    """Contains every vertex (a search without a reach set)."""

    def __contains__(self, _: object) -> bool:
        return True


_ALL: Any = _Everything()


class IndexedView:
    """A routing view as integer adjacency for many ``shortest`` searches with one width floor and one
    set of banned edge keys (the candidate circuits' Yen of every switch pair, :func:`yen_indexed`).

    Arcs no such search may take (too narrow, a banned key) are dropped once; arcs into a *gated* base
    (packet switches and hosts, for chains) are kept, marked, and taken only into the bases a search
    opens (its two ends). The kept arcs stay in the view's order, so a search pushes the same labels in
    the same order as :func:`pce.cspf.best_route` and returns the same route.
    """

    def __init__(self, view: RoutingView, min_width: float, banned_keys: frozenset[str], gated: frozenset[str]
                 ) -> None:
        self.view = view
        self.vertices: list[Vertex] = []
        self.index: dict[Vertex, int] = {}
        self.of_base: dict[str, list[int]] = {}

        def vid(v: Vertex) -> int:
            i = self.index.get(v)
            if i is None:
                i = self.index[v] = len(self.vertices)
                self.vertices.append(v)
                self.of_base.setdefault(v[0], []).append(i)
            return i

        tails = [(vid(tail), arcs) for tail, arcs in view.out.items()]
        self.adj: list[list[_IArc]] = [[] for _ in self.vertices]
        for t, arcs in tails:
            for arc in arcs:
                if not fits(arc.width, min_width) or arc.key in banned_keys:
                    continue
                h = vid(arc.head)
                self.adj[t].append((h, arc.key, arc.latency, arc.head[0] in gated, arc))
        self.adj += [[] for _ in range(len(self.vertices) - len(self.adj))]
        self.gated = [v[0] in gated for v in self.vertices]
        self.host = {i for i, v in enumerate(self.vertices) if view.kind.get(v[0]) == "host"}
        self._rev: list[list[tuple[int, float]]] | None = None

    def _reverse(self) -> list[list[tuple[int, float]]]:
        """Per vertex the arcs into it as (tail, latency), hosts' arcs left out (built once)."""
        if self._rev is None:
            rev: list[list[tuple[int, float]]] = [[] for _ in self.vertices]
            for t, arcs in enumerate(self.adj):
                if t not in self.host:
                    for h, _, alat, _, _ in arcs:
                        rev[h].append((t, alat))
            self._rev = rev
        return self._rev

    def reaching(self, targets: set[int], open_: set[int]) -> dict[int, tuple[float, float]]:
        """Least (latency, hops) from each vertex to ``targets`` over the arcs a search opening
        ``open_`` may take, ignoring simplicity (reverse Dijkstra): the same values as
        ``pce.cspf``'s lower bounds of the exact fallback; a vertex missing reaches no target.
        The ends (``open_``) are switches: a host is never a tail. An arc into a gated vertex that is
        not open is never followed back, as :func:`pce.cspf._lower_bounds` leaves it out: such a vertex
        gets its distance but is not expanded."""
        rev = self._reverse()
        dist: dict[int, tuple[float, float]] = {}
        heap: list[tuple[tuple[float, float], Vertex, int]] = [((0.0, 0.0), self.vertices[v], v) for v in targets]
        heapq.heapify(heap)
        while heap:
            cost, _, v = heapq.heappop(heap)
            if v in dist:
                continue
            dist[v] = cost
            if self.gated[v] and v not in open_:
                continue
            for t, alat in rev[v]:
                if t not in dist:
                    heapq.heappush(heap, ((cost[0] + alat, cost[1] + 1), self.vertices[t], t))
        return dist

    def ints(self, bases: Iterable[str]) -> set[int]:
        """Every vertex of ``bases``."""
        return {i for b in bases for i in self.of_base.get(b, ())}

    def search(self, source: Vertex, targets: set[int], open_: set[int], banned: set[int], banned_keys: set[str],
               lat0: float, hops0: int, reach: dict[int, Any] | None = None) -> Route | None:
        """``pce.cspf``'s label-setting Dijkstra for ``shortest`` without a latency bound: least
        (latency, hops) from ``source`` to a vertex in ``targets`` (maybe not simple: the caller checks).
        Vertices not in ``reach`` (:meth:`reaching`, if given) are not entered: no label through them could end
        at a target, and leaving them out keeps the others' order."""
        s = self.index.get(source)
        if s is None:
            return None
        adj = self.adj
        labels: list[tuple[int, int, Arc | None]] = [(s, -1, None)]
        heap: list[tuple[float, int, int]] = [(lat0, hops0, 0)]
        settled: set[int] = set()
        n = 0
        pop, push = heapq.heappop, heapq.heappush
        if reach is None:
            reach = _ALL
        while heap:
            lat, hops, idx = pop(heap)
            v = labels[idx][0]
            if v in settled:
                continue
            settled.add(v)
            if idx and v in targets:
                verts: list[Vertex] = []
                arcs: list[Arc] = []
                while idx >= 0:
                    u, idx, a = labels[idx]
                    verts.append(self.vertices[u])
                    if a is not None:
                        arcs.append(a)
                verts.reverse()
                arcs.reverse()
                return Route(tuple(verts), tuple(arcs))
            h1 = hops + 1
            for h, key, alat, gated, arc in adj[v]:
                if h in settled or h not in reach or h in banned or key in banned_keys or (gated and h not in open_):
                    continue
                labels.append((h, idx, arc))
                n += 1
                push(heap, (lat + alat, h1, n))
        return None


def yen_indexed(iv: IndexedView, source: Vertex, target: str, cons: Constraints) -> Iterator[Route]:
    """:func:`yen` with the ``shortest`` objective from switch ``source`` to switch ``target`` on an
    :class:`IndexedView` built with ``cons``' width floor and banned keys, ``cons.banned_bases`` being
    the view's gated bases but the two ends: the same routes in the same order (every step as
    :func:`yen` takes it; a spur whose shortest walk is not simple falls back to
    :func:`pce.cspf.best_route`'s exact search, as there)."""
    if cons.banned_vertices or cons.max_latency is not None:
        raise ValueError("yen_indexed: no banned vertices or latency bound (use yen)")
    if iv.view.kind.get(source[0]) == "host" or iv.view.kind.get(target) == "host":
        raise ValueError("yen_indexed: between switches only (use yen)")
    objective, view, targets = "shortest", iv.view, {target}
    tgt = iv.ints(targets)
    open_ = iv.ints((source[0], target))
    reach: dict[int, Any] | None = None  # for the third route on, or the exact fallback
    lb: dict[Vertex, tuple[float, float]] | None = None

    def best(spur: Vertex, banned_bases: set[str], banned_verts: set[Vertex], banned_keys: set[str],
             lat0: float, hops0: int) -> Route | None:
        nonlocal lb, reach
        banned = iv.ints(banned_bases) | {iv.index[v] for v in banned_verts if v in iv.index}
        route = iv.search(spur, tgt, open_, banned, banned_keys, lat0, hops0, reach)
        if route is None or route.is_simple():
            return route
        # best_route's exact fallback, with its lower bounds (computed by the reverse search above)
        sub = cons.but(banned_keys=cons.banned_keys | frozenset(banned_keys),
                       banned_bases=cons.banned_bases | frozenset(banned_bases),
                       banned_vertices=frozenset(banned_verts))
        if reach is None:
            reach = iv.reaching(tgt, open_)
        if lb is None:
            lb = {iv.vertices[i]: c for i, c in reach.items()}
        return _bnb(view, spur, targets, objective, sub, lat0, hops0, lb)

    first = best(source, set(), set(), set(), 0.0, 0)
    if first is None:
        return
    accepted: list[tuple[Route, tuple[str, ...]]] = [(first, first.keys)]
    seen = {(first.vertices, first.keys)}
    yield first
    candidates: list[tuple[tuple[float, float], int, Route]] = []
    tie = itertools.count()
    while True:
        if reach is None and len(accepted) > 1:  # pruning pays from the third route on (one reverse search)
            reach = iv.reaching(tgt, open_)
        prev, prev_keys = accepted[-1]
        for i in range(len(prev.arcs)):
            root_v, root_k = prev.vertices[: i + 1], prev_keys[:i]
            spur = root_v[-1]
            banned_keys = {p.arcs[i].key for p, keys in accepted
                           if len(p.arcs) > i and p.vertices[: i + 1] == root_v and keys[:i] == root_k}
            root_bases = {v[0] for v in root_v[:-1]}
            other = _other_side(spur)
            root = Route(root_v, prev.arcs[:i])
            tail = best(spur, root_bases, other, banned_keys, root.latency, root.hops)
            if tail is None:
                continue
            _offer(candidates, seen, tie, root + tail, objective)
        if not candidates:
            return
        _, _, nxt = heapq.heappop(candidates)
        accepted.append((nxt, nxt.keys))
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
