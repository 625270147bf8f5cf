"""Candidate paths per demand for the path formulation, stored flat (CSR-like) for matrix building.

Three methods:

* ``ksp`` (default, scales to 10^5-10^6 demands): one label-setting search per *source* gives up
  to k shortest simple paths to every destination at once. Every node keeps the first k labels
  (partial paths) popped from the heap and a label is only extended to nodes not already on it,
  so all paths are loop-free. It equals Yen's k shortest simple paths whenever k is at least the
  number of simple paths to each node; otherwise it can miss a simple path whose prefix was
  pruned at an intermediate node (then it returns the next shortest ones instead).
* ``yen``: exact k shortest simple paths per demand (networkx ``shortest_simple_paths``); small
  instances only.
* ``disjoint``: up to k link-disjoint paths per demand: the shortest path, then the shortest path
  avoiding the links already used, and so on (POP's "k edge-disjoint paths"; greedy, so it may
  find fewer than the maximum number of disjoint paths).
"""
from __future__ import annotations

import heapq
import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx
import numpy as np

from pce.errors import InvalidInputError
from pce.te.network import Demands, TeNetwork

PATH_METHODS = ("ksp", "yen", "disjoint")

Progress = Callable[[str], None]


@dataclass
class PathSet:
    """Paths of all demands: path ``p`` serves demand ``demand[p]`` and uses the arcs
    ``arcs[ptr[p]:ptr[p + 1]]`` (in order from source to destination)."""

    demand: np.ndarray
    ptr: np.ndarray
    arcs: np.ndarray

    @property
    def n_paths(self) -> int:
        return int(self.demand.size)

    def path(self, p: int) -> np.ndarray:
        return self.arcs[self.ptr[p]:self.ptr[p + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.ptr)

    def owner(self) -> np.ndarray:
        """The path of every entry of ``arcs``."""
        return np.repeat(np.arange(self.n_paths, dtype=np.int64), self.lengths())

    def entries(self, paths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CSR view of the paths ``paths``: ``(ptr, idx)`` with ``arcs[idx[ptr[i]:ptr[i + 1]]]`` the
        arcs of ``paths[i]``."""
        lens = self.lengths()[paths]
        ptr = np.zeros(paths.size + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        # index = start of the path + offset within the path
        return ptr, np.repeat(self.ptr[paths] - ptr[:-1], lens) + np.arange(ptr[-1])

    def path_cost(self, arc_cost: np.ndarray) -> np.ndarray:
        """Sum of ``arc_cost`` over the arcs of every path."""
        return np.bincount(self.owner(), weights=arc_cost[self.arcs], minlength=self.n_paths)

    def demand_totals(self, flow: np.ndarray, n_demands: int) -> np.ndarray:
        """Per demand, the sum of ``flow`` (one value per path) over its paths."""
        return np.bincount(self.demand, weights=flow, minlength=n_demands)

    def arc_totals(self, flow: np.ndarray, n_arcs: int) -> np.ndarray:
        """Per arc, the sum of ``flow`` (one value per path) over the paths through it."""
        return np.bincount(self.arcs, weights=np.repeat(flow, self.lengths()), minlength=n_arcs)

    def subset(self, demand_idx: np.ndarray) -> PathSet:
        """The paths of the demands ``demand_idx``, renumbered 0..len(demand_idx)-1 in that order."""
        remap = np.full(int(self.demand.max(initial=-1)) + 1, -1, dtype=np.int64)
        remap[demand_idx] = np.arange(demand_idx.size)
        keep = np.nonzero(remap[self.demand] >= 0)[0]
        new_demand = remap[self.demand[keep]]
        order = np.argsort(new_demand, kind="stable")
        ptr, idx = self.entries(keep[order])
        return PathSet(new_demand[order], ptr, self.arcs[idx])


def _from_lists(demand: list[int], paths: list[list[int]]) -> PathSet:
    lens = np.fromiter((len(p) for p in paths), dtype=np.int64, count=len(paths))
    ptr = np.zeros(len(paths) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    arcs = np.fromiter((a for p in paths for a in p), dtype=np.int64, count=int(ptr[-1]))
    return PathSet(np.array(demand, dtype=np.int64), ptr, arcs)


def _concat(parts: list[PathSet]) -> PathSet:
    parts = [p for p in parts if p.n_paths]
    if not parts:
        return PathSet(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64))
    offsets = np.cumsum([0] + [int(p.ptr[-1]) for p in parts[:-1]])
    ptr = np.concatenate([parts[0].ptr[:1]] + [p.ptr[1:] + o for p, o in zip(parts, offsets, strict=True)])
    return PathSet(np.concatenate([p.demand for p in parts]), ptr, np.concatenate([p.arcs for p in parts]))


# ------------------------------------------------------------------------------------ ksp (per source)

def _ksp_from_source(
    adj: list[list[tuple[int, int, float]]], source: int, targets: set[int], k: int
) -> tuple[list[list[int]], list[int], dict[int, list[int]]]:
    """Label-setting k shortest simple paths from ``source``; returns label arrays and, per target,
    its accepted labels in increasing cost."""
    n = len(adj)
    lparent: list[int] = [-1]
    larc: list[int] = [-1]
    lmask: list[int] = [1 << source]
    lnode: list[int] = [source]
    count = [0] * n
    accepted: dict[int, list[int]] = {t: [] for t in targets}
    remaining = len(targets)
    heap: list[tuple[float, int]] = [(0.0, 0)]
    pop, push = heapq.heappop, heapq.heappush
    while heap and remaining:
        cost, lab = pop(heap)
        v = lnode[lab]
        if count[v] >= k:
            continue
        count[v] += 1
        if v in accepted:
            accepted[v].append(lab)
            if count[v] == k:
                remaining -= 1
        mask = lmask[lab]
        for w, a, wt in adj[v]:
            if count[w] >= k or (mask >> w) & 1:
                continue
            lparent.append(lab)
            larc.append(a)
            lmask.append(mask | (1 << w))
            lnode.append(w)
            push(heap, (cost + wt, len(lnode) - 1))
    return [lparent, larc], lnode, accepted


def _trace(lparent: np.ndarray, larc: np.ndarray, final: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Arcs of the label chains ending at ``final`` (source first): (ptr, arcs)."""
    cols = []
    cur = final.copy()
    while True:
        a = larc[cur]
        live = a >= 0
        if not live.any():
            break
        cols.append(np.where(live, a, -1))
        cur = np.where(live, lparent[cur], cur)
    if not cols:
        return np.zeros(final.size + 1, np.int64), np.zeros(0, np.int64)
    m = np.stack(cols, axis=1)[:, ::-1]  # each row: -1 padding, then arcs source -> target
    lens = (m >= 0).sum(axis=1)
    ptr = np.zeros(final.size + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    return ptr, m[m >= 0]


def _ksp_chunk(network: TeNetwork, demands: Demands, sources: list[int], k: int) -> PathSet:
    adj = network.out_arcs()
    order = np.argsort(demands.src, kind="stable")
    src_sorted = demands.src[order]
    parts = []
    for s in sources:
        lo, hi = np.searchsorted(src_sorted, [s, s + 1])
        dem_ids = order[lo:hi]
        targets = set(demands.dst[dem_ids].tolist())
        (lparent, larc), _, accepted = _ksp_from_source(adj, s, targets, k)
        final, dem = [], []
        for d, t in zip(dem_ids.tolist(), demands.dst[dem_ids].tolist(), strict=True):
            labs = accepted[t]
            final += labs
            dem += [d] * len(labs)
        ptr, arcs = _trace(np.array(lparent, np.int64), np.array(larc, np.int64), np.array(final, np.int64))
        parts.append(PathSet(np.array(dem, np.int64), ptr, arcs))
    return _concat(parts)


# ------------------------------------------------------------------------------------ yen / disjoint

def _to_digraph(network: TeNetwork) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(network.n_nodes))
    for a in range(network.n_arcs):
        g.add_edge(int(network.arc_src[a]), int(network.arc_dst[a]), arc=a, w=float(network.arc_weight[a]))
    return g


def _node_path_to_arcs(g: nx.DiGraph, path: list[int]) -> list[int]:
    return [g.edges[u, v]["arc"] for u, v in zip(path[:-1], path[1:], strict=True)]


def _yen_chunk(network: TeNetwork, demands: Demands, ids: list[int], k: int) -> PathSet:
    g = _to_digraph(network)
    dem, paths = [], []
    for d in ids:
        gen = nx.shortest_simple_paths(g, int(demands.src[d]), int(demands.dst[d]), weight="w")
        for _, p in zip(range(k), gen, strict=False):
            dem.append(d)
            paths.append(_node_path_to_arcs(g, p))
    return _from_lists(dem, paths)


def _disjoint_chunk(network: TeNetwork, demands: Demands, ids: list[int], k: int) -> PathSet:
    g = _to_digraph(network)
    reverse = {a: (a ^ 1) for a in range(network.n_arcs)}  # arcs 2i and 2i+1 are one link
    dem, paths = [], []
    for d in ids:
        s, t = int(demands.src[d]), int(demands.dst[d])
        banned: set[int] = set()

        def weight(u: int, v: int, attrs: dict, banned: set[int] = banned) -> float | None:
            return None if attrs["arc"] in banned else attrs["w"]

        for _ in range(k):
            try:
                p = nx.dijkstra_path(g, s, t, weight=weight)
            except nx.NetworkXNoPath:
                break
            arcs = _node_path_to_arcs(g, p)
            dem.append(d)
            paths.append(arcs)
            banned.update(arcs)
            banned.update(reverse[a] for a in arcs)
    return _from_lists(dem, paths)


# ------------------------------------------------------------------------------------ entry point

_WORK: tuple | None = None  # (network, demands, k, method) shared with forked workers


def _run_chunk(chunk: list[int]) -> PathSet:
    assert _WORK is not None
    network, demands, k, method = _WORK
    if method == "ksp":
        return _ksp_chunk(network, demands, chunk, k)
    if method == "yen":
        return _yen_chunk(network, demands, chunk, k)
    return _disjoint_chunk(network, demands, chunk, k)


def compute_paths(
    network: TeNetwork,
    demands: Demands,
    k: int,
    method: str = "ksp",
    workers: int = 1,
    progress: Progress | None = None,
) -> PathSet:
    """Up to ``k`` paths per demand, sorted by demand then cost; ``workers`` processes (fork)."""
    global _WORK
    if k < 1:
        raise InvalidInputError(f"number of paths must be at least 1, got {k}")
    if method not in PATH_METHODS:
        raise InvalidInputError(f"unknown path method {method!r} ({', '.join(PATH_METHODS)})")
    t0 = time.perf_counter()
    if method == "ksp":
        units = sorted(set(demands.src.tolist()))  # one search per source
    else:
        units = list(range(len(demands)))
    n_chunks = max(1, min(len(units), workers * 8))
    chunks = [units[i::n_chunks] for i in range(n_chunks)]
    _WORK = (network, demands, k, method)
    try:
        if workers > 1 and len(chunks) > 1:
            ctx = multiprocessing.get_context("fork")
            parts = []
            with ctx.Pool(workers) as pool:
                for i, part in enumerate(pool.imap_unordered(_run_chunk, chunks)):
                    parts.append(part)
                    if progress:
                        progress(f"paths: {i + 1}/{len(chunks)} chunks ({time.perf_counter() - t0:.1f}s)")
        else:
            parts = [_run_chunk(c) for c in chunks]
    finally:
        _WORK = None
    result = _concat(parts)
    order = np.argsort(result.demand, kind="stable")  # demand order; paths of one demand by cost
    if not np.array_equal(order, np.arange(order.size)):
        ps = PathSet(result.demand, result.ptr, result.arcs)
        result = ps.subset(np.arange(len(demands)))
    return result
