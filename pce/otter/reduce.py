"""Exact reductions of one OTTER LP before the solver sees it (``otter-solve --presolve``, on by default).

At scale almost every coupling row of the OTTER LP is slack whatever the flows do: on the 64×64,
20,000-flow instance only 144 of 20,048 link and edge-resource rows can ever bind. HiGHS's own
presolve finds much of this but spends seconds on 639 k columns. Here, with numpy:

1. **Rows that can never bind.** A link or edge-resource row ``Σ_j A_rj x_j ≤ b_r`` is dropped
   when even the worst case fits: ``Σ_a max_{j∈a} A_rj · bw_a ≤ b_r`` (an aggregate ``a`` places
   at most ``bw_a`` over all its columns, by its c2 row).
2. **Free and dominated columns.** Of an aggregate's columns with the same set of remaining rows
   (same coefficients there too: a c4 coefficient depends only on the aggregate and the
   destination), only one of largest objective coefficient is kept. A column with no entry in a remaining row is *free*. Per
   aggregate, the free column of largest objective coefficient dominates every other free column
   and every column of no larger coefficient (same c2 row, no fewer binding entries): those are
   dropped. If it is the aggregate's best column overall, the whole aggregate is placed on it
   (``x = bw_a``) and leaves the LP; its load then counts in full on its (non-binding) rows, and
   step 1 is repeated until nothing changes.

The reduced LP has the same optimum (tested against the unreduced one); its solution, mapped back,
is an optimal solution of the original LP, though not necessarily the vertex the solver would
have picked there. The flow-arrival simulator therefore keeps solving the unreduced LP, so its
recorded runs stay reproducible.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from pce.otter.problem import OtterProblem


@dataclass
class OtterReduction:
    """What the reduced LP keeps and what was fixed."""

    rows: np.ndarray  # original row ids of the reduced LP's rows
    cols: np.ndarray  # original column ids of the reduced LP's columns
    fixed_cols: np.ndarray  # columns carrying their whole aggregate
    fixed_x: np.ndarray  # = the aggregate's bw
    stats: dict[str, float] = field(default_factory=dict)

    def expand(self, n_cols: int, x_reduced: np.ndarray) -> np.ndarray:
        """The solution of the original LP (one value per original column)."""
        x = np.zeros(n_cols)
        x[self.cols] = x_reduced
        x[self.fixed_cols] = self.fixed_x
        return x


def reduce_problem(problem: OtterProblem, mat: sp.csc_matrix, rhs: np.ndarray) -> OtterReduction:
    """Steps 1-2 of the module docstring on ``constraint_matrix()``'s ``(mat, rhs)``."""
    t0 = time.perf_counter()
    n_aggs, n_cols = problem.n_aggs, problem.n_cols
    bw, coef, agg = problem.agg_bw, problem.col_coef, problem.col_agg
    coo = mat.tocoo()
    coupling = coo.row >= n_aggs  # rows 0..A-1 are the c2 rows, one per aggregate (problem.py)
    row = coo.row[coupling].astype(np.int64)
    col = coo.col[coupling].astype(np.int64)
    val = coo.data[coupling]
    # worst-case load of each (row, aggregate): max over the aggregate's columns of A_rj * bw_a
    key = row * n_aggs + agg[col]
    order = np.argsort(key, kind="stable")
    key_sorted = key[order]
    starts = np.flatnonzero(np.r_[True, key_sorted[1:] != key_sorted[:-1]])
    pair_load = np.maximum.reduceat(val[order] * bw[agg[col[order]]], starts)
    pair_row, pair_agg = key_sorted[starts] // n_aggs, key_sorted[starts] % n_aggs
    fixed = np.zeros(n_aggs, dtype=bool)
    fixed_col = np.full(n_aggs, -1, dtype=np.int64)
    best_any = np.full(n_aggs, -np.inf)
    np.maximum.at(best_any, agg, coef)
    rounds = 0
    while True:
        rounds += 1
        potential = np.bincount(pair_row, weights=np.where(fixed[pair_agg], 0.0, pair_load), minlength=mat.shape[0])
        if fixed.any():  # a fixed aggregate loads exactly its chosen column's rows
            fc = fixed_col[fixed]
            load = mat[:, fc] @ bw[fixed]
            potential += np.where(np.arange(mat.shape[0]) >= n_aggs, load, 0.0)
        binding = np.zeros(mat.shape[0], dtype=bool)
        binding[n_aggs:] = potential[n_aggs:] > rhs[n_aggs:]
        n_binding = np.bincount(col, weights=binding[row], minlength=n_cols)
        free = n_binding == 0
        best_free = np.full(n_aggs, -np.inf)
        np.maximum.at(best_free, agg[free], coef[free])
        newly = ~fixed & (best_free >= best_any) & np.isfinite(best_free)
        if not newly.any():
            break
        cand = np.flatnonzero(free & newly[agg] & (coef == best_free[agg]))
        first = cand[np.unique(agg[cand], return_index=True)[1]]  # lowest column id among ties
        fixed_col[agg[first]] = first
        fixed[agg[first]] = True
    # kept columns: of non-fixed aggregates, per set of binding rows the best column (the free
    # ones form the empty set), and only those above the aggregate's best free column
    live = np.flatnonzero(~fixed[agg] & (free | (coef > best_free[agg])))
    best = _best_per_support(live, agg, coef, col, row, binding, n_cols)
    keep = np.zeros(n_cols, dtype=bool)
    keep[best] = True
    rows = np.concatenate([np.flatnonzero(~fixed), np.flatnonzero(binding)])
    fixed_aggs = np.flatnonzero(fixed)
    stats = {
        "rows": int(mat.shape[0]), "rows_kept": int(rows.size),
        "coupling_rows": int(mat.shape[0] - n_aggs), "coupling_rows_binding": int(binding.sum()),
        "columns": int(n_cols), "columns_kept": int(keep.sum()),
        "aggregates": int(n_aggs), "aggregates_fixed": int(fixed_aggs.size),
        "rounds": rounds, "seconds": time.perf_counter() - t0,
    }
    return OtterReduction(rows=rows, cols=np.flatnonzero(keep), fixed_cols=fixed_col[fixed_aggs],
                          fixed_x=bw[fixed_aggs].astype(float), stats=stats)


def _row_weights(n_rows: int) -> np.ndarray:
    """A random 64-bit weight per row; a set of rows hashes to the (wrapping) sum of its weights."""
    return np.random.default_rng(11).integers(1, 2**63, n_rows, dtype=np.uint64)


def _best_per_support(cols: np.ndarray, agg: np.ndarray, coef: np.ndarray, entry_col: np.ndarray,
                      entry_row: np.ndarray, binding: np.ndarray, n_cols: int) -> np.ndarray:
    """Of ``cols``, per (aggregate, set of binding rows) the column of largest coefficient (lowest id
    among ties). Sets are compared by a 64-bit hash and then verified entry by entry; a column
    whose set differs from its group's first (a hash collision) is kept on its own."""
    if cols.size == 0:
        return cols
    on = binding[entry_row]
    e_col, e_row = entry_col[on], entry_row[on]
    weight = _row_weights(binding.size)
    set_hash = np.zeros(n_cols, dtype=np.uint64)
    np.add.at(set_hash, e_col, weight[e_row])
    count = np.bincount(e_col, minlength=n_cols)
    # group key: aggregate, count, hash; order by key then by descending coefficient, then id
    order = np.lexsort((cols, -coef[cols], set_hash[cols].view(np.int64), count[cols], agg[cols]))
    c = cols[order]
    new = np.r_[True, (agg[c][1:] != agg[c][:-1]) | (count[c][1:] != count[c][:-1])
                | (set_hash[c][1:] != set_hash[c][:-1])]
    rep = c[np.flatnonzero(new)][np.cumsum(new) - 1]  # each column's group representative
    # verify: sorted binding rows of every column equal its representative's
    packed = np.sort(e_col.astype(np.int64) * binding.size + e_row)
    rows_sorted = packed % binding.size
    start = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(count, out=start[1:])
    lens = count[c]
    offs = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    mine = rows_sorted[np.repeat(start[c], lens) + offs]
    theirs = rows_sorted[np.repeat(start[rep], lens) + offs]
    differs = np.zeros(c.size, dtype=bool)
    np.logical_or.at(differs, np.repeat(np.arange(c.size), lens), mine != theirs)
    return np.unique(np.concatenate([c[new], c[differs]]))
