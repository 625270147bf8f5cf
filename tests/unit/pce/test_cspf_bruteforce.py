"""CSPF optimality checked against an independent brute force over all simple paths.

The brute force walks the undirected MultiLayerGraph directly (not the PCE's port-split view)
and applies the rules from docs/graph-model.md itself: an OTS is crossed port -> XCON -> port,
XCONs only between ports of one granularity, no active-XCON or booked ports, headroom = capacity
minus the peak overlapping booking.
"""
from __future__ import annotations

import itertools
import math
import random

import pytest

from pce.bookings import BookingCalendar
from pce.errors import NoPathError
from pce.reservation import Booking, PathRequest, compute_path, disjoint_paths, k_shortest_paths
from topology.graph import MultiLayerGraph


def random_graph(seed: int) -> tuple[MultiLayerGraph, list[Booking]]:
    """Packet switches with copper links plus two or three OTSes with mixed-granularity ports."""
    rng = random.Random(seed)
    g = MultiLayerGraph()
    sws = [f"S{i}" for i in range(rng.randint(3, 5))]
    for s in sws:
        g.add_packet_switch(s)
    next_port = {s: 1 for s in sws}

    def port(s: str) -> int:
        next_port[s] += 1
        return next_port[s] - 1

    for a, b in itertools.combinations(sws, 2):
        if rng.random() < 0.3:
            g.add_packet_link(a, port(a), b, port(b), rng.choice([5, 10, 20]), rng.randint(1, 9))
    ots = [f"O{i}" for i in range(rng.randint(2, 3))]
    for o in ots:
        g.add_ots(o, ports={p: rng.choice(["ODU2", "ODU2", "ODU2", "ODU0"]) for p in range(1, 6)})
    free = [f"{o}:{p}" for o in ots for p in range(1, 6)]
    rng.shuffle(free)
    for s in sws:  # every switch gets one uplink, then ports become fibres or more uplinks
        a = next(x for x in free if g.g.nodes[x]["granularity"] == "ODU2")
        free.remove(a)
        g.add_adaptation(s, port(s), a)
    while len(free) >= 2:
        a = free.pop()
        if rng.random() < 0.3:
            s = rng.choice(sws)
            g.add_adaptation(s, port(s), a)
        else:
            b = next((x for x in free if x.split(":")[0] != a.split(":")[0]
                      and g.g.nodes[x]["granularity"] == g.g.nodes[a]["granularity"]), None)
            if b is None:
                continue
            free.remove(b)
            g.add_optical_link(a, b, latency=rng.randint(1, 9))
    if rng.random() < 0.3:
        xs = g.edges_of_kind("xcon")
        if xs:
            u, v = g.edge_ends(rng.choice(xs))
            g.set_xcon_active(u, v)
    books = []
    keys = [k for k in sorted(g.g.edges(keys=True)) if g.edge(k[2])["kind"] in ("packet", "adaptation")]
    for i in range(rng.randint(0, 4)):
        if not keys:
            break
        k = rng.choice(keys)[2]
        s = rng.randint(0, 80)
        books.append(Booking(f"b{i}", s, s + rng.randint(5, 40), rng.choice([2, 4, 6]), (k,)))
    oports = g.nodes_of_kind("oport")
    if rng.random() < 0.4:
        books.append(Booking("ob", 10, 60, 1, (), (rng.choice(oports),)))
    return g, books


def brute_paths(g: MultiLayerGraph, src: str, dst: str, bw: float, start: float, end: float,
                books: list[Booking]):
    """Every valid simple path as (nodes, keys, latency, hops, width)."""
    use = BookingCalendar(books).usage(start, end)
    nodes = g.g.nodes

    def oport_free(p: str) -> float:
        if p in use.busy_oports or g.active_xcon_at(p):
            return 0.0
        return nodes[p]["capacity"]

    out = []

    def dfs(path, keys, lat, width, last_kind):
        here = path[-1]
        if here == dst:
            out.append((list(path), list(keys), lat, len(keys), width))
            return
        if nodes[here]["kind"] == "host" and len(path) > 1:
            return
        for _, nb, key, d in g.g.edges(here, keys=True, data=True):
            if nb in path:
                continue
            kind = d["kind"]
            if nodes[here]["kind"] == "oport" and (kind == "xcon") == (last_kind == "xcon"):
                continue  # a port alternates physical edge and XCON
            if kind == "xcon" and (nodes[here]["granularity"] != nodes[nb]["granularity"]):
                continue
            h = d["capacity"] - use.edge_peak.get(key, 0.0)
            if nodes[nb]["kind"] == "oport":
                h = min(h, oport_free(nb))
            if h < bw:
                continue
            if nodes[nb]["kind"] == "host" and nb != dst:
                continue
            path.append(nb)
            keys.append(key)
            dfs(path, keys, lat + d.get("latency", 0.0), min(width, h), kind)
            path.pop()
            keys.pop()

    dfs([src], [], 0.0, math.inf, None)
    return out


CASES = [(seed, obj) for seed in range(60) for obj in ("shortest", "least-hops", "widest", "fits")]


@pytest.mark.parametrize("seed,objective", CASES)
def test_cspf_equals_brute_force(seed, objective):
    g, books = random_graph(seed)
    sws = g.nodes_of_kind("packet")
    src, dst = sws[0], sws[-1]
    bw, start, end = 3.0, 20.0, 50.0
    paths = brute_paths(g, src, dst, bw, start, end, books)
    request = PathRequest(src, dst, bw, start, end, objective=objective)
    if not paths:
        with pytest.raises(NoPathError):
            compute_path(g, request, books)
        return
    res = compute_path(g, request, books)
    key = {
        "shortest": lambda p: (p[2], p[3]),
        "least-hops": lambda p: (p[3], p[2]),
        "widest": lambda p: (-p[4], p[2]),
        "fits": lambda p: (p[4], p[2]),
    }[objective]
    best = min(key(p) for p in paths)
    got = next(p for p in paths if p[1] == res.edges)  # the result is one of the valid paths
    if objective == "fits" and len(paths) > 16:
        assert key(got) >= best
    else:
        assert key(got) == pytest.approx(best)
    assert res.latency == pytest.approx(got[2]) and res.available == pytest.approx(got[4])


@pytest.mark.parametrize("seed", range(40))
def test_yen_matches_brute_force_order(seed):
    g, books = random_graph(seed)
    sws = g.nodes_of_kind("packet")
    paths = brute_paths(g, sws[0], sws[-1], 1.0, 0, 100, books)
    request = PathRequest(sws[0], sws[-1], 1.0, 0, 100)
    if not paths:
        return
    k = min(len(paths), 8)
    got = k_shortest_paths(g, request, books, k=k + 3)
    assert len(got) == min(len(paths), k + 3)
    assert len({tuple(p.edges) for p in got}) == len(got)  # unique
    expect = sorted((round(p[2], 6), p[3]) for p in paths)[: len(got)]
    assert [(round(p.latency, 6), p.hops) for p in got] == expect
    valid = {tuple(p[1]) for p in paths}
    assert all(tuple(p.edges) in valid for p in got)


@pytest.mark.parametrize("seed", range(40))
def test_two_disjoint_paths_minimum_total_latency(seed):
    g, books = random_graph(seed)
    sws = g.nodes_of_kind("packet")
    paths = brute_paths(g, sws[0], sws[-1], 1.0, 0, 100, books)
    pairs = [a[2] + b[2] for a, b in itertools.combinations(paths, 2) if not set(a[1]) & set(b[1])]
    request = PathRequest(sws[0], sws[-1], 1.0, 0, 100)
    if not pairs:
        with pytest.raises(NoPathError):
            disjoint_paths(g, request, books, k=2)
        return
    a, b = disjoint_paths(g, request, books, k=2)
    assert not set(a.edges) & set(b.edges)
    assert a.latency + b.latency == pytest.approx(min(pairs))


@pytest.mark.parametrize("seed", range(40))
def test_include_and_exclude_equal_brute_force(seed):
    g, books = random_graph(seed)
    sws = g.nodes_of_kind("packet")
    paths = brute_paths(g, sws[0], sws[-1], 1.0, 0, 100, books)
    rng = random.Random(seed)
    ots = g.nodes_of_kind("optical")
    inc, exc = rng.choice(ots), rng.choice(g.nodes_of_kind("oport"))

    def crosses(p, ots_name):
        return any(g.kind(n) == "oport" and g.g.nodes[n]["ots"] == ots_name for n in p[0])

    ok = [p for p in paths if crosses(p, inc) and exc not in p[0]]
    request = PathRequest(sws[0], sws[-1], 1.0, 0, 100, include=(inc,), exclude=(exc,))
    if not ok:
        with pytest.raises(NoPathError):
            compute_path(g, request, books)
        return
    res = compute_path(g, request, books)
    assert crosses((res.nodes,), inc) and exc not in res.nodes
    assert (res.latency, res.hops) == min((p[2], p[3]) for p in ok)


@pytest.mark.parametrize("seed,objective", [(s, o) for s in range(40) for o in ("least-hops", "widest", "fits")])
def test_latency_bound_equals_brute_force(seed, objective):
    g, books = random_graph(seed)
    sws = g.nodes_of_kind("packet")
    paths = brute_paths(g, sws[0], sws[-1], 1.0, 0, 100, books)
    if len(paths) < 2:
        return
    bound = sorted(p[2] for p in paths)[len(paths) // 2]  # about half the paths are too slow
    ok = [p for p in paths if p[2] <= bound + 1e-9]
    res = compute_path(g, PathRequest(sws[0], sws[-1], 1.0, 0, 100, objective=objective, max_latency=bound), books)
    assert res.latency <= bound + 1e-9
    key = {"least-hops": lambda p: (p[3], p[2]), "widest": lambda p: (-p[4], p[2]),
           "fits": lambda p: (p[4], p[2])}[objective]
    got = next(p for p in paths if p[1] == res.edges)
    if objective == "fits" and len(ok) > 16:
        assert key(got) >= min(key(p) for p in ok)
    else:
        assert key(got) == pytest.approx(min(key(p) for p in ok))


@pytest.mark.parametrize("seed", range(40))
def test_available_bandwidth_equals_brute_force(seed):
    from pce.reservation import available_bandwidth

    g, books = random_graph(seed)
    sws = g.nodes_of_kind("packet")
    paths = brute_paths(g, sws[0], sws[-1], 0.0, 20, 50, books)
    bw, res = available_bandwidth(g, sws[0], sws[-1], 20, 50, books)
    if not paths:
        assert (bw, res) == (0.0, None)
        return
    assert bw == pytest.approx(max(p[4] for p in paths))
    assert res.available == pytest.approx(bw)
