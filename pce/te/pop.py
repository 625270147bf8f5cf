"""POP (Narayanan et al., SOSP'21): split the demands at random into K groups, give each group's
LP 1/K of every link's capacity, solve the K LPs independently and in parallel, add the results.

The combined allocation is feasible by construction: each group uses at most c/K on every arc,
so K groups use at most c. A demand much larger than c/K cannot get its share in one group, so
POP's *client splitting* is available: the demands are cut into more, smaller pieces (repeatedly,
the demand whose pieces are largest gets one more piece, until there are ``(1 + split) *
#demands`` pieces); pieces go to groups at random, pieces of one demand that land in the same
group are merged again, and a demand's allocation is the sum over the groups. The sub-problems run in forked worker processes (the instance and the
paths are inherited, not pickled); each HiGHS instance runs single-threaded.

*Repair* (total-flow only, on by default; not in the POP paper): the partitions rarely use all
of their 1/K on an arc while another partition is short there, so the combined allocation leaves
capacity idle that unmet demand could use. One more LP routes the unmet part of every demand over
what is left of every arc (paths through a full arc dropped). It starts from a feasible
allocation and only adds flow, so the result stays feasible and never gets worse; it is small
(on CAIDA AS7018: 19,040 of 352,242 demands, under 0.6 s) and cut POP-16's gap there from 24.3% to
10.2% (docs/performance/pce-te.md).
"""
from __future__ import annotations

import heapq
import multiprocessing
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pce.errors import InvalidInputError
from pce.te.network import Demands, TeNetwork
from pce.te.paths import PathSet, Progress
from pce.te.subproblem import SolveOptions, SubResult, solve_subproblem


@dataclass
class Residual:
    """What POP's combined allocation leaves: the unmet demand on the remaining capacity."""

    network: TeNetwork  # same arcs, capacity = what is left (>= 0)
    demands: Demands  # the demands with unmet volume (and a usable path), volume = the unmet part
    index: np.ndarray  # their indices in the original demands
    paths: PathSet | None  # their candidate paths through arcs with capacity left (path formulation)


def residual_instance(network: TeNetwork, demands: Demands, paths: PathSet | None, allocation: np.ndarray,
                      arc_load: np.ndarray, tol: float = 1e-9) -> Residual:
    """The instance the repair LP solves. An arc counts as full below ``tol`` × its capacity
    and a demand as met below ``tol`` × its volume, so round-off does not create dust demands."""
    cap = np.maximum(network.arc_cap - arc_load, 0.0)
    cap[cap <= tol * network.arc_cap] = 0.0
    unmet = np.maximum(demands.volume - allocation, 0.0)
    live = unmet > tol * np.maximum(demands.volume, 1e-300)
    sub_paths = None
    if paths is not None:  # keep the paths through arcs with capacity left; drop demands with none
        open_path = np.bincount(paths.owner(), weights=(cap[paths.arcs] == 0.0).astype(float),
                                minlength=paths.n_paths) == 0
        live &= np.bincount(paths.demand[open_path], minlength=len(demands)) > 0
        remap = np.full(len(demands), -1, dtype=np.int64)
        remap[live] = np.arange(int(live.sum()))
        keep = np.nonzero(open_path & live[paths.demand])[0]
        keep = keep[np.argsort(remap[paths.demand[keep]], kind="stable")]
        ptr, idx = paths.entries(keep)
        sub_paths = PathSet(remap[paths.demand[keep]], ptr, paths.arcs[idx])
    index = np.nonzero(live)[0]
    rnet = TeNetwork(network.nodes, network.arc_src, network.arc_dst, cap, network.arc_weight,
                     network.weight_name)
    return Residual(rnet, Demands(demands.src[index], demands.dst[index], unmet[index]), index, sub_paths)


@dataclass
class Combined:
    allocation: np.ndarray
    arc_load: np.ndarray
    timings: dict[str, float]
    sizes: dict[str, Any]


def partition_demands(n_demands: int, partitions: int, seed: int = 0) -> list[np.ndarray]:
    """Indices of the demands in each of ``partitions`` random groups of (near) equal size."""
    if partitions < 1:
        raise InvalidInputError(f"partitions must be at least 1, got {partitions}")
    if partitions > n_demands:
        raise InvalidInputError(f"{partitions} partitions for only {n_demands} demands")
    perm = np.random.default_rng(seed).permutation(n_demands)
    return [np.sort(g) for g in np.array_split(perm, partitions)]


def split_clients(volume: np.ndarray, split: float) -> np.ndarray:
    """Number of pieces per demand: ``round(split * n)`` extra pieces, each given to the demand
    whose current piece (volume / pieces) is the largest."""
    if split < 0:
        raise InvalidInputError(f"split fraction must be >= 0, got {split}")
    pieces = np.ones(volume.size, dtype=np.int64)
    extra = int(round(split * volume.size))
    if extra == 0:
        return pieces
    heap = [(-float(v), i) for i, v in enumerate(volume.tolist())]
    heapq.heapify(heap)
    for _ in range(extra):
        _, i = heapq.heappop(heap)
        pieces[i] += 1
        heapq.heappush(heap, (-float(volume[i]) / pieces[i], i))
    return pieces


def partition_clients(
    volume: np.ndarray, partitions: int, seed: int = 0, split: float = 0.0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group: (demand indices, volume of those demands in the group), after client splitting."""
    pieces = split_clients(volume, split)
    owner = np.repeat(np.arange(volume.size), pieces)
    piece_volume = np.repeat(volume / pieces, pieces)
    groups = []
    for g in partition_demands(owner.size, partitions, seed):
        idx, inverse = np.unique(owner[g], return_inverse=True)
        groups.append((idx, np.bincount(inverse, weights=piece_volume[g], minlength=idx.size)))
    return groups


CAPACITY_SPLITS = ("uniform", "demand")


def capacity_shares(network: TeNetwork, paths: PathSet, groups: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """Per group, the fraction of every arc's capacity it gets, proportional to the group's
    expected load on that arc (each demand's volume spread evenly over its candidate paths);
    1/K on arcs no candidate path uses. The shares of an arc sum to 1, so the combined
    allocation stays feasible. (A deviation from POP, which gives every group 1/K.)"""
    k = len(groups)
    n_paths_of = np.bincount(paths.demand, minlength=int(paths.demand.max(initial=-1)) + 1)
    lens = paths.lengths()
    loads = []
    for idx, volume in groups:
        per_demand = np.zeros(n_paths_of.size)
        per_demand[idx] = volume / np.maximum(n_paths_of[idx], 1)
        weights = np.repeat(per_demand[paths.demand], lens)
        loads.append(np.bincount(paths.arcs, weights=weights, minlength=network.n_arcs))
    total = np.sum(loads, axis=0)
    used = total > 0
    shares = []
    for load in loads:
        share = np.full(network.n_arcs, 1.0 / k)
        share[used] = load[used] / total[used]
        shares.append(share)
    return shares


@dataclass(frozen=True)
class _Shared:
    """What every partition's worker needs besides its own demands (inherited through fork)."""

    network: TeNetwork
    demands: Demands
    paths: PathSet | None
    options: SolveOptions


_STATE: _Shared | None = None  # inherited by forked workers


def _worker_init() -> None:
    """HiGHS keeps a global thread scheduler; one inherited through fork is unusable (every solve
    ends "Not Set"), so each worker starts its own."""
    from pce.highs import reset_scheduler

    reset_scheduler()


def _solve_group(group: tuple[np.ndarray, np.ndarray, float | np.ndarray]) -> tuple[np.ndarray, SubResult]:
    assert _STATE is not None
    st = _STATE
    idx, volume, factor = group
    sub_paths = st.paths.subset(idx) if st.paths is not None else None
    sub_demands = Demands(st.demands.src[idx], st.demands.dst[idx], volume)
    return idx, solve_subproblem(st.network, sub_demands, sub_paths, st.options, factor, threads=1)


def solve_partitioned(
    network: TeNetwork,
    demands: Demands,
    paths: PathSet | None,
    options: SolveOptions,
    partitions: int,
    workers: int = 2,
    seed: int = 0,
    progress: Progress | None = None,
    split: float = 0.0,
    capacity_split: str = "uniform",
    repair: bool = False,
) -> Combined:
    """Solve the K sub-problems (``workers`` at a time) and combine them. ``capacity_split``:
    ``uniform`` (POP: 1/K of every arc) or ``demand`` (see :func:`capacity_shares`).
    ``repair``: then route the unmet demand over the capacity left (total-flow only)."""
    global _STATE
    if repair and options.objective != "total-flow":
        raise InvalidInputError("POP repair needs the total-flow objective (MLU routes every demand in full)")
    if partitions > len(demands):
        raise InvalidInputError(f"{partitions} partitions for only {len(demands)} demands")
    if capacity_split not in CAPACITY_SPLITS:
        raise InvalidInputError(f"unknown capacity split {capacity_split!r} ({', '.join(CAPACITY_SPLITS)})")
    clients = partition_clients(demands.volume, partitions, seed, split)
    if capacity_split == "demand":
        if paths is None:
            raise InvalidInputError("--capacity-split demand needs the path formulation")
        factors: list[float | np.ndarray] = list(capacity_shares(network, paths, clients))
    else:
        factors = [1.0 / partitions] * partitions
    groups = [(idx, vol, f) for (idx, vol), f in zip(clients, factors, strict=True)]
    allocation = np.zeros(len(demands))
    arc_load = np.zeros(network.n_arcs)
    subs: list[SubResult] = []
    t0 = time.perf_counter()
    _STATE = _Shared(network, demands, paths, options)

    def collect(idx: np.ndarray, sub: SubResult) -> None:
        allocation[idx] += sub.allocation
        arc_load[:] += sub.arc_load
        subs.append(sub)
        if progress:
            progress(f"POP: {len(subs)}/{partitions} partitions solved ({time.perf_counter() - t0:.1f}s)")

    try:
        if workers > 1:
            with multiprocessing.get_context("fork").Pool(min(workers, partitions), initializer=_worker_init) as pool:
                for idx, sub in pool.imap_unordered(_solve_group, groups):
                    collect(idx, sub)
        else:
            for g in groups:
                collect(*_solve_group(g))
    finally:
        _STATE = None
    pop_wall = time.perf_counter() - t0
    repair_sizes = None
    if repair:
        repair_sizes = _repair(network, demands, paths, options, allocation, arc_load, workers, progress)
    wall = time.perf_counter() - t0
    keys = ("variables", "constraints", "nonzeros")  # colgen: the final restricted master's sizes
    return Combined(
        allocation=allocation,
        arc_load=arc_load,
        timings={
            "lp_s": wall,  # wall clock of all partitions (in parallel) and the repair LP
            "pop_s": pop_wall,
            **({"repair_s": wall - pop_wall} if repair else {}),
            "presolve_s_sum": float(sum(s.presolve_seconds for s in subs)),
            "build_s_sum": float(sum(s.build_seconds for s in subs)),
            "solve_s_sum": float(sum(s.solve_seconds for s in subs)),
            "solve_s_max": float(max(s.solve_seconds for s in subs)),
        },
        sizes={
            **{k: int(sum(s.sizes[k] for s in subs)) for k in keys},
            "largest_partition": {k: int(max(s.sizes[k] for s in subs)) for k in keys},
            **({"repair": repair_sizes} if repair_sizes is not None else {}),
        },
    )


def _repair(network: TeNetwork, demands: Demands, paths: PathSet | None, options: SolveOptions,
            allocation: np.ndarray, arc_load: np.ndarray, workers: int, progress: Progress | None) -> dict[str, Any]:
    """Route the unmet demand over the capacity left, adding to ``allocation`` and ``arc_load`` in place."""
    before = float(allocation.sum())
    res = residual_instance(network, demands, paths, allocation, arc_load)
    out: dict[str, Any] = {"demands": len(res.demands),
                           "paths": res.paths.n_paths if res.paths is not None else None,
                           "variables": 0, "constraints": 0, "nonzeros": 0, "before": before, "added": 0.0}
    if len(res.demands) == 0:
        return out
    repair_options = replace(options, objective="total-flow", lp_algorithm="full")
    sub = solve_subproblem(res.network, res.demands, res.paths, repair_options, threads=workers)
    allocation[res.index] += sub.allocation
    arc_load += sub.arc_load
    out.update({k: int(sub.sizes[k]) for k in ("variables", "constraints", "nonzeros")},
               added=float(allocation.sum()) - before)
    if progress:
        progress(f"POP repair: {len(res.demands)} demands with unmet volume, +{out['added']:.6g} routed")
    return out
