"""The OTTER LP written out with PuLP, row by row as in the paper's Table 2.

``build_model(problem)`` returns an ``OtterModel`` (inspectable, not solved); ``.solve()`` runs
HiGHS (``pulp.HiGHS``, default) or CBC. ``explicit_resources=True`` keeps the y_{a,d}^π variables
and the c5 equalities instead of substituting them into c4 — a second formulation with the same
optimum, used by the tests.
"""
from __future__ import annotations

import time
import warnings
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pulp

from pce.errors import InfeasibleError, InvalidInputError, SolverError
from pce.highs import quiet_banner
from pce.otter.problem import LpSolution, OtterProblem

SOLVERS = ("highs", "cbc")


def pulp_solver(name: str):
    """The PuLP solver object for ``highs`` or ``cbc`` (quiet)."""
    if name == "highs":
        quiet_banner()  # msg=False does not cover the banner HiGHS prints at its first construction
        solver = pulp.HiGHS(msg=False, simplex_strategy=4)  # primal simplex: see matrix.py
    elif name == "cbc":
        with warnings.catch_warnings():  # PuLP 3 deprecates the bundled CBC it still ships
            warnings.simplefilter("ignore", DeprecationWarning)
            solver = pulp.PULP_CBC_CMD(msg=False)
    else:
        raise InvalidInputError(f"unknown solver {name!r} (choose from {', '.join(SOLVERS)})")
    if not solver.available():
        raise SolverError(f"solver {name} is not available")
    return solver


@dataclass
class OtterModel:
    """A built PuLP model and its variables (``x[c]`` per problem column)."""

    problem: OtterProblem
    lp: pulp.LpProblem
    x: list
    build_seconds: float

    def solve(self, solver: str = "highs") -> LpSolution:
        t0 = time.perf_counter()
        try:
            self.lp.solve(pulp_solver(solver))
        except pulp.PulpSolverError as exc:
            raise SolverError(f"{solver} failed: {exc}") from exc
        dt = time.perf_counter() - t0
        status = pulp.LpStatus[self.lp.status]
        if status == "Infeasible":
            raise InfeasibleError("the OTTER LP is infeasible")
        if status != "Optimal":
            raise SolverError(f"{solver} ended with status {status}")
        x = np.array([v.varValue or 0.0 for v in self.x], float)
        obj = float(pulp.value(self.lp.objective) or 0.0)
        return LpSolution(self.problem, np.maximum(x, 0.0), obj, status, self.build_seconds, dt)


def _var(lp: pulp.LpProblem, name: str):
    """A continuous variable ≥ 0 (PuLP ≥ 3.3 attaches variables to the model)."""
    if hasattr(lp, "add_variable"):
        return lp.add_variable(name, lowBound=0)
    return pulp.LpVariable(name, lowBound=0)


def build_model(problem: OtterProblem, *, explicit_resources: bool = False) -> OtterModel:
    """Objective max Σ coef·x; c2 per aggregate, c3 per link, c4(+c5) per edge site and resource."""
    t0 = time.perf_counter()
    net = problem.network
    lp = pulp.LpProblem("otter", pulp.LpMaximize)
    x = [_var(lp, f"x_{c}") for c in range(problem.n_cols)]  # c1: x ≥ 0
    lp += pulp.lpSum(float(problem.col_coef[c]) * x[c] for c in range(problem.n_cols)), "satisfaction"
    by_agg: dict[int, list[int]] = defaultdict(list)
    by_link: dict[int, list[int]] = defaultdict(list)
    by_agg_dest: dict[tuple[int, int], list[int]] = defaultdict(list)
    for c in range(problem.n_cols):
        a, p = int(problem.col_agg[c]), int(problem.col_path[c])
        by_agg[a].append(c)
        for link in net.path_links[p]:
            if link >= 0:
                by_link[int(link)].append(c)
        by_agg_dest[(a, int(net.path_dst[p]))].append(c)
    for a, cs in by_agg.items():  # c2: partial allocation up to the demand
        lp += pulp.lpSum(x[c] for c in cs) <= float(problem.agg_bw[a]), f"c2_{a}"
    for link, cs in by_link.items():  # c3: link capacity shared by all paths over it
        if np.isfinite(net.link_cap[link]):
            lp += pulp.lpSum(x[c] for c in cs) <= float(net.link_cap[link]), f"c3_{link}"
    if problem.use_c4:
        for d in np.flatnonzero(net.dest_is_edge):
            d = int(d)
            pairs = [(a, cs) for (a, dd), cs in by_agg_dest.items() if dd == d]
            for pi in range(3):
                cap = float(net.dest_cap[d, pi])
                if not np.isfinite(cap) or not pairs:
                    continue
                if explicit_resources:
                    # y_{a,d}^π with c5: y = r_a^π · (Σ_{p∈P_d} x_{a,p}) / bw_a, then c4: Σ_a y ≤ c_d^π
                    ys = []
                    for a, cs in pairs:
                        y = _var(lp, f"y_{a}_{d}_{pi}")
                        ratio = float(problem.agg_res[a, pi] / problem.agg_bw[a])
                        lp += y == pulp.lpSum(ratio * x[c] for c in cs), f"c5_{a}_{d}_{pi}"
                        ys.append(y)
                    lp += pulp.lpSum(ys) <= cap, f"c4_{d}_{pi}"
                else:
                    expr = pulp.lpSum(
                        float(problem.agg_res[a, pi] / problem.agg_bw[a]) * x[c] for a, cs in pairs for c in cs
                    )
                    lp += expr <= cap, f"c4_{d}_{pi}"
    return OtterModel(problem, lp, x, time.perf_counter() - t0)
