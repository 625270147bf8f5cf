"""Array form of a TE instance: directed arcs and demands as numpy vectors, checked once.

Every LP builder in pce.te works on these arrays rather than on the networkx graph, because
building constraint matrices for 10^5-10^6 demands from Python dicts is what makes naive LP
modelling slow. Each undirected link of the graph becomes two arcs of the same capacity.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from pce.errors import InvalidInputError, NoPathError, UnknownTopologyError


@dataclass
class TeNetwork:
    """Nodes, directed arcs (``arc_src[a] -> arc_dst[a]``), their capacities and path weights."""

    nodes: list[str]
    arc_src: np.ndarray
    arc_dst: np.ndarray
    arc_cap: np.ndarray
    arc_weight: np.ndarray
    weight_name: str

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_arcs(self) -> int:
        return int(self.arc_src.size)

    def out_arcs(self) -> list[list[tuple[int, int, float]]]:
        """Adjacency lists ``[(head, arc, weight), ...]`` per node, in arc order."""
        adj: list[list[tuple[int, int, float]]] = [[] for _ in range(self.n_nodes)]
        for a, (u, v, w) in enumerate(zip(self.arc_src.tolist(), self.arc_dst.tolist(),
                                          self.arc_weight.tolist(), strict=True)):
            adj[u].append((v, a, w))
        return adj


@dataclass
class Demands:
    """Directed demands as arrays: ``src[i] -> dst[i]`` wants ``volume[i]`` (Mbit/s)."""

    src: np.ndarray
    dst: np.ndarray
    volume: np.ndarray

    def __len__(self) -> int:
        return int(self.src.size)

    def subset(self, idx: np.ndarray) -> Demands:
        return Demands(self.src[idx], self.dst[idx], self.volume[idx])


def network_from_graph(graph: nx.Graph, weight: str = "auto") -> TeNetwork:
    """Arcs of ``graph`` (both directions of each link) with capacities and path weights.

    ``weight``: ``latency`` (edge attribute), ``hops`` (1 per link) or ``auto`` (latency when every
    link has one, else hops). Raises InvalidInputError on a missing or non-positive capacity.
    """
    nodes = [str(n) for n in graph.nodes]
    index = {n: i for i, n in enumerate(graph.nodes)}
    edges = list(graph.edges(data=True))
    if weight == "auto":
        weight = "latency" if edges and all("latency" in d for _, _, d in edges) else "hops"
    if weight not in ("latency", "hops"):
        raise InvalidInputError(f"unknown path weight {weight!r} (latency, hops, auto)")
    src, dst, cap, wt = [], [], [], []
    for u, v, d in edges:
        c = d.get("capacity")
        if c is None:
            raise InvalidInputError(f"link {u}-{v} has no capacity (give --capacity)")
        c = float(c)
        if not math.isfinite(c) or c <= 0:
            raise InvalidInputError(f"link {u}-{v} has a non-positive capacity {c!r}")
        if weight == "latency":
            w = float(d["latency"])
            if w < 0:
                raise InvalidInputError(f"link {u}-{v} has a negative latency")
        else:
            w = 1.0
        iu, iv = index[u], index[v]
        src += [iu, iv]
        dst += [iv, iu]
        cap += [c, c]
        wt += [w, w]
    return TeNetwork(
        nodes=nodes,
        arc_src=np.array(src, dtype=np.int64),
        arc_dst=np.array(dst, dtype=np.int64),
        arc_cap=np.array(cap, dtype=float),
        arc_weight=np.array(wt, dtype=float),
        weight_name=weight,
    )


def demands_to_arrays(network: TeNetwork, demands: dict[tuple[str, str], float]) -> Demands:
    """Check and convert ``{(src, dst): volume}``; zero demands and self-pairs are dropped.

    Raises UnknownTopologyError for an endpoint not in the network, InvalidInputError for a
    negative volume and NoPathError when an endpoint pair is disconnected.
    """
    index = {n: i for i, n in enumerate(network.nodes)}
    src, dst, vol = [], [], []
    for (s, t), v in demands.items():
        s, t = str(s), str(t)
        if s not in index or t not in index:
            missing = s if s not in index else t
            raise UnknownTopologyError(f"demand {s}->{t}: node {missing!r} is not in the topology")
        v = float(v)
        if not math.isfinite(v) or v < 0:
            raise InvalidInputError(f"demand {s}->{t} has a negative or non-finite volume {v!r}")
        if v == 0 or s == t:
            continue
        src.append(index[s])
        dst.append(index[t])
        vol.append(v)
    out = Demands(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(vol, dtype=float))
    if len(out) == 0:
        raise InvalidInputError("no demand with a positive volume between distinct nodes")
    n = network.n_nodes
    adj = csr_matrix((np.ones(network.n_arcs), (network.arc_src, network.arc_dst)), shape=(n, n))
    _, label = connected_components(adj, directed=False)
    bad = np.nonzero(label[out.src] != label[out.dst])[0]
    if bad.size:
        i = int(bad[0])
        s, t = network.nodes[int(out.src[i])], network.nodes[int(out.dst[i])]
        raise NoPathError(
            f"demand {s}->{t} connects disconnected parts of the topology "
            f"({bad.size} disconnected demand pair(s))",
            bottleneck=f"{s}->{t}",
            available=0.0,
        )
    return out
