"""The candidate circuits' indexed Yen (pce.ksp.yen_indexed) returns what the plain Yen returns.

``pce.circuits`` searches every switch pair's XCON chains on an integer copy of the routing view; the
chains (and so the circuit ids and every placement built on them) must be the same routes in the
same order as :func:`pce.ksp.yen` on the view itself — ties included, and where a shortest walk is not
simple and the exact fallback decides.
"""
from __future__ import annotations

import itertools

import pytest

from pce.circuits import CHAIN_MIN_WIDTH, _uplinks
from pce.cspf import Constraints, RoutingView
from pce.ksp import IndexedView, yen, yen_indexed
from pce.otter.graph_mesh import mesh
from tests.unit.pce.test_cspf_bruteforce import random_graph
from topology.spec import fig2_testbed, optical_mesh, spec_to_graph

PER_PAIR = 8


def _both(graph, pairs=None):
    """Per switch pair: (plain Yen's routes, indexed Yen's routes), as (vertices, keys)."""
    view = RoutingView.build(graph)
    blocked = frozenset(n for n, k in view.kind.items() if k in ("packet", "host"))
    packet_links = frozenset(k for k, kind in view.edge_kind.items() if kind == "packet")
    iv = IndexedView(view, CHAIN_MIN_WIDTH, packet_links, blocked)
    ups = _uplinks(graph.g)
    switches = sorted(ups)
    out = {}
    for a, b in pairs or itertools.combinations(switches, 2):
        cons = Constraints(min_width=CHAIN_MIN_WIDTH, banned_bases=blocked - {a, b}, banned_keys=packet_links)
        plain = [(r.vertices, r.keys) for r in itertools.islice(yen(view, (a, ""), {b}, "shortest", cons), PER_PAIR)]
        fast = [(r.vertices, r.keys) for r in itertools.islice(yen_indexed(iv, (a, ""), b, cons), PER_PAIR)]
        out[a, b] = plain, fast
    return out


def _graphs():
    fig2 = spec_to_graph(fig2_testbed())
    lit = fig2.copy()
    lit.set_xcon_active("X:1", "X:3")
    yield "fig2", fig2
    yield "fig2 with a lit XCON", lit
    yield "optical mesh", spec_to_graph(optical_mesh(6, 5, degree=3, seed=2))
    for seed in range(8):
        yield f"random {seed}", random_graph(seed)[0]


@pytest.mark.parametrize("name,graph", list(_graphs()), ids=lambda x: x if isinstance(x, str) else "")
def test_indexed_yen_equals_yen(name, graph):
    pairs = _both(graph)
    assert pairs
    for pair, (plain, fast) in pairs.items():
        assert fast == plain, (name, pair)


def test_indexed_yen_equals_yen_on_the_bench_mesh():
    """The placement benchmark's mesh (10 OTS, two wavelengths per fibre: many equal-latency chains):
    every fifth of its 190 pairs, each with 8 chains, all equal."""
    g = mesh(seed=2)
    switches = sorted(n for n, d in g.g.nodes(data=True) if d.get("kind") == "packet")
    pairs = list(itertools.combinations(switches, 2))[::5]
    got = _both(g, pairs)
    assert sum(len(p) for p, _ in got.values()) >= 8 * len(pairs) // 2
    for pair, (plain, fast) in got.items():
        assert fast == plain, pair


def test_indexed_yen_rejects_what_it_does_not_do():
    g = spec_to_graph(fig2_testbed())
    view = RoutingView.build(g)
    iv = IndexedView(view, CHAIN_MIN_WIDTH, frozenset(), frozenset())
    with pytest.raises(ValueError, match="latency bound"):
        next(yen_indexed(iv, ("A", ""), "C", Constraints(max_latency=5.0)))
