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
from pce.te.matrix import LP_METHODS, SOLVERS
from pce.te.network import Demands, TeNetwork, demands_to_arrays, network_from_graph
from pce.te.path_lp import OBJECTIVES
from pce.te.paths import PATH_METHODS, PathSet, Progress, compute_paths
from pce.te.pop import solve_partitioned
from pce.te.subproblem import SolveOptions, presolve_applies, solve_subproblem

FORMULATIONS = ("path", "edge")
# "full": the whole LP in one solve; "colgen": exact column generation (total-flow path LP only);
# "auto": colgen for an unpartitioned presolved total-flow path LP with HiGHS, full otherwise
LP_ALGORITHMS = ("auto", "full", "colgen")


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
    options = SolveOptions(formulation, objective, solver, lp_method, time_limit, lp_algorithm, presolve)
    if partitions > 1:
        combined = solve_partitioned(network, dem, paths, options, partitions, workers, seed, progress, split,
                                     capacity_split, repair)
        allocation, arc_load = combined.allocation, combined.arc_load
        timings.update(combined.timings)
        sizes = combined.sizes
    else:
        say(f"LP: building and solving ({formulation}, {objective})")
        sub = solve_subproblem(network, dem, paths, options, threads=workers, progress=progress)
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
