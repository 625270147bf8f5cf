"""Allocation state and the §7.2 policies: GREEDY, PER(+PATHPIN/DSTPIN), OPT(+PATHPIN/DSTPIN).

``Placement`` holds link loads, destination resource use and each flow's routing *group* (paths,
fraction of the flow's bw on each, candidate slots); flows of one LP aggregate share a group.
GREEDY = ``Placement.greedy_place``: the best-scoring candidate (path, destination) that still
has room on every link and resource, partial allocation (min of demand, path residual and the
resource-limited rate). ``Placement.reoptimise`` runs the LP over the active flows honouring pins
(PATHPIN: sensitive flows may only use the paths they are on; DSTPIN: only paths to their current
destinations) and installs the result. The event loop that decides *when* lives in ``sim.py``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from pce.errors import InvalidInputError
from pce.otter.aggregate import Candidates
from pce.otter.demand import N_METRICS
from pce.otter.matrix import solve_problem
from pce.otter.problem import LpSolution, make_problem
from pce.otter.profiles import SENSITIVE
from pce.otter.scenario import FlowSet, Network

PIN_NONE, PIN_PATH, PIN_DST = "none", "path", "dst"
#: Equal best scores: "first" = the literal argmax (first candidate: lowest destination, then path
#: index); "room" = the candidate with most room (a stronger, load-balancing greedy).
GREEDY_TIES = ("first", "room")


@dataclass(frozen=True)
class Policy:
    """``mode``: greedy | periodic | opt; ``pin``: none | path | dst."""

    name: str
    mode: str
    pin: str = PIN_NONE


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("GREEDY", "greedy"),
        Policy("PER", "periodic"),
        Policy("PER+PATHPIN", "periodic", PIN_PATH),
        Policy("PER+DSTPIN", "periodic", PIN_DST),
        Policy("OPT", "opt"),
        Policy("OPT+PATHPIN", "opt", PIN_PATH),
        Policy("OPT+DSTPIN", "opt", PIN_DST),
    )
}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name.upper()]
    except KeyError:
        raise InvalidInputError(f"unknown policy {name!r} (choose from {', '.join(POLICIES)})") from None


def sensitive_flows(flows: FlowSet) -> np.ndarray:
    """Flows whose profile is RTT/jitter-sensitive (see profiles.is_sensitive); hand-built: none."""
    table = np.array(SENSITIVE + (False,))
    return table[np.where(flows.profile >= 0, flows.profile, len(SENSITIVE))]


class Placement:
    """Where every flow is placed and what that uses; rates in Mbit/s."""

    def __init__(self, network: Network, flows: FlowSet, cand: Candidates, greedy_ties: str = "first"):
        if greedy_ties not in GREEDY_TIES:
            raise InvalidInputError(f"unknown greedy tie rule {greedy_ties!r} (choose from {', '.join(GREEDY_TIES)})")
        self.tie_first = greedy_ties == "first"
        self.net, self.flows, self.cand = network, flows, cand
        n = len(flows)
        self.link_load = np.zeros(network.n_links)
        self.dest_use = np.zeros((network.n_dests, 3))
        self.flow_group = np.full(n, -1, np.int64)
        self.groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.rate = np.zeros(n)  # allocated Mbit/s
        self.sat = np.zeros(n)  # Σ_p frac_p · mean_m 𝒟(σ_p): satisfaction right now
        self.sensitive = sensitive_flows(flows)

    # --- per-flow operations (GREEDY) ---------------------------------------------------------
    def _path_residual(self, paths: np.ndarray) -> np.ndarray:
        pl = self.net.path_links[paths]
        free = self.net.link_cap - self.link_load
        return np.where(pl >= 0, free[np.where(pl >= 0, pl, 0)], np.inf).min(axis=1)

    def greedy_place(self, f: int) -> float:
        """Place flow f on its best-scoring candidate with room; returns the Mbit/s placed."""
        net, cand = self.net, self.cand
        paths = cand.paths[f]
        valid = paths >= 0
        p = np.where(valid, paths, 0)
        bw = float(self.flows.bw[f])
        room = self._path_residual(p)
        need = self.flows.res[f]
        d = net.path_dst[p]
        free = net.dest_cap[d] - self.dest_use[d]  # (C, 3); inf at DCs
        with np.errstate(divide="ignore", invalid="ignore"):
            lim = np.where(need > 0, free / np.where(need > 0, need, 1.0) * bw, np.inf).min(axis=1)
        room = np.where(valid, np.minimum(room, lim), 0.0)
        avail = np.minimum(room, bw)
        ok = avail > 1e-9 * bw
        if not ok.any():
            return 0.0
        s = np.where(ok, cand.score[f], -np.inf)
        best = np.flatnonzero(s >= s.max() - 1e-9)
        j = int(best[0]) if self.tie_first else int(best[np.argmax(room[best])])
        amount = float(avail[j])
        self._set_group(f, (paths[j : j + 1], np.array([amount / bw]), np.array([j])))
        return amount

    def _set_group(self, f: int, group: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.groups.append(group)
        self.flow_group[f] = len(self.groups) - 1
        self._account(f, group, +1.0)

    def _account(self, f: int, group, sign: float) -> None:
        paths, frac, slots = group
        bw = self.flows.bw[f]
        pl = self.net.path_links[paths]
        m = pl >= 0
        np.add.at(self.link_load, pl[m], sign * np.broadcast_to((bw * frac)[:, None], pl.shape)[m])
        np.add.at(self.dest_use, self.net.path_dst[paths], sign * frac[:, None] * self.flows.res[f][None, :])
        if sign > 0:
            self.rate[f] = bw * frac.sum()
            self.sat[f] = float(frac @ self.cand.score[f, slots]) / N_METRICS
        else:
            self.rate[f] = 0.0
            self.sat[f] = 0.0

    def release(self, f: int) -> None:
        """Flow f departs (or is unplaced): give back its bandwidth and resources."""
        g = self.flow_group[f]
        if g >= 0:
            self._account(f, self.groups[g], -1.0)
            self.flow_group[f] = -1

    # --- LP re-optimisation (PER / OPT) ---------------------------------------------------------
    def pins(self, active: np.ndarray, pin: str) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(allowed slots, pin key) for the active flows under PATHPIN/DSTPIN; (None, None) if none."""
        if pin == PIN_NONE:
            return None, None
        if pin not in (PIN_PATH, PIN_DST):
            raise InvalidInputError(f"unknown pin mode {pin!r}")
        n_slots = self.cand.paths.shape[1]
        allowed = np.ones((len(active), n_slots), bool)
        key = np.full(len(active), -1, np.int64)
        g = self.flow_group[active]
        pinned = np.flatnonzero(self.sensitive[active] & (g >= 0) & (self.rate[active] > 0))
        slot_dest = self.net.path_dst[np.where(self.cand.paths[active[pinned]] >= 0, self.cand.paths[active[pinned]], 0)]
        masks: dict[int, np.ndarray] = {}
        for row, i in enumerate(pinned):
            grp = int(g[i])
            paths, frac, slots = self.groups[grp]
            if pin == PIN_PATH:
                if grp not in masks:
                    m = np.zeros(n_slots, bool)
                    m[slots] = True
                    masks[grp] = m
                allowed[i] = masks[grp]
                key[i] = grp
            else:
                dests = np.unique(self.net.path_dst[paths])
                allowed[i] = np.isin(slot_dest[row], dests) & (self.cand.paths[active[i]] >= 0)
                key[i] = int(sum(1 << int(k) for k in np.flatnonzero(np.isin(self.cand.dests[active[i]], dests))))
        return allowed, key

    def solve(
        self, active: np.ndarray, pin: str = PIN_NONE, *, top_n: int = 4, backend: str = "matrix", solver: str = "highs",
        aggregate: bool = True, use_c4: bool = True,
    ) -> tuple[LpSolution, float]:
        """LP over the active flows with the pins; returns (solution, wall seconds incl. build)."""
        t0 = time.perf_counter()
        allowed, key = self.pins(active, pin)
        problem = make_problem(
            self.net, self.flows, active, top_n=top_n, cand=self.cand.take(active),
            aggregate=aggregate, allowed=allowed, pin_key=key, use_c4=use_c4,
        )
        sol = solve_problem(problem, backend, solver)
        return sol, time.perf_counter() - t0

    def install(self, sol: LpSolution, still_active: np.ndarray) -> None:
        """Route every flow of ``sol`` that is still active as the LP says; loads are recomputed
        from scratch for exactly these flows (callers re-place any others afterwards)."""
        prob = sol.problem
        keep = still_active[prob.flow_idx]
        flows_in = prob.flow_idx[keep]
        aggs_in = prob.flow_agg[keep]
        base = len(self.groups)
        self.groups.extend(sol.path_fractions())
        self.link_load[:] = 0.0
        self.dest_use[:] = 0.0
        self.flow_group[flows_in] = base + aggs_in
        bw, res = self.flows.bw, self.flows.res
        agg_bw = np.bincount(aggs_in, bw[flows_in], prob.n_aggs)
        agg_res = np.stack([np.bincount(aggs_in, res[flows_in, j], prob.n_aggs) for j in range(3)], axis=1)
        order = np.argsort(aggs_in, kind="stable")
        starts = np.searchsorted(aggs_in[order], np.arange(prob.n_aggs + 1))
        path_load = np.zeros(self.net.n_paths)
        for a in np.flatnonzero(agg_bw > 0):
            paths, frac, slots = self.groups[base + a]
            members = flows_in[order[starts[a] : starts[a + 1]]]
            if paths.size == 0:
                self.rate[members] = 0.0
                self.sat[members] = 0.0
                continue
            np.add.at(path_load, paths, agg_bw[a] * frac)
            np.add.at(self.dest_use, self.net.path_dst[paths], frac[:, None] * agg_res[a][None, :])
            self.rate[members] = bw[members] * frac.sum()
            self.sat[members] = self.cand.score[members][:, slots] @ frac / N_METRICS
        pl = self.net.path_links
        m = pl >= 0
        np.add.at(self.link_load, pl[m], np.broadcast_to(path_load[:, None], pl.shape)[m])

    def residual_ok(self, tol: float = 1e-6) -> bool:
        """Invariant check used by tests: no link or edge resource over capacity."""
        over_l = self.link_load - self.net.link_cap
        over_d = (self.dest_use - self.net.dest_cap)[self.net.dest_is_edge]
        return bool((over_l <= tol * np.maximum(1, self.net.link_cap)).all() and (over_d <= tol * 1e3).all())
