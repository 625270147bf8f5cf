"""The per-pair candidate-circuit cache (pce.circuits.ChainCache) gives what a fresh search gives.

It keeps each switch pair's XCON chains while the optical layer is unchanged: new pairs are searched
alone, a change of the packet layer searches nothing, a lit XCON searches everything again.
"""
from __future__ import annotations

import itertools

from pce.circuits import ChainCache, candidate_circuits
from topology.spec import optical_mesh, spec_to_graph


def _mesh():
    return spec_to_graph(optical_mesh(6, 5, degree=3, seed=2))


def test_new_pairs_are_searched_alone_and_numbered_as_a_fresh_search():
    g = _mesh()
    pairs = list(itertools.combinations(sorted(n for n, d in g.g.nodes(data=True) if d["kind"] == "packet"), 2))
    cache = ChainCache()
    first = cache.circuits(g, 4, pairs[:6])
    assert first == candidate_circuits(g, per_pair=4, pairs=pairs[:6])
    assert cache.searched_pairs == 6
    both = cache.circuits(g, 4, [(b, a) for a, b in pairs])  # either order of a pair is the same pair
    assert both == candidate_circuits(g, per_pair=4, pairs=pairs)
    assert cache.searched_pairs == len(pairs)  # only the new ones
    assert len({c.id for c in both}) == len(both) > len(first)
    assert cache.circuits(g, 4, pairs) == both and cache.searched_pairs == len(pairs)
    assert cache.circuits(g, 2, pairs[:3]) == candidate_circuits(g, per_pair=2, pairs=pairs[:3])
    assert cache.searched_pairs == len(pairs) + 3  # another per_pair is another search


def test_the_packet_layer_does_not_invalidate_but_a_lit_xcon_does():
    g = _mesh()
    pairs = list(itertools.combinations(sorted(n for n, d in g.g.nodes(data=True) if d["kind"] == "packet"), 2))
    cache = ChainCache()
    before = cache.circuits(g, 8, pairs)
    searched = cache.searched_pairs
    g.add_packet_link("S1", 90, "S2", 90, capacity=10.0, latency=1.0)  # a new packet link (no optical change)
    assert cache.circuits(g, 8, pairs) == candidate_circuits(g, per_pair=8, pairs=pairs) == before
    assert cache.searched_pairs == searched
    taken = before[0].xcons[0]
    g.set_xcon_active(*taken)
    after = cache.circuits(g, 8, pairs)
    assert cache.searched_pairs == searched + len(pairs)
    assert after == candidate_circuits(g, per_pair=8, pairs=pairs) != before
    assert not any(set(taken) & set(c.oports) for c in after)


def test_least_recently_used_layers_are_dropped():
    g = _mesh()
    pairs = [("S1", "S2")]
    cache = ChainCache(size=1)
    cache.circuits(g, 8, pairs)
    lit = g.copy()
    lit.set_xcon_active(*cache.circuits(g, 8, pairs)[0].xcons[0])
    cache.circuits(lit, 8, pairs)
    cache.circuits(g, 8, pairs)  # the first layer was dropped: searched again
    assert cache.searched_pairs == 3
    cache.clear()
    cache.circuits(g, 8, pairs)
    assert cache.searched_pairs == 4
