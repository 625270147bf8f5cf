"""Path formulation: each demand splits its traffic over its candidate paths.

Variables ``x_p >= 0`` (traffic on path p, in units of ``scale`` Mbit/s) and, for MLU, ``U``.

* total-flow: ``max sum_p x_p``  s.t. ``sum_{p of d} x_p <= D_d``, ``sum_{p through a} x_p <= c_a``
* mlu:        ``min U``          s.t. ``sum_{p of d} x_p  = D_d``, ``sum_{p through a} x_p <= U c_a``

Rows: one per demand, then one per arc. The matrix is built column by column (CSC) straight from
the flat path arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pce.errors import InvalidInputError
from pce.te.matrix import INF, LinearProgram
from pce.te.network import Demands, TeNetwork
from pce.te.paths import PathSet

OBJECTIVES = ("mlu", "total-flow")


@dataclass
class PathLp:
    """The LP and what is needed to read its solution back."""

    lp: LinearProgram
    objective: str
    scale: float
    paths: PathSet
    n_demands: int

    def path_flows(self, x: np.ndarray) -> np.ndarray:
        return x[: self.paths.n_paths] * self.scale

    def allocation(self, x: np.ndarray) -> np.ndarray:
        """Mbit/s allocated to each demand."""
        return self.paths.demand_totals(self.path_flows(x), self.n_demands)

    def arc_load(self, x: np.ndarray, n_arcs: int) -> np.ndarray:
        """Mbit/s carried by each arc."""
        return self.paths.arc_totals(self.path_flows(x), n_arcs)


def check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise InvalidInputError(f"unknown objective {objective!r} ({', '.join(OBJECTIVES)})")


def build_path_lp(
    network: TeNetwork, demands: Demands, paths: PathSet, objective: str, capacity_factor: float | np.ndarray = 1.0
) -> PathLp:
    """The path-formulation LP; ``capacity_factor`` scales every capacity (POP gives 1/K; an array: per arc)."""
    check_objective(objective)
    n_dem, n_arcs, n_paths = len(demands), network.n_arcs, paths.n_paths
    if n_paths and np.bincount(paths.demand, minlength=n_dem).min() == 0:
        raise InvalidInputError("a demand has no candidate path")
    cap = network.arc_cap * capacity_factor
    scale = float(cap.max())
    lens = paths.lengths()
    # column p: the demand row, then the rows of its arcs
    indptr = np.zeros(n_paths + 1, dtype=np.int64)
    np.cumsum(lens + 1, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    first = indptr[:-1]
    is_first = np.zeros(indices.size, dtype=bool)
    is_first[first] = True
    indices[first] = paths.demand
    indices[~is_first] = n_dem + paths.arcs
    data = np.ones(indices.size)
    n_rows = n_dem + n_arcs
    vol = demands.volume / scale
    if objective == "mlu":
        # one more column U with -c_a on every arc row
        indptr = np.append(indptr, indptr[-1] + n_arcs)
        indices = np.concatenate([indices, n_dem + np.arange(n_arcs)])
        data = np.concatenate([data, -cap / scale])
        c = np.zeros(n_paths + 1)
        c[-1] = 1.0
        row_lo = np.concatenate([vol, np.full(n_arcs, -INF)])
        row_hi = np.concatenate([vol, np.zeros(n_arcs)])
        col_hi = np.full(n_paths + 1, INF)
    else:
        c = -np.ones(n_paths)
        row_lo = np.full(n_rows, -INF)
        row_hi = np.concatenate([vol, cap / scale])
        col_hi = np.full(n_paths, INF)
    a = sp.csc_matrix((data, indices, indptr), shape=(n_rows, c.size))
    lp = LinearProgram(c=c, a=a, row_lo=row_lo, row_hi=row_hi, col_lo=np.zeros(c.size), col_hi=col_hi)
    return PathLp(lp=lp, objective=objective, scale=scale, paths=paths, n_demands=n_dem)
