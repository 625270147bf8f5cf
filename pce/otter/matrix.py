"""The OTTER LP as a sparse matrix handed straight to highspy — for large instances.

PuLP builds one Python object per variable and term, which dominates above ~10⁵ columns; here
the CSC matrix comes from numpy/scipy (``OtterProblem.constraint_matrix``) and goes to
``Highs.passModel`` in one call. Same optimum as ``model.py`` (tested).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np

from pce.errors import InfeasibleError, InvalidInputError, SolverError
from pce.highs import new_highs
from pce.otter.problem import LpSolution, OtterProblem
from pce.otter.reduce import OtterReduction, reduce_problem

PRIMAL_SIMPLEX, DUAL_SIMPLEX = 4, 1  # HiGHS option simplex_strategy
METHODS = ("primal", "dual", "ipm")


@dataclass
class MatrixModel:
    """A highspy LP ready to run; ``n_rows``/``n_cols``/``nnz`` describe its size."""

    problem: OtterProblem
    lp: highspy.HighsLp
    n_rows: int
    n_cols: int
    nnz: int
    build_seconds: float
    reduction: OtterReduction | None = None  # set when built with presolve: the LP is the reduced one

    def solve(self, *, method: str = "primal", threads: int | None = None, time_limit: float | None = None) -> LpSolution:
        """``method``: primal (default) | dual | ipm.

        x = 0 is feasible, so primal simplex starts from a feasible basis. Measured (docs/otter.md):
        8×8, 3,000 flows: primal 0.5 s, dual 12 s, IPM 3 s; 8×8, 4,000 flows, top-8: primal 1.8 s,
        IPM 18.5 s; but 64×64, 20,000 flows, top-4: primal 6.0 s, IPM 3.4 s.
        """
        if method not in METHODS:
            raise InvalidInputError(f"unknown LP method {method!r} (choose from {', '.join(METHODS)})")
        t0 = time.perf_counter()
        h = new_highs(threads)
        if method == "ipm":
            h.setOptionValue("solver", "ipm")
        else:
            h.setOptionValue("solver", "simplex")
            h.setOptionValue("simplex_strategy", PRIMAL_SIMPLEX if method == "primal" else DUAL_SIMPLEX)
        if time_limit:
            h.setOptionValue("time_limit", float(time_limit))
        h.passModel(self.lp)
        h.run()
        dt = time.perf_counter() - t0
        status = h.modelStatusToString(h.getModelStatus())
        if status == "Empty" and self.n_cols == 0:  # e.g. the presolve placed every aggregate
            status = "Optimal"
        if status == "Infeasible":
            raise InfeasibleError("the OTTER LP is infeasible")
        if status != "Optimal":
            raise SolverError(f"HiGHS ended with status {status}")
        x = np.asarray(h.getSolution().col_value, float) if self.n_cols else np.zeros(0)
        obj = float(h.getInfo().objective_function_value) if self.n_cols else 0.0
        x = np.maximum(x, 0.0)
        if self.reduction is not None:
            x = self.reduction.expand(self.problem.n_cols, x)
            obj = float(np.asarray(self.problem.col_coef, float) @ x)
        return LpSolution(self.problem, x, obj, status, self.build_seconds, dt,
                          self.reduction.stats if self.reduction is not None else None)


def build_matrix(problem: OtterProblem, presolve: bool = False) -> MatrixModel:
    """Maximise col_coef·x subject to constraint_matrix() · x ≤ rhs, x ≥ 0.

    ``presolve``: hand HiGHS the exactly reduced LP of :mod:`pce.otter.reduce` instead (its time
    counts as build time); the solution is mapped back to every column."""
    t0 = time.perf_counter()
    mat, rhs, _kinds = problem.constraint_matrix()
    cost = np.asarray(problem.col_coef, float)
    reduction = None
    if presolve:
        reduction = reduce_problem(problem, mat, rhs)
        mat = mat[:, reduction.cols].tocsr()[reduction.rows].tocsc()
        rhs, cost = rhs[reduction.rows], cost[reduction.cols]
    mat.sort_indices()
    n_cols = mat.shape[1]
    lp = highspy.HighsLp()
    lp.num_col_ = n_cols
    lp.num_row_ = mat.shape[0]
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(n_cols)
    lp.col_upper_ = np.full(n_cols, highspy.kHighsInf)
    lp.row_lower_ = np.full(mat.shape[0], -highspy.kHighsInf)
    lp.row_upper_ = rhs
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = mat.indptr.astype(np.int32)
    lp.a_matrix_.index_ = mat.indices.astype(np.int32)
    lp.a_matrix_.value_ = mat.data.astype(float)
    return MatrixModel(problem, lp, mat.shape[0], n_cols, int(mat.nnz), time.perf_counter() - t0, reduction)


def solve_problem(problem: OtterProblem, backend: str = "matrix", solver: str = "highs", *,
                  presolve: bool = False, method: str = "primal") -> LpSolution:
    """Solve with the highspy matrix path (``matrix``; ``presolve`` and ``method`` apply to it) or
    the PuLP model (``pulp``, highs|cbc)."""
    if backend == "matrix" and solver == "highs":
        return build_matrix(problem, presolve).solve(method=method)
    from pce.otter.model import build_model

    return build_model(problem).solve(solver)
