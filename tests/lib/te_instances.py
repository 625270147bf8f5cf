"""Random instances shared by the TE LP tests (pce.te)."""
from __future__ import annotations

import networkx as nx
import numpy as np


def connected_gnp(rng: np.random.Generator, n: int, p: float) -> nx.Graph:
    """A connected G(n, p) graph (redrawn until connected) with nodes named ``n0``, ``n1``, ..."""
    while True:
        g = nx.gnp_random_graph(n, p, seed=int(rng.integers(1 << 30)))
        if nx.is_connected(g):
            break
    return nx.relabel_nodes(g, {i: f"n{i}" for i in g.nodes})
