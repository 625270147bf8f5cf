"""Exact reductions of the total-flow path LP (``--presolve``, on by default).

The total-flow path LP (``max sum x_p``, a GUB row per demand, a capacity row per arc) is a
packing LP whose size is set by the number of demands. On real WAN instances most of those rows
can be removed *before* the solver sees them, without changing the optimum:

1. **Arcs that can never be full.** If every demand with a candidate path through arc ``a``
   sent its whole volume through ``a``, the load would be at most
   ``potential(a) = sum_{d uses a} D_d``. When ``potential(a) <= c_a`` the row of ``a`` is
   redundant and is dropped.
2. **Demands that are free.** A demand with a candidate path made only of such arcs is routed in
   full on that path (moving all of its flow there keeps every row feasible and cannot lower the
   objective), so it leaves the LP. Its other paths no longer count towards the potential of
   their arcs, so step 1 is repeated until nothing changes.
3. **Dominated paths.** Of two paths of one demand, the one whose set of remaining arcs contains
   the other's can give all its flow to the other; it is dropped (of equal sets the first is kept).
   Then **parallel rows**: remaining arcs crossed by exactly the same kept paths (links in
   series) have identical rows, and only the one of least capacity is kept.
4. **Interchangeable demands.** Demands whose remaining paths have exactly the same arc sets have
   identical columns in every remaining row, so they merge into one *commodity* whose volume is
   the sum; any split of a commodity's flow in proportion to its members' volumes is feasible.

What is left is again a TE instance (:class:`Reduction` holds it as a ``TeNetwork`` /
``Demands`` / ``PathSet`` triple over the remaining arcs), solved by the usual full LP or column
generation, and :meth:`Reduction.expand` maps its path flows back to every original path. On
CAIDA AS7018 (594 nodes, 352,242 gravity demands, load 0.5) it leaves 1,235 of 3,348 arcs and
35,710 commodities with 131,512 paths instead of 1.35 M (docs/performance/pce-te.md).

:func:`dual_bound` gives an independent check: from arc prices (the reduced LP's arc duals,
0 on dropped arcs) it computes the objective of a feasible dual of the *original* LP, an upper
bound that equals the primal value exactly when the expanded solution is optimal.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from pce.te.network import Demands, TeNetwork
from pce.te.paths import PathSet

# domination needs a bit mask of a demand's paths; beyond this many paths per demand it is skipped
MAX_PATHS_FOR_DOMINATION = 16


@dataclass
class Reduction:
    """The reduced instance and the maps back to the original paths."""

    network: TeNetwork  # remaining arcs; capacities already multiplied by the capacity factor
    demands: Demands  # commodities (src/dst of a representative member)
    paths: PathSet  # commodity paths over the remaining arcs
    n_paths: int  # original number of paths
    fixed_path: np.ndarray  # original path carrying each fixed demand in full
    fixed_volume: np.ndarray  # and that demand's volume
    member_path: np.ndarray  # original path of every kept (demand, path)
    member_reduced: np.ndarray  # the reduced path it belongs to
    member_share: np.ndarray  # D_d / D_commodity
    kept_arcs: np.ndarray  # original arc id of each remaining arc
    stats: dict[str, float] = field(default_factory=dict)

    def expand(self, reduced_flow: np.ndarray) -> np.ndarray:
        """Mbit/s on every original path from Mbit/s on every reduced path."""
        flow = np.zeros(self.n_paths)
        flow[self.fixed_path] = self.fixed_volume
        flow[self.member_path] = reduced_flow[self.member_reduced] * self.member_share
        return flow

    def arc_price(self, reduced_price: np.ndarray, n_arcs: int) -> np.ndarray:
        """Prices on the original arcs: the reduced LP's on remaining arcs, 0 on dropped ones."""
        price = np.zeros(n_arcs)
        price[self.kept_arcs] = reduced_price
        return price


def _groups(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_index=True, return_inverse=True)[1:]`` for a 1-d integer key, with
    one stable argsort (``np.unique(..., axis=0)`` on a table of keys was the presolve's slowest
    step): the first position of every distinct key, and each element's group number."""
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    new = np.empty(key.size, dtype=bool)
    new[:1] = True
    np.not_equal(sorted_key[1:], sorted_key[:-1], out=new[1:])
    ids = np.empty(key.size, dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return order[new], ids


def _row_hash(table: np.ndarray) -> np.ndarray:
    """A 64-bit hash of every row of an integer table (wrapping sum of entries times random odd
    weights); equal rows hash equal, and callers verify that equal hashes mean equal rows."""
    weights = np.random.default_rng(7).integers(1, 2**63, table.shape[1], dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        return (table.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64).view(np.int64)


def _first_per_group(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted-or-not ``keys``: the unique keys and the ``values`` entry of each key's first occurrence."""
    uniq, first = np.unique(keys, return_index=True)
    return uniq, values[first]


def _free_demands(vol: np.ndarray, cap: np.ndarray, paths: PathSet, owner: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Steps 1-2: fixpoint of dropping never-full arcs and fixing demands routed over them only.

    Returns (active demands, binding arcs, fixed path per demand or -1, rounds)."""
    n_dem, n_arcs = vol.size, cap.size
    entry_dem = paths.demand[owner]
    pair = np.sort(entry_dem.astype(np.int64) * n_arcs + paths.arcs)  # (demand, arc) once
    pair = pair[np.r_[True, pair[1:] != pair[:-1]]]
    pair_dem, pair_arc = pair // n_arcs, pair % n_arcs
    active = vol > 0
    fixed = np.full(n_dem, -1, dtype=np.int64)
    zero = np.nonzero(~active)[0]
    if zero.size:  # nothing to route: "fixed" at 0 on its first path
        _, first = np.unique(paths.demand, return_index=True)
        fixed[zero] = first[zero]
    rounds = 0
    while True:
        rounds += 1
        potential = np.bincount(pair_arc, weights=np.where(active[pair_dem], vol[pair_dem], 0.0),
                                minlength=n_arcs)
        binding = potential > cap
        n_binding = np.bincount(owner, weights=binding[paths.arcs], minlength=paths.n_paths)
        free = np.nonzero((n_binding == 0) & active[paths.demand])[0]
        if free.size == 0:
            return active, binding, fixed, rounds
        dem, path = _first_per_group(paths.demand[free], free)
        fixed[dem] = path
        active[dem] = False


def _dominated(paths: PathSet, keep: np.ndarray, binding: np.ndarray, owner: np.ndarray,
               local: np.ndarray, n_binding: np.ndarray, k_max: int) -> np.ndarray:
    """Step 3: mask of kept paths whose remaining-arc set contains another kept path's of the same demand."""
    entry = np.nonzero(keep[owner] & binding[paths.arcs])[0]
    dem = paths.demand[owner[entry]]
    n_arcs = int(binding.size)
    # sort (demand, arc, local path index) packed into one integer: no argsort needed
    packed = np.sort((dem.astype(np.int64) * n_arcs + paths.arcs[entry]) * k_max + local[owner[entry]])
    key, bit = packed // k_max, np.int64(1) << (packed % k_max)
    starts = np.r_[0, np.nonzero(np.diff(key))[0] + 1]
    mask = np.bitwise_or.reduceat(bit, starts) if key.size else np.zeros(0, dtype=np.int64)
    pair_dem = key[starts] // n_arcs
    n_dem = int(paths.demand.max(initial=-1)) + 1
    # inter[d, i, j] = arcs shared by paths i and j of demand d
    inter = np.zeros((n_dem, k_max, k_max), dtype=np.int32)
    bits = [((mask >> i) & 1).astype(bool) for i in range(k_max)]
    for i in range(k_max):
        for j in range(k_max):
            if i != j:
                both = bits[i] & bits[j]
                inter[:, i, j] = np.bincount(pair_dem[both], minlength=n_dem)
    size = np.zeros((n_dem, k_max), dtype=np.int64)
    size_valid = np.zeros((n_dem, k_max), dtype=bool)
    kept = np.nonzero(keep)[0]
    size[paths.demand[kept], local[kept]] = n_binding[kept]
    size_valid[paths.demand[kept], local[kept]] = True
    dominated = np.zeros(paths.n_paths, dtype=bool)
    d, i = paths.demand[kept], local[kept]
    for j in range(k_max):
        other = size_valid[d, j] & (j != i)
        subset = inter[d, j, i] == size[d, j]  # path j's set inside path i's
        smaller = (size[d, j] < size[d, i]) | ((size[d, j] == size[d, i]) & (j < i))
        dominated[kept[other & subset & smaller]] = True
    return dominated


def _hash_weights(n_arcs: int) -> tuple[np.ndarray, np.ndarray]:
    """Two random 64-bit weights per arc; a set of arcs hashes to the (wrapping) sums."""
    rng = np.random.default_rng(20261122)
    return (rng.integers(1, 2**63, n_arcs, dtype=np.uint64), rng.integers(1, 2**63, n_arcs, dtype=np.uint64))


def _set_ids(paths: PathSet, keep: np.ndarray, binding: np.ndarray, owner: np.ndarray,
             n_binding: np.ndarray) -> np.ndarray:
    """Step 4a: an id per kept path, equal iff the remaining-arc sets are equal (hash, then verified)."""
    r1, r2 = _hash_weights(binding.size)
    on = binding[paths.arcs]
    w1 = np.where(on, r1[paths.arcs], np.uint64(0))
    w2 = np.where(on, r2[paths.arcs], np.uint64(0))
    h1 = np.add.reduceat(w1, paths.ptr[:-1]) if w1.size else np.zeros(0, np.uint64)
    h2 = np.add.reduceat(w2, paths.ptr[:-1]) if w2.size else np.zeros(0, np.uint64)
    kept = np.nonzero(keep)[0]
    table = np.stack([h1[kept].view(np.int64), h2[kept].view(np.int64), n_binding[kept].astype(np.int64)], axis=1)
    rep_idx, ids = _groups(_row_hash(table))
    # verify: every path's length and sorted remaining arcs equal its representative's
    n_arcs = int(binding.size)
    entry = np.nonzero(keep[owner] & on)[0]
    arcs_sorted = np.sort(owner[entry].astype(np.int64) * n_arcs + paths.arcs[entry]) % n_arcs
    start = np.zeros(paths.n_paths + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner[entry], minlength=paths.n_paths), out=start[1:])
    remaining = PathSet(paths.demand, start, arcs_sorted)  # each path's remaining arcs, sorted
    rep_of = kept[rep_idx][ids]
    same_len = n_binding[kept] == n_binding[rep_of]
    check = np.nonzero(same_len)[0]
    ptr, mine = remaining.entries(kept[check])
    _, theirs = remaining.entries(rep_of[check])
    bad_entry = arcs_sorted[mine] != arcs_sorted[theirs]
    if bad_entry.any() or not same_len.all():  # a hash collision: those paths get ids of their own
        bad = np.union1d(np.nonzero(~same_len)[0], check[np.repeat(np.arange(check.size), np.diff(ptr))[bad_entry]])
        ids = ids.copy()
        ids[bad] = ids.max() + 1 + np.arange(bad.size)
    out = np.full(paths.n_paths, -1, dtype=np.int64)
    out[kept] = ids
    return out


def _drop_parallel_rows(paths: PathSet, keep: np.ndarray, binding: np.ndarray, owner: np.ndarray,
                        cap: np.ndarray) -> tuple[np.ndarray, int]:
    """Step 3b: arcs crossed by exactly the same kept paths (typically links in series, e.g. a
    chain of sea-cable waypoints) have identical rows; only the smallest capacity matters."""
    entry = np.nonzero(keep[owner] & binding[paths.arcs])[0]
    if entry.size == 0:
        return binding, 0
    packed = np.sort(paths.arcs[entry].astype(np.int64) * paths.n_paths + owner[entry])  # by arc, then path
    arc, path = packed // paths.n_paths, packed % paths.n_paths
    starts = np.r_[0, np.nonzero(np.diff(arc))[0] + 1]
    arcs_used = arc[starts]
    r1, r2 = _hash_weights(paths.n_paths)
    h1 = np.add.reduceat(r1[path], starts)
    h2 = np.add.reduceat(r2[path], starts)
    count = np.diff(np.r_[starts, arc.size])
    table = np.stack([h1.view(np.int64), h2.view(np.int64), count], axis=1)
    rep, group = _groups(_row_hash(table))
    # verify: each arc's path count and sorted path list equal its group representative's
    same_len = count == count[rep[group]]
    offs = np.arange(arc.size) - np.repeat(starts, count)
    check = np.repeat(same_len, count)
    theirs = np.full(arc.size, -1, dtype=np.int64)
    theirs[check] = path[np.repeat(starts[rep[group]], count)[check] + offs[check]]
    bad = np.unique(np.repeat(np.arange(arcs_used.size), count)[path != theirs])
    if bad.size:  # a hash collision: those arcs stay on their own
        group = group.copy()
        group[bad] = group.max() + 1 + np.arange(bad.size)
    # per group keep the arc of least capacity (ties: lowest id)
    order = np.lexsort((arcs_used, cap[arcs_used], group))
    first = order[np.r_[True, group[order][1:] != group[order][:-1]]]
    out = binding.copy()
    out[arcs_used] = False
    out[arcs_used[first]] = True
    return out, int(arcs_used.size - first.size)


def reduce_total_flow(network: TeNetwork, demands: Demands, paths: PathSet,
                      capacity_factor: float | np.ndarray = 1.0) -> Reduction:
    """Apply steps 1-4 of the module docstring; exact (the reduced LP has the same optimum)."""
    t0 = time.perf_counter()
    cap = network.arc_cap * capacity_factor
    vol = np.asarray(demands.volume, dtype=float)
    n_dem, n_paths = len(demands), paths.n_paths
    owner = paths.owner()
    active, binding, fixed, rounds = _free_demands(vol, cap, paths, owner)
    keep = active[paths.demand]
    n_binding = np.bincount(owner, weights=binding[paths.arcs], minlength=n_paths).astype(np.int64)
    _, first = np.unique(paths.demand, return_index=True)
    local = np.arange(n_paths) - first[paths.demand]
    k_max = int(local.max(initial=-1)) + 1
    n_dominated = 0
    if keep.any() and k_max <= MAX_PATHS_FOR_DOMINATION:
        dominated = _dominated(paths, keep, binding, owner, local, n_binding, k_max)
        n_dominated = int(dominated.sum())
        keep &= ~dominated
    binding, n_series = _drop_parallel_rows(paths, keep, binding, owner, cap)
    n_binding = np.bincount(owner, weights=binding[paths.arcs], minlength=n_paths).astype(np.int64)
    set_id = _set_ids(paths, keep, binding, owner, n_binding)
    # equal sets within one demand (left when domination was skipped): keep the first
    kept = np.nonzero(keep)[0]
    _, first_of_pair = np.unique(paths.demand[kept] * (int(set_id.max(initial=0)) + 1) + set_id[kept],
                                 return_index=True)
    duplicate = np.ones(kept.size, dtype=bool)
    duplicate[first_of_pair] = False
    keep[kept[duplicate]] = False
    n_dominated += int(duplicate.sum())
    # step 4b: demand signature = its kept paths' set ids, sorted and padded
    kept = np.nonzero(keep)[0]
    act = np.nonzero(active)[0]
    sig = np.full((n_dem, max(k_max, 1)), -1, dtype=np.int64)
    sig[paths.demand[kept], local[kept]] = set_id[kept]
    sig = np.sort(sig[act], axis=1)
    rep_pos, commodity_of_act = _groups(_row_hash(sig))
    wrong = np.nonzero((sig != sig[rep_pos[commodity_of_act]]).any(axis=1))[0]
    if wrong.size:  # a hash collision: those demands stay commodities of their own
        commodity_of_act[wrong] = rep_pos.size + np.arange(wrong.size)
        rep_pos = np.concatenate([rep_pos, wrong])
    n_com = rep_pos.size
    commodity = np.full(n_dem, -1, dtype=np.int64)
    commodity[act] = commodity_of_act
    com_volume = np.bincount(commodity_of_act, weights=vol[act], minlength=n_com)
    rep_dem = act[rep_pos]
    # reduced paths: the representative's kept paths (in its original order)
    is_rep = np.zeros(n_dem, dtype=bool)
    is_rep[rep_dem] = True
    rep_paths = kept[is_rep[paths.demand[kept]]]
    rep_paths = rep_paths[np.lexsort((rep_paths, commodity[paths.demand[rep_paths]]))]
    red_demand = commodity[paths.demand[rep_paths]]
    kept_arcs = np.nonzero(binding)[0]
    remap = np.full(binding.size, -1, dtype=np.int64)
    remap[kept_arcs] = np.arange(kept_arcs.size)
    red_lens = n_binding[rep_paths]
    red_ptr = np.zeros(rep_paths.size + 1, dtype=np.int64)
    np.cumsum(red_lens, out=red_ptr[1:])
    _, gather = paths.entries(rep_paths)
    gather = gather[binding[paths.arcs[gather]]]
    red_paths = PathSet(demand=red_demand, ptr=red_ptr, arcs=remap[paths.arcs[gather]])
    # every kept original path -> the reduced path of its commodity with the same set id
    red_key = red_demand * (int(set_id.max(initial=0)) + 1) + set_id[rep_paths]
    member_key = commodity[paths.demand[kept]] * (int(set_id.max(initial=0)) + 1) + set_id[kept]
    order = np.argsort(red_key)
    member_reduced = order[np.searchsorted(red_key, member_key, sorter=order)]
    member_share = vol[paths.demand[kept]] / com_volume[commodity[paths.demand[kept]]]
    red_network = TeNetwork(nodes=network.nodes, arc_src=network.arc_src[kept_arcs],
                            arc_dst=network.arc_dst[kept_arcs], arc_cap=cap[kept_arcs],
                            arc_weight=network.arc_weight[kept_arcs], weight_name=network.weight_name)
    red_demands = Demands(demands.src[rep_dem], demands.dst[rep_dem], com_volume)
    fixed_dem = np.nonzero(fixed >= 0)[0]
    stats = {
        "presolve_s": time.perf_counter() - t0,
        "rounds": rounds,
        "arcs": int(binding.size), "arcs_kept": int(kept_arcs.size),
        "demands": n_dem, "demands_fixed": int(fixed_dem.size),
        "fixed_volume_fraction": float(vol[fixed_dem].sum() / vol.sum()) if vol.sum() > 0 else 0.0,
        "arcs_in_series": n_series,
        "paths": n_paths, "paths_dominated": n_dominated,
        "commodities": int(n_com), "reduced_paths": int(rep_paths.size),
        "reduced_arc_entries": int(red_paths.arcs.size),
    }
    return Reduction(network=red_network, demands=red_demands, paths=red_paths, n_paths=n_paths,
                     fixed_path=fixed[fixed_dem], fixed_volume=vol[fixed_dem], member_path=kept,
                     member_reduced=member_reduced, member_share=member_share, kept_arcs=kept_arcs,
                     stats=stats)


def dual_bound(network: TeNetwork, demands: Demands, paths: PathSet, arc_price: np.ndarray,
               capacity_factor: float | np.ndarray = 1.0) -> float:
    """Objective of the dual solution ``(arc_price, mu)`` of the total-flow path LP, with the best
    ``mu_d = max(0, 1 - shortest priced candidate of d)``: an upper bound on the optimum (Mbit/s)."""
    price = np.maximum(arc_price, 0.0)
    length = paths.path_cost(price)
    shortest = np.full(len(demands), np.inf)
    np.minimum.at(shortest, paths.demand, length)
    cap = network.arc_cap * capacity_factor
    return float(cap @ price + demands.volume @ np.maximum(0.0, 1.0 - shortest))
