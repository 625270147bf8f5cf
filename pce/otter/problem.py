"""One OTTER LP instance as arrays: aggregates, columns x_{a,p} and the constraint matrix.

Both builders (``model.py`` with PuLP, ``matrix.py`` with highspy) start from an
``OtterProblem``; the matrix build uses ``constraint_matrix()`` directly, the PuLP build restates
the formulation row by row, so the two are independent enough to check each other.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pce.errors import InvalidInputError
from pce.otter.aggregate import Candidates, aggregate_keys, candidates
from pce.otter.scenario import FlowSet, Network


@dataclass
class OtterProblem:
    """Columns are (aggregate, path) pairs; objective coefficient Σ_{f∈a} Σ_m 𝒟_f^m(σ_p) / bw_a."""

    network: Network
    flow_idx: np.ndarray  # flows in the problem (ids into the FlowSet)
    flow_agg: np.ndarray  # aggregate of each of those flows
    agg_bw: np.ndarray  # Σ bw_f of the aggregate (its c2 bound)
    agg_count: np.ndarray
    agg_res: np.ndarray  # (A, 3) Σ r_f^π
    col_agg: np.ndarray
    col_path: np.ndarray
    col_coef: np.ndarray
    col_slot: np.ndarray  # candidate slot of the column (index into Candidates.paths rows)
    use_c4: bool = True

    @property
    def n_aggs(self) -> int:
        return len(self.agg_bw)

    @property
    def n_cols(self) -> int:
        return len(self.col_agg)

    def constraint_matrix(self) -> tuple[sp.csc_matrix, np.ndarray, list[str]]:
        """(A, rhs, row kinds): rows c2 per aggregate, c3 per used link, c4 per (edge site, resource)."""
        net = self.network
        C, A = self.n_cols, self.n_aggs
        cols = np.arange(C)
        rows_i = [self.col_agg]
        cols_i = [cols]
        vals = [np.ones(C)]
        rhs = [self.agg_bw]
        kinds = ["c2"] * A
        # c3: one row per link crossed by some column (infinite capacities need no row)
        pl = net.path_links[self.col_path]  # (C, M)
        m = (pl >= 0) & np.isfinite(net.link_cap[np.where(pl >= 0, pl, 0)])
        used = np.unique(pl[m])
        row_of = np.full(net.n_links, -1, np.int64)
        row_of[used] = A + np.arange(len(used))
        rows_i.append(row_of[pl[m]])
        cols_i.append(np.broadcast_to(cols[:, None], pl.shape)[m])
        vals.append(np.ones(int(m.sum())))
        rhs.append(net.link_cap[used])
        kinds += ["c3"] * len(used)
        base = A + len(used)
        if self.use_c4:
            # c4 with c5 substituted: Σ_a (r_a^π / bw_a) Σ_{p∈P_d} x_{a,p} ≤ c_d^π, edge sites only
            dest = net.path_dst[self.col_path]
            n_rows = 0
            for d in np.flatnonzero(net.dest_is_edge):
                at = np.flatnonzero(dest == d)
                for pi in range(3):
                    if not np.isfinite(net.dest_cap[d, pi]) or at.size == 0:
                        continue
                    coef = self.agg_res[self.col_agg[at], pi] / self.agg_bw[self.col_agg[at]]
                    nz = coef > 0
                    if not nz.any():
                        continue
                    rows_i.append(np.full(int(nz.sum()), base + n_rows))
                    cols_i.append(at[nz])
                    vals.append(coef[nz])
                    rhs.append(np.array([net.dest_cap[d, pi]]))
                    kinds.append("c4")
                    n_rows += 1
        n_rows_total = len(kinds)
        mat = sp.csc_matrix(
            (np.concatenate(vals), (np.concatenate(rows_i), np.concatenate(cols_i))), shape=(n_rows_total, C)
        )
        return mat, np.concatenate(rhs).astype(float), kinds


def make_problem(
    network: Network,
    flows: FlowSet,
    idx: np.ndarray | None = None,
    *,
    top_n: int = 4,
    cand: Candidates | None = None,
    aggregate: bool = True,
    allowed: np.ndarray | None = None,
    pin_key: np.ndarray | None = None,
    use_c4: bool = True,
) -> OtterProblem:
    """Build the LP data for flows ``idx`` (default all).

    ``cand``: candidates of the flows ``idx`` (computed when None); ``allowed`` (len(idx), n*K)
    bool restricts columns (pinning); ``pin_key`` keeps flows with different pins in different
    aggregates; ``aggregate=False`` gives one aggregate per flow (the plain paper LP).
    """
    idx = np.arange(len(flows)) if idx is None else np.asarray(idx, np.int64)
    if cand is None:
        cand = candidates(network, flows, top_n).take(idx)
    if cand.paths.shape[0] != len(idx):
        raise InvalidInputError("candidates do not match the flows given")
    if aggregate:
        inv, A = aggregate_keys(flows, idx, cand, pin_key)
    else:
        inv, A = np.arange(len(idx)), len(idx)
    bw = flows.bw[idx]
    agg_bw = np.bincount(inv, bw, A)
    agg_count = np.bincount(inv, minlength=A).astype(float)
    agg_res = np.stack([np.bincount(inv, flows.res[idx, j], A) for j in range(3)], axis=1).reshape(A, 3)
    # per aggregate: Σ member scores per candidate slot; representative = first member
    sums = np.zeros((A, cand.paths.shape[1]))
    np.add.at(sums, inv, cand.score.astype(float))
    rep = np.full(A, -1, np.int64)
    rep[inv[::-1]] = np.arange(len(idx))[::-1]
    valid = cand.paths[rep] >= 0
    if allowed is not None:
        valid &= allowed[rep]
    a_i, c_i = np.nonzero(valid)
    return OtterProblem(
        network=network,
        flow_idx=idx,
        flow_agg=inv,
        agg_bw=agg_bw,
        agg_count=agg_count,
        agg_res=agg_res,
        col_agg=a_i,
        col_path=cand.paths[rep][a_i, c_i],
        col_coef=sums[a_i, c_i] / agg_bw[a_i],
        col_slot=c_i,
        use_c4=use_c4,
    )


@dataclass
class LpSolution:
    """x per column, objective, and what it cost; ``fractions`` gives per-aggregate routing."""

    problem: OtterProblem
    x: np.ndarray
    objective: float
    status: str
    build_seconds: float
    solve_seconds: float
    reduction_stats: dict | None = None  # what the exact presolve removed (matrix backend, presolve on)

    def path_fractions(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per aggregate: (paths, fraction of each member's bw on them, candidate slots)."""
        p = self.problem
        keep = self.x > 1e-9 * np.maximum(1.0, p.agg_bw[p.col_agg])
        cols = np.flatnonzero(keep)
        order = np.argsort(p.col_agg[cols], kind="stable")
        cols = cols[order]
        starts = np.searchsorted(p.col_agg[cols], np.arange(p.n_aggs + 1))
        out = []
        for a in range(p.n_aggs):
            c = cols[starts[a] : starts[a + 1]]
            frac = self.x[c] / p.agg_bw[a]
            total = frac.sum()
            if total > 1.0:  # solver tolerance: never place more than the demand
                frac = frac / total
            out.append((p.col_path[c], frac, p.col_slot[c]))
        return out

    def allocated(self) -> float:
        """Total bandwidth placed (Mbit/s)."""
        return float(self.x.sum())
