"""Solve a WAN TE instance end to end: arrays, candidate paths, LP(s), combined result.

``solve_te`` is the library entry point behind ``mlte pce te``. With ``partitions=K > 1`` it runs
the POP split of :mod:`pce.te.pop`; otherwise one LP. The result holds the per-demand allocation,
per-arc loads and the build/solve seconds of every stage.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from pce.errors import InvalidInputError
from pce.te.edge_lp import build_edge_lp
from pce.te.matrix import LP_METHODS, SOLVERS, LpSolution, solve
from pce.te.network import Demands, TeNetwork, demands_to_arrays, network_from_graph
from pce.te.path_lp import OBJECTIVES, build_path_lp
from pce.te.paths import PATH_METHODS, PathSet, Progress, compute_paths

FORMULATIONS = ("path", "edge")
# "full": the whole LP in one solve; "colgen": exact column generation (total-flow path LP only);
# "auto": colgen for an unpartitioned presolved total-flow path LP with HiGHS, full otherwise
LP_ALGORITHMS = ("auto", "full", "colgen")


def presolve_applies(presolve: bool, formulation: str, objective: str) -> bool:
    """The exact reductions of :mod:`pce.te.reduce` exist for the total-flow path LP only."""
    return presolve and formulation == "path" and objective == "total-flow"


def resolve_lp_algorithm(lp_algorithm: str, formulation: str, objective: str, solver: str, presolve: bool,
                         partitions: int) -> str:
    """What ``auto`` means for these options. On the presolved LP column generation was never much
    slower and sometimes much faster (AS7018 load 0.5: 13.2 s vs 10.2 s; load 1.0: 18.3 s vs 34.4 s;
    backbone/world: 178 s vs not done in 1,200 s; docs/performance/pce-te.md); POP partitions
    are small, so they keep the full LP."""
    if lp_algorithm != "auto":
        return lp_algorithm
    fits = presolve_applies(presolve, formulation, objective) and solver == "highs"
    return "colgen" if fits and partitions == 1 else "full"


@dataclass
class SubResult:
    """One LP solved: allocation of its demands, its arc loads, timings and sizes."""

    allocation: np.ndarray
    arc_load: np.ndarray
    build_seconds: float
    solve_seconds: float
    sizes: dict[str, int]
    lp_objective: float
    presolve_seconds: float = 0.0
    presolve: dict[str, Any] | None = None  # what the exact reduction removed (pce.te.reduce)
    dual_bound: float | None = None  # upper bound from the LP's duals; = objective at the optimum


@dataclass
class TeResult:
    """Combined TE solution; ``objective_value`` is recomputed from the combined allocation."""

    objective: str
    formulation: str
    objective_value: float
    network: TeNetwork
    demands: Demands
    allocation: np.ndarray
    arc_load: np.ndarray
    timings: dict[str, float]
    sizes: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    paths: PathSet | None = None
    certificate: dict[str, float] | None = None  # dual bound of an unpartitioned total-flow LP

    @property
    def utilization(self) -> np.ndarray:
        return self.arc_load / self.network.arc_cap

    @property
    def mlu(self) -> float:
        return float(self.utilization.max()) if self.arc_load.size else 0.0

    @property
    def total_flow(self) -> float:
        return float(self.allocation.sum())

    def summary(self) -> dict[str, Any]:
        """Everything but the per-demand and per-link lists."""
        total = float(self.demands.volume.sum())
        return {
            "objective": {"name": self.objective, "value": self.objective_value},
            "formulation": self.formulation,
            **self.settings,
            "mlu": self.mlu,
            # links loaded beyond their capacity: only the MLU objective routes all demand regardless
            "overloaded_links": int((self.utilization > 1.0 + 1e-9).sum()) if self.arc_load.size else 0,
            "total_flow": self.total_flow,
            "demands": {
                "count": len(self.demands),
                "total": total,
                "allocated": self.total_flow,
                "satisfied_fraction": self.total_flow / total if total else 0.0,
            },
            "timings": self.timings,
            "sizes": self.sizes,
            **({"certificate": self.certificate} if self.certificate is not None else {}),
        }

    def to_json(self, details: bool = True) -> dict[str, Any]:
        """The ``--json`` document: summary, per-demand allocation and per-link utilization."""
        out = self.summary()
        if not details:
            return out
        nodes = self.network.nodes
        out["allocations"] = [
            {"src": nodes[s], "dst": nodes[t], "demand": v, "allocated": a}
            for s, t, v, a in zip(self.demands.src.tolist(), self.demands.dst.tolist(),
                                  self.demands.volume.tolist(), self.allocation.tolist(), strict=True)
        ]
        net = self.network
        out["links"] = [
            {"src": nodes[u], "dst": nodes[v], "capacity": c, "load": ld, "utilization": ld / c}
            for u, v, c, ld in zip(net.arc_src.tolist(), net.arc_dst.tolist(), net.arc_cap.tolist(),
                                   self.arc_load.tolist(), strict=True)
        ]
        return out


def solve_subproblem(
    network: TeNetwork,
    demands: Demands,
    paths: PathSet | None,
    formulation: str,
    objective: str,
    capacity_factor: float | np.ndarray = 1.0,
    solver: str = "highs",
    lp_method: str = "auto",
    threads: int = 1,
    time_limit: float | None = None,
    lp_algorithm: str = "full",
    presolve: bool = True,
    progress: Progress | None = None,
) -> SubResult:
    """Build and solve one LP (the whole instance, or one POP partition with 1/K capacities).

    ``presolve``: for the total-flow path LP, first apply the exact reductions of
    :mod:`pce.te.reduce` (other LPs are solved as they are)."""
    if presolve_applies(presolve, formulation, objective):
        assert paths is not None
        return _solve_reduced(network, demands, paths, capacity_factor, solver, lp_method, threads,
                              time_limit, lp_algorithm, progress)
    if lp_algorithm == "colgen":
        return _solve_colgen(network, demands, paths, objective, formulation, capacity_factor, solver,
                             threads, time_limit)
    model, sol, build_s, solve_s = _build_and_solve(network, demands, paths, formulation, objective,
                                                     capacity_factor, solver, lp_method, threads, time_limit)
    return SubResult(
        allocation=model.allocation(sol.x),
        arc_load=model.arc_load(sol.x, network.n_arcs),
        build_seconds=build_s,
        solve_seconds=solve_s,
        sizes=model.lp.sizes(),
        lp_objective=sol.objective,
    )


def _build_and_solve(network: TeNetwork, demands: Demands, paths: PathSet | None, formulation: str,
                     objective: str, capacity_factor: float | np.ndarray, solver: str, lp_method: str,
                     threads: int, time_limit: float | None) -> tuple[Any, LpSolution, float, float]:
    """The whole LP in one solve: (model, solution, build seconds, solve seconds)."""
    t0 = time.perf_counter()
    if formulation == "path":
        assert paths is not None
        model: Any = build_path_lp(network, demands, paths, objective, capacity_factor)
    else:
        model = build_edge_lp(network, demands, objective, capacity_factor)
    t1 = time.perf_counter()
    kwargs: dict[str, Any] = {"time_limit": time_limit}
    if solver == "highs":
        kwargs.update(method=lp_method, threads=threads)
    sol = solve(model.lp, solver, **kwargs)
    return model, sol, t1 - t0, time.perf_counter() - t1


def _solve_reduced(network: TeNetwork, demands: Demands, paths: PathSet, capacity_factor: float | np.ndarray,
                   solver: str, lp_method: str, threads: int, time_limit: float | None,
                   lp_algorithm: str, progress: Progress | None = None) -> SubResult:
    """Total-flow path LP through :func:`pce.te.reduce.reduce_total_flow`: solve the reduced
    instance, map its flows back to every path, and bound the optimum from the duals."""
    from pce.te.reduce import dual_bound, reduce_total_flow

    t0 = time.perf_counter()
    red = reduce_total_flow(network, demands, paths, capacity_factor)
    presolve_s = time.perf_counter() - t0
    if progress:
        p = red.stats
        progress(f"presolve: {p['demands']} demands -> {p['commodities']} commodities "
                 f"({p['demands_fixed']} routed in full), {p['arcs']} -> {p['arcs_kept']} arcs, "
                 f"{p['paths']} -> {p['reduced_paths']} paths in {presolve_s:.1f}s; solving the reduced LP")
    price: np.ndarray | None = None
    if len(red.demands) == 0:  # every demand routed in full over arcs that cannot fill up
        reduced_flow = np.zeros(0)
        build_s = solve_s = 0.0
        sizes = {"variables": 0, "constraints": 0, "nonzeros": 0}
        price = np.zeros(0)
    elif lp_algorithm == "colgen":
        sub = _solve_colgen(red.network, red.demands, red.paths, "total-flow", "path", 1.0, solver,
                            threads, time_limit)
        reduced_flow, build_s, solve_s, sizes = sub.path_flow, 0.0, sub.solve_seconds, sub.sizes
        price = sub.arc_price
    else:
        model, sol, build_s, solve_s = _build_and_solve(red.network, red.demands, red.paths, "path",
                                                        "total-flow", 1.0, solver, lp_method, threads, time_limit)
        reduced_flow = model.path_flows(sol.x)
        sizes = model.lp.sizes()
        if sol.row_dual is not None:
            price = np.maximum(0.0, -sol.row_dual[len(red.demands):])
    flow = red.expand(reduced_flow)
    allocation = paths.demand_totals(flow, len(demands))
    arc_load = paths.arc_totals(flow, network.n_arcs)
    bound = None
    if price is not None:
        bound = dual_bound(network, demands, paths, red.arc_price(price, network.n_arcs), capacity_factor)
    return SubResult(
        allocation=allocation,
        arc_load=arc_load,
        build_seconds=build_s,
        solve_seconds=solve_s,
        sizes=dict(sizes),
        lp_objective=-float(flow.sum()),
        presolve_seconds=presolve_s,
        presolve=red.stats,
        dual_bound=bound,
    )


@dataclass
class _ColgenResult(SubResult):
    """A colgen SubResult that also keeps the per-path flows and final arc prices."""

    path_flow: np.ndarray = field(default_factory=lambda: np.zeros(0))
    arc_price: np.ndarray | None = None


def _solve_colgen(network: TeNetwork, demands: Demands, paths: PathSet | None, objective: str,
                  formulation: str, capacity_factor: float | np.ndarray, solver: str, threads: int,
                  time_limit: float | None) -> _ColgenResult:
    """The total-flow path LP by column generation (:mod:`pce.te.colgen`); same optimum as "full"."""
    from pce.te.colgen import solve_total_flow_colgen

    if formulation != "path" or objective != "total-flow" or solver != "highs":
        raise InvalidInputError("--lp-algorithm colgen needs the path formulation, the total-flow "
                                "objective and the highs solver")
    assert paths is not None
    sol = solve_total_flow_colgen(network, demands, paths, capacity_factor, threads=threads,
                                  time_limit=time_limit)
    return _ColgenResult(
        path_flow=sol.path_flow,
        arc_price=sol.arc_price,
        allocation=paths.demand_totals(sol.path_flow, len(demands)),
        arc_load=paths.arc_totals(sol.path_flow, network.n_arcs),
        build_seconds=0.0,
        solve_seconds=sol.seconds,
        sizes={**sol.sizes, "colgen_rounds": sol.rounds},
        lp_objective=-sol.objective,
    )


def combined_objective(objective: str, network: TeNetwork, allocation: np.ndarray, arc_load: np.ndarray) -> float:
    if objective == "mlu":
        return float((arc_load / network.arc_cap).max())
    return float(allocation.sum())


def check_options(objective: str, formulation: str, k: int, partitions: int, solver: str,
                  lp_method: str, path_method: str, workers: int, lp_algorithm: str = "auto") -> None:
    """InvalidInputError for any unknown or out-of-range option."""
    checks = [
        (objective in OBJECTIVES, f"unknown objective {objective!r} ({', '.join(OBJECTIVES)})"),
        (formulation in FORMULATIONS, f"unknown formulation {formulation!r} ({', '.join(FORMULATIONS)})"),
        (k >= 1, f"--paths must be at least 1, got {k}"),
        (partitions >= 1, f"--partitions must be at least 1, got {partitions}"),
        (solver in SOLVERS, f"unknown solver {solver!r} ({', '.join(SOLVERS)})"),
        (lp_method in LP_METHODS, f"unknown LP method {lp_method!r} ({', '.join(LP_METHODS)})"),
        (path_method in PATH_METHODS, f"unknown path method {path_method!r} ({', '.join(PATH_METHODS)})"),
        (workers >= 1, f"--workers must be at least 1, got {workers}"),
        (lp_algorithm in LP_ALGORITHMS, f"unknown LP algorithm {lp_algorithm!r} ({', '.join(LP_ALGORITHMS)})"),
        (lp_algorithm != "colgen" or (formulation == "path" and objective == "total-flow" and solver == "highs"),
         "--lp-algorithm colgen needs the path formulation, the total-flow objective and the highs solver"),
    ]
    for ok, message in checks:
        if not ok:
            raise InvalidInputError(message)


def solve_te(
    graph: nx.Graph,
    demands: dict[tuple[str, str], float],
    objective: str = "total-flow",
    formulation: str = "path",
    k: int = 4,
    partitions: int = 1,
    solver: str = "highs",
    lp_method: str = "auto",
    path_method: str = "ksp",
    weight: str = "auto",
    workers: int = 2,
    seed: int = 0,
    time_limit: float | None = None,
    progress: Progress | None = None,
    split: float = 0.0,
    lp_algorithm: str = "auto",
    capacity_split: str = "uniform",
    presolve: bool = True,
    repair: bool | None = None,
) -> TeResult:
    """Solve the WAN TE LP on ``graph`` (edge attribute ``capacity``) for ``demands``.

    ``formulation``: ``path`` (``k`` paths per demand by ``path_method``) or ``edge`` (exact).
    ``partitions`` > 1: POP — demands split at random (``seed``) into that many groups, each solved
    with 1/K of every capacity in ``workers`` processes, allocations summed; ``split`` is POP's
    client-splitting fraction (extra demand pieces, relative to the number of demands).
    ``lp_algorithm``: ``full`` (one LP), ``colgen`` (exact column generation, total-flow path LP
    only; applies to every POP partition too) or ``auto`` (:func:`resolve_lp_algorithm`). ``capacity_split``: POP's 1/K per partition
    (``uniform``) or shares proportional to each partition's expected load per arc (``demand``).
    ``presolve``: exact reductions of the total-flow path LP first (:mod:`pce.te.reduce`; every
    POP partition too); an unpartitioned result then carries a dual-bound ``certificate``.
    ``repair`` (POP, total-flow): route the unmet demand over the capacity the partitions left
    (:mod:`pce.te.pop`); ``None`` = on for the total-flow objective.
    """
    from pce.te.pop import solve_partitioned

    check_options(objective, formulation, k, partitions, solver, lp_method, path_method, workers, lp_algorithm)
    if repair is None:
        repair = objective == "total-flow"
    elif repair and objective != "total-flow":
        raise InvalidInputError("POP repair needs the total-flow objective (MLU routes every demand in full)")
    repair = repair and partitions > 1
    lp_algorithm = resolve_lp_algorithm(lp_algorithm, formulation, objective, solver, presolve, partitions)
    say = progress or (lambda _msg: None)
    t_start = time.perf_counter()
    network = network_from_graph(graph, weight)
    dem = demands_to_arrays(network, demands)
    say(f"instance: {network.n_nodes} nodes, {network.n_arcs} arcs, {len(dem)} demands")
    timings: dict[str, float] = {"prepare_s": time.perf_counter() - t_start}
    paths = None
    certificate: dict[str, float] | None = None
    if formulation == "path":
        t0 = time.perf_counter()
        paths = compute_paths(network, dem, k, path_method, workers=workers, progress=progress)
        timings["paths_s"] = time.perf_counter() - t0
        say(f"paths: {paths.n_paths} paths ({paths.arcs.size} arc entries) in {timings['paths_s']:.1f}s")
    settings: dict[str, Any] = {
        "paths": k if formulation == "path" else None,
        "path_method": path_method if formulation == "path" else None,
        "path_weight": network.weight_name if formulation == "path" else None,
        "partitions": partitions,
        "split": split if partitions > 1 else None,
        "capacity_split": capacity_split if partitions > 1 else None,
        "repair": repair if partitions > 1 else None,
        "solver": solver,
        "lp_method": lp_method,
        "lp_algorithm": lp_algorithm,
        "presolve": presolve_applies(presolve, formulation, objective),
        "workers": workers,
        "seed": seed,
    }
    if partitions > 1:
        combined = solve_partitioned(network, dem, paths, formulation, objective, partitions, solver,
                                     lp_method, workers, seed, time_limit, progress, split, lp_algorithm,
                                     capacity_split, presolve, repair)
        allocation, arc_load = combined.allocation, combined.arc_load
        timings.update(combined.timings)
        sizes = combined.sizes
    else:
        say(f"LP: building and solving ({formulation}, {objective})")
        sub = solve_subproblem(network, dem, paths, formulation, objective, 1.0, solver, lp_method,
                               threads=workers, time_limit=time_limit, lp_algorithm=lp_algorithm,
                               presolve=presolve, progress=progress)
        allocation, arc_load = sub.allocation, sub.arc_load
        timings.update(presolve_s=sub.presolve_seconds, build_s=sub.build_seconds, solve_s=sub.solve_seconds,
                       lp_s=sub.presolve_seconds + sub.build_seconds + sub.solve_seconds)
        sizes = dict(sub.sizes)
        if sub.presolve is not None:
            sizes["presolve"] = sub.presolve
        say(f"LP: built in {sub.build_seconds:.1f}s, solved in {sub.solve_seconds:.1f}s")
        if sub.dual_bound is not None:
            routed = float(allocation.sum())
            certificate = {"primal": routed, "dual_bound": sub.dual_bound,
                           "relative_gap": (sub.dual_bound - routed) / max(abs(routed), 1e-12)}
    timings["total_s"] = time.perf_counter() - t_start
    value = combined_objective(objective, network, allocation, arc_load)
    return TeResult(objective=objective, formulation=formulation, objective_value=value, network=network,
                    demands=dem, allocation=allocation, arc_load=arc_load, timings=timings, sizes=sizes,
                    settings=settings, paths=paths, certificate=certificate)
