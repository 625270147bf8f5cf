"""Edge (arc-flow) formulation: the exact multicommodity-flow optimum, commodities aggregated by source.

Demands of one source share a commodity: ``f[j, a]`` is the flow of source ``s_j`` on arc ``a``.
This is exact for both objectives (flows of one source to several destinations can always be
decomposed into per-destination flows) and keeps the LP at ``#sources x #arcs`` variables instead
of ``#demands x #arcs``.

For every commodity j and node ``v != s_j``: ``inflow - outflow = y[j, v]``, the traffic delivered
to v (``= D[s_j, v]`` for MLU; ``0 <= y <= D`` for total-flow, whose objective is ``max sum y``).
The row of ``v = s_j`` is left free (implied by the others). Arc rows: ``sum_j f[j, a] <= c_a``
(``<= U c_a`` for MLU). Values are in units of ``scale`` Mbit/s.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pce.te.matrix import INF, LinearProgram
from pce.te.network import Demands, TeNetwork
from pce.te.path_lp import check_objective


@dataclass
class EdgeLp:
    """The LP and what is needed to read its solution back."""

    lp: LinearProgram
    objective: str
    scale: float
    n_commodities: int
    n_arcs: int
    volume: np.ndarray

    def allocation(self, x: np.ndarray) -> np.ndarray:
        """Mbit/s delivered to each demand."""
        if self.objective == "mlu":
            return self.volume.copy()
        start = self.n_commodities * self.n_arcs
        return x[start:start + self.volume.size] * self.scale

    def arc_load(self, x: np.ndarray, n_arcs: int) -> np.ndarray:
        f = x[: self.n_commodities * self.n_arcs].reshape(self.n_commodities, self.n_arcs)
        return f.sum(axis=0) * self.scale


def build_edge_lp(
    network: TeNetwork, demands: Demands, objective: str, capacity_factor: float | np.ndarray = 1.0
) -> EdgeLp:
    """The source-aggregated arc-flow LP; ``capacity_factor`` scales every capacity (POP: 1/K; an
    array: per arc)."""
    check_objective(objective)
    n, m = network.n_nodes, network.n_arcs
    sources, commodity = np.unique(demands.src, return_inverse=True)
    n_com = sources.size
    cap = network.arc_cap * capacity_factor
    scale = float(cap.max())
    vol = demands.volume / scale
    n_flow = n_com * m
    # flow columns (j, a) = j*m + a: +1 at row (j, head), -1 at row (j, tail), +1 at arc row a
    j = np.repeat(np.arange(n_com), m)
    a = np.tile(np.arange(m), n_com)
    cons_rows = n_com * n
    rows = [j * n + network.arc_dst[a], j * n + network.arc_src[a], cons_rows + a]
    cols = [np.arange(n_flow)] * 3
    vals = [np.ones(n_flow), -np.ones(n_flow), np.ones(n_flow)]
    demand_row = commodity * n + demands.dst
    rhs = np.zeros(cons_rows)
    if objective == "mlu":
        np.add.at(rhs, demand_row, vol)
        u_col = n_flow
        rows.append(cons_rows + np.arange(m))
        cols.append(np.full(m, u_col))
        vals.append(-cap / scale)
        n_cols = n_flow + 1
        c = np.zeros(n_cols)
        c[u_col] = 1.0
        col_hi = np.full(n_cols, INF)
        arc_hi = np.zeros(m)
    else:
        y_cols = n_flow + np.arange(len(demands))
        rows.append(demand_row)
        cols.append(y_cols)
        vals.append(-np.ones(len(demands)))
        n_cols = n_flow + len(demands)
        c = np.concatenate([np.zeros(n_flow), -np.ones(len(demands))])
        col_hi = np.concatenate([np.full(n_flow, INF), vol])
        arc_hi = cap / scale
    row_lo = np.concatenate([rhs, np.full(m, -INF)])
    row_hi = np.concatenate([rhs, arc_hi])
    own = np.arange(n_com) * n + sources  # the source's own row is free
    row_lo[own], row_hi[own] = -INF, INF
    a_mat = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(cons_rows + m, n_cols)
    )
    lp = LinearProgram(c=c, a=a_mat, row_lo=row_lo, row_hi=row_hi, col_lo=np.zeros(n_cols), col_hi=col_hi)
    return EdgeLp(lp=lp, objective=objective, scale=scale, n_commodities=n_com, n_arcs=m,
                  volume=demands.volume.copy())
