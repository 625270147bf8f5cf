"""A linear program held as numpy/scipy arrays, and the solvers that take it (highspy, CBC).

The TE builders fill these arrays directly (``min c.x, row_lo <= A x <= row_hi, col_lo <= x <=
col_hi``); the model goes to HiGHS through ``passModel`` in one call, or to CBC as an MPS file
written by HiGHS. This avoids per-term Python objects, which is what limits PuLP-style modelling
above ~10^6 variables.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from pce.errors import InfeasibleError, InvalidInputError, SolverError
from pce.highs import new_highs, quiet_banner

SOLVERS = ("highs", "cbc")
LP_METHODS = ("auto", "simplex", "ipm", "pdlp")
INF = float("inf")



@dataclass
class LinearProgram:
    """``minimize c.x`` subject to ``row_lo <= A x <= row_hi`` and ``col_lo <= x <= col_hi``."""

    c: np.ndarray
    a: sp.csc_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray

    @property
    def n_cols(self) -> int:
        return int(self.c.size)

    @property
    def n_rows(self) -> int:
        return int(self.row_lo.size)

    @property
    def nnz(self) -> int:
        return int(self.a.nnz)

    def sizes(self) -> dict[str, int]:
        return {"variables": self.n_cols, "constraints": self.n_rows, "nonzeros": self.nnz}


@dataclass
class LpSolution:
    """Primal values, objective and how the solve went."""

    x: np.ndarray
    objective: float
    status: str
    seconds: float
    info: dict = field(default_factory=dict)
    row_dual: np.ndarray | None = None  # HiGHS only (for ``min c.x``: <= 0 on a binding <= row)


def _highs_lp(lp: LinearProgram):
    import highspy

    a = lp.a.tocsc()
    a.sort_indices()
    model = highspy.HighsLp()
    model.num_col_ = lp.n_cols
    model.num_row_ = lp.n_rows
    model.col_cost_ = np.ascontiguousarray(lp.c, dtype=np.float64)
    model.col_lower_ = np.ascontiguousarray(lp.col_lo, dtype=np.float64)
    model.col_upper_ = np.ascontiguousarray(lp.col_hi, dtype=np.float64)
    model.row_lower_ = np.ascontiguousarray(lp.row_lo, dtype=np.float64)
    model.row_upper_ = np.ascontiguousarray(lp.row_hi, dtype=np.float64)
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = np.ascontiguousarray(a.indptr, dtype=np.int32)
    model.a_matrix_.index_ = np.ascontiguousarray(a.indices, dtype=np.int32)
    model.a_matrix_.value_ = np.ascontiguousarray(a.data, dtype=np.float64)
    return model


def solve_highs(
    lp: LinearProgram, method: str = "auto", threads: int = 0, time_limit: float | None = None,
    verbose: bool = False,
) -> LpSolution:
    """Solve with HiGHS (highspy). ``method``: auto, simplex, ipm (interior point + crossover), pdlp."""
    import highspy

    if method not in LP_METHODS:
        raise InvalidInputError(f"unknown LP method {method!r} ({', '.join(LP_METHODS)})")
    h = new_highs(threads, verbose=verbose)
    if method == "auto":
        method = "choose"
    h.setOptionValue("solver", method)
    if time_limit:
        h.setOptionValue("time_limit", float(time_limit))
    status = h.passModel(_highs_lp(lp))
    if status == highspy.HighsStatus.kError:
        raise SolverError("HiGHS rejected the model")
    t0 = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - t0
    model_status = h.getModelStatus()
    text = h.modelStatusToString(model_status)
    if model_status == highspy.HighsModelStatus.kInfeasible:
        raise InfeasibleError("the TE linear program is infeasible")
    if model_status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS did not reach an optimum: {text}")
    sol = h.getSolution()
    info = h.getInfo()
    return LpSolution(
        x=np.asarray(sol.col_value, dtype=float),
        objective=float(h.getInfo().objective_function_value),
        status=text,
        seconds=seconds,
        info={"simplex_iterations": int(info.simplex_iteration_count),
              "ipm_iterations": int(info.ipm_iteration_count)},
        row_dual=np.asarray(sol.row_dual, dtype=float),
    )


def cbc_path() -> str:
    """Path of the CBC binary shipped with PuLP (or on PATH)."""
    try:
        from pulp.apis.coin_api import pulp_cbc_path

        if os.path.exists(pulp_cbc_path):
            return pulp_cbc_path
    except ImportError:  # no PuLP: fall back to PATH
        pass
    found = shutil.which("cbc")
    if not found:
        raise SolverError("CBC is not available (install PuLP, which ships it, or a cbc binary)")
    return found


def solve_cbc(lp: LinearProgram, time_limit: float | None = None) -> LpSolution:
    """Solve with CBC: HiGHS writes the model as MPS, the CBC binary solves it, we read the values."""
    import highspy

    quiet_banner()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(_highs_lp(lp))
    with tempfile.TemporaryDirectory(prefix="mlte-cbc-") as tmp:
        mps, out = os.path.join(tmp, "model.mps"), os.path.join(tmp, "solution.txt")
        h.writeModel(mps)
        cmd = [cbc_path(), mps]
        if time_limit:
            cmd += ["-sec", str(float(time_limit))]
        cmd += ["-primalS", "-solu", out]
        t0 = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - t0
        if run.returncode != 0 or not os.path.exists(out):
            raise SolverError(f"CBC failed (exit {run.returncode}): {run.stdout[-500:]}{run.stderr[-500:]}")
        with open(out, encoding="utf-8") as fh:
            header = fh.readline().strip()
            names = h.getLp().col_names_
            position = {name: i for i, name in enumerate(names)} if names else {}
            x = np.zeros(lp.n_cols)
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                name, value = parts[1], float(parts[2])
                x[position[name] if position else int(parts[0])] = value
    if header.lower().startswith("infeasible"):
        raise InfeasibleError("the TE linear program is infeasible")
    if not header.lower().startswith("optimal"):
        raise SolverError(f"CBC did not reach an optimum: {header}")
    return LpSolution(x=x, objective=float(lp.c @ x), status="Optimal", seconds=seconds)


def solve(lp: LinearProgram, solver: str = "highs", **kwargs) -> LpSolution:
    """Dispatch to :func:`solve_highs` or :func:`solve_cbc`."""
    if solver == "highs":
        return solve_highs(lp, **kwargs)
    if solver == "cbc":
        return solve_cbc(lp, time_limit=kwargs.get("time_limit"))
    raise InvalidInputError(f"unknown solver {solver!r} ({', '.join(SOLVERS)})")
