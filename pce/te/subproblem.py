"""One TE linear program built and solved: the whole instance, one POP partition or POP's repair.

Both :mod:`pce.te.solve` (the unpartitioned LP) and :mod:`pce.te.pop` (its partitions and the
repair LP) call :func:`solve_subproblem`; the options every such LP shares travel as one
:class:`SolveOptions` value, so neither module needs the other to solve.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pce.errors import InvalidInputError
from pce.te.edge_lp import build_edge_lp
from pce.te.matrix import LpSolution, solve
from pce.te.network import Demands, TeNetwork
from pce.te.path_lp import build_path_lp
from pce.te.paths import PathSet, Progress


@dataclass(frozen=True)
class SolveOptions:
    """How each LP is built and solved (checked by :func:`pce.te.solve.check_options`)."""

    formulation: str  # "path" or "edge"
    objective: str  # "total-flow" or "mlu"
    solver: str = "highs"
    lp_method: str = "auto"
    time_limit: float | None = None  # seconds per LP
    lp_algorithm: str = "full"  # "full" or "colgen" ("auto" is resolved before)
    presolve: bool = True  # the exact reductions of pce.te.reduce (total-flow path LP only)


def presolve_applies(presolve: bool, formulation: str, objective: str) -> bool:
    """The exact reductions of :mod:`pce.te.reduce` exist for the total-flow path LP only."""
    return presolve and formulation == "path" and objective == "total-flow"


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


def solve_subproblem(
    network: TeNetwork,
    demands: Demands,
    paths: PathSet | None,
    options: SolveOptions,
    capacity_factor: float | np.ndarray = 1.0,
    threads: int = 1,
    progress: Progress | None = None,
) -> SubResult:
    """Build and solve one LP (the whole instance, or one POP partition with 1/K capacities).

    ``options.presolve``: for the total-flow path LP, first apply the exact reductions of
    :mod:`pce.te.reduce` (other LPs are solved as they are)."""
    o = options
    if presolve_applies(o.presolve, o.formulation, o.objective):
        assert paths is not None
        return _solve_reduced(network, demands, paths, capacity_factor, o.solver, o.lp_method, threads,
                              o.time_limit, o.lp_algorithm, progress)
    if o.lp_algorithm == "colgen":
        return _solve_colgen(network, demands, paths, o.objective, o.formulation, capacity_factor, o.solver,
                             threads, o.time_limit)
    model, sol, build_s, solve_s = _build_and_solve(network, demands, paths, o.formulation, o.objective,
                                                     capacity_factor, o.solver, o.lp_method, threads,
                                                     o.time_limit)
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
