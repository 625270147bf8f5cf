"""A random multi-layer mesh and flow mix: the controller-scale instance of the graph-mode benchmark.

Why a module: ``bench/pce_otter_graph.py`` times placements on it and the unit tests check the
fast code paths (rounding, circuit incidence) against plain-loop versions on the same instance.

20 packet switches (one host each) with 30 lit 10 Gbit/s packet links (latency 2–15 ms) over a
random connected mesh of 10 OTSes (15 fibres of two ODU2 wavelengths, 1–8 ms); every switch has two
free ODU2 uplinks into its OTS, so candidate circuits exist between every pair. Flows between
random switches: 20% interactive (1–10 Mbit/s), 80% bulk (log-normal, median 80 Mbit/s).
"""
from __future__ import annotations

import random

from pce.otter.graph_flows import GraphFlow
from topology.graph import MultiLayerGraph

UNIT_MBPS = 1000.0  # ODU2 = 10 Gbit/s


def _connected(n: int, m: int, rng: random.Random) -> list[tuple[int, int]]:
    """A random connected simple graph on n nodes with m edges (random tree, then chords)."""
    order = list(range(n))
    rng.shuffle(order)
    edges = {tuple(sorted((order[i], order[rng.randrange(i)]))) for i in range(1, n)}
    others = [(a, b) for a in range(n) for b in range(a + 1, n) if (a, b) not in edges]
    rng.shuffle(others)
    return sorted(edges | set(others[: max(0, m - len(edges))]))


def mesh(n_sw: int = 20, n_ots: int = 10, packet_links: int = 30, fibres: int = 15, seed: int = 1) -> MultiLayerGraph:
    """The mesh of the module docstring (reproducible per ``seed``)."""
    rng = random.Random(seed)
    g = MultiLayerGraph()
    fibre_edges = _connected(n_ots, fibres, rng)
    ports: list[dict[int, str]] = [{} for _ in range(n_ots)]
    nxt = [1] * n_ots
    wires = []
    for a, b in fibre_edges:
        for _ in range(2):  # two wavelengths per fibre
            wires.append((a, nxt[a], b, nxt[b], rng.uniform(1.0, 8.0)))
            ports[a][nxt[a]] = ports[b][nxt[b]] = "ODU2"
            nxt[a] += 1
            nxt[b] += 1
    ups = []
    for i in range(n_sw):
        k = i % n_ots
        for u in range(2):
            ups.append((f"S{i + 1}", 2 + u, k, nxt[k]))
            ports[k][nxt[k]] = "ODU2"
            nxt[k] += 1
    for k in range(n_ots):
        g.add_ots(f"O{k + 1}", ports=ports[k], unit_mbps=UNIT_MBPS)
    for i in range(n_sw):
        g.add_packet_switch(f"S{i + 1}")
        g.add_host(f"h{i + 1}", f"10.0.{(i + 1) // 256}.{(i + 1) % 256}")
        g.add_access(f"h{i + 1}", f"S{i + 1}", 1, 100_000.0)
    for a, pa, b, pb, lat in wires:
        g.add_optical_link(f"O{a + 1}:{pa}", f"O{b + 1}:{pb}", latency=lat)
    for sw, port, k, op in ups:
        g.add_adaptation(sw, port, f"O{k + 1}:{op}")
    next_port = [10] * n_sw
    for a, b in _connected(n_sw, packet_links, rng):
        g.add_packet_link(f"S{a + 1}", next_port[a], f"S{b + 1}", next_port[b], 10 * UNIT_MBPS, rng.uniform(2.0, 15.0))
        next_port[a] += 1
        next_port[b] += 1
    return g


def flows(n: int, n_sw: int, seed: int) -> list[GraphFlow]:
    """``n`` flows between random distinct switches of :func:`mesh` (``n_sw`` switches)."""
    rng = random.Random(seed + 1)
    out = []
    for i in range(n):
        a, b = rng.sample(range(n_sw), 2)
        interactive = rng.random() < 0.2
        bw = rng.uniform(1.0, 10.0) if interactive else min(2000.0, rng.lognormvariate(4.38, 0.8))
        out.append(GraphFlow(f"f{i}", f"S{a + 1}", f"S{b + 1}", bw, "interactive" if interactive else "bulk", 1, 1))
    return out
