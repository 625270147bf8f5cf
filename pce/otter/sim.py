"""Flow-arrival simulator reproducing OTTER's controller evaluation (§7.2, Table 4/5).

Events in time order (ties: departures, then LP installs, then LP starts, then arrivals):
- arrival: GREEDY placement (every policy places new flows greedily at once);
- departure: bandwidth and resources are released;
- PER: every ``period`` simulated seconds the LP is solved over the active flows; its result is
  installed ``delay`` later, where delay = the measured wall time of build+solve (default) or a
  fixed ``solve_delay``. Flows that arrived meanwhile were placed greedily; at install they are
  re-placed greedily, in arrival order, on what the LP left. The next solve starts at
  max(previous start + period, install time) — one optimiser in the background.
- OPT (infinitely fast optimiser, re-optimising at every arrival) is approximated by
  re-optimising at every ``opt_epoch`` boundary with zero delay, arrivals in between placed
  greedily; ``opt_epoch → 0`` is exact OPT (one LP per arrival is intractable here).
The run stops at the last arrival (``until``): lifetimes are censored there, i.e. each flow's
allocated *and* requested bytes count only up to that time. Running on with no arrivals would
measure an emptying network in which OPT (re-optimising on arrivals) never reuses the capacity
freed by departures while PER (periodic) does — an artefact of the finite run, not of the policies.
Epochs of OPT without an arrival are skipped (nothing new to place).

Only flows arriving within [measure_from, measure_to] enter the metrics; flows before (warm-up)
and after (cool-down) keep the network loaded while the measured flows live, so that the
measured flows see steady-state contention rather than an emptying network.

An LP result due after the end is never installed: a PER whose solves all take longer than the
run (e.g. one LP over ~400,000 flows at full scale) placed every flow greedily, so its figures are
GREEDY's; ``installs`` (0 then) says so, and ``mlte pce otter-sim`` prints it instead of passing
them off as PER's.

Metrics per policy: ``allocated_bytes_fraction`` = Σ allocated bytes / Σ requested bytes
(bw_f × duration_f); ``mean_flow_allocated_fraction`` = the per-flow mean of the same ratio;
``satisfaction`` = per-flow time average of Σ_p (x_{f,p}/bw_f) · mean_m 𝒟_f^m(σ_p), averaged over
flows; LP solve times (wall seconds, build included).
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pce.errors import InvalidInputError
from pce.otter.aggregate import Candidates, candidates
from pce.otter.baselines import Placement, Policy, get_policy
from pce.otter.scenario import FlowSet, Network


@dataclass
class PolicyResult:
    policy: str
    flows: int
    allocated_bytes_fraction: float
    mean_flow_allocated_fraction: float
    satisfaction: float
    solves: int = 0
    installs: int = 0  # LP results installed before the run ended (a PER solve slower than the run never is)
    solve_seconds: list[float] = field(default_factory=list)
    lp_columns: list[int] = field(default_factory=list)
    lp_aggregates: list[int] = field(default_factory=list)
    wall_seconds: float = 0.0

    def as_dict(self) -> dict:
        st = np.array(self.solve_seconds) if self.solve_seconds else np.zeros(0)
        return {
            "policy": self.policy,
            "flows": self.flows,
            "allocated_bytes_fraction": self.allocated_bytes_fraction,
            "mean_flow_allocated_fraction": self.mean_flow_allocated_fraction,
            "satisfaction": self.satisfaction,
            "solves": self.solves,
            "installs": self.installs,
            "solve_seconds": {
                "mean": float(st.mean()) if st.size else None,
                "max": float(st.max()) if st.size else None,
                "total": float(st.sum()),
            },
            "lp_columns_mean": float(np.mean(self.lp_columns)) if self.lp_columns else None,
            "lp_aggregates_mean": float(np.mean(self.lp_aggregates)) if self.lp_aggregates else None,
            "wall_seconds": self.wall_seconds,
        }


class _Clock:
    """Per-flow integrals of allocated rate and satisfaction over time."""

    def __init__(self, n: int):
        self.bytes = np.zeros(n)
        self.sat = np.zeros(n)
        self.last = np.zeros(n)

    def advance(self, idx, t: float, placement: Placement) -> None:
        dt = t - self.last[idx]
        self.bytes[idx] += placement.rate[idx] * dt
        self.sat[idx] += placement.sat[idx] * dt
        self.last[idx] = t


def simulate(
    network: Network,
    flows: FlowSet,
    policy: Policy | str,
    *,
    cand: Candidates | None = None,
    top_n: int = 4,
    period: float = 1.0,
    solve_delay: float | None = None,
    opt_epoch: float = 0.1,
    measure_from: float = -np.inf,
    measure_to: float = np.inf,
    backend: str = "matrix",
    solver: str = "highs",
    progress: Callable[[str], None] | None = None,
    greedy_ties: str = "first",
    until: float | None = None,
) -> PolicyResult:
    """Run one policy over the flows' arrivals; see the module docstring for the semantics."""
    policy = get_policy(policy) if isinstance(policy, str) else policy
    if period <= 0 or opt_epoch <= 0:
        raise InvalidInputError("period and opt-epoch must be > 0")
    if solve_delay is not None and solve_delay < 0:
        raise InvalidInputError("solve delay must be ≥ 0")
    wall0 = time.perf_counter()
    n = len(flows)
    cand = candidates(network, flows, top_n) if cand is None else cand
    place = Placement(network, flows, cand, greedy_ties)
    clock = _Clock(n)
    arrival, end = flows.arrival, flows.arrival + flows.duration
    order = np.argsort(arrival, kind="stable")
    dep = np.argsort(end, kind="stable")
    horizon = float(until) if until is not None else (float(arrival.max()) if n else 0.0)
    active = np.zeros(n, bool)
    arrived_at = np.full(n, -1, np.int64)  # arrival sequence number
    result = PolicyResult(policy.name, n, 0.0, 0.0, 0.0)
    step = {"periodic": period, "opt": opt_epoch}.get(policy.mode)
    next_solve = (float(arrival.min()) + step) if (step and n) else np.inf  # first LP one step after the first arrival
    pending = None  # (install time, solution, arrival seq at snapshot)
    ia = idp = 0
    last_report = time.perf_counter()

    def run_lp(t: float):
        snap = np.flatnonzero(active)
        sol, secs = place.solve(snap, policy.pin, top_n=top_n, backend=backend, solver=solver)
        result.solves += 1
        result.solve_seconds.append(secs)
        result.lp_columns.append(sol.problem.n_cols)
        result.lp_aggregates.append(sol.problem.n_aggs)
        return sol, secs

    def install(t: float, sol, seq: int) -> None:
        act = np.flatnonzero(active)
        clock.advance(act, t, place)
        place.install(sol, active)
        result.installs += 1
        late = act[arrived_at[act] >= seq]  # arrived during the solve: greedy on what is left
        late = late[np.argsort(arrived_at[late])]
        for f in late:
            place.flow_group[f] = -1
            place.rate[f] = place.sat[f] = 0.0
            place.greedy_place(int(f))

    while True:
        t_arr = arrival[order[ia]] if ia < n else np.inf
        t_dep = end[dep[idp]] if idp < n else np.inf
        t_inst = pending[0] if pending is not None else np.inf
        t_solve = next_solve if pending is None else np.inf
        if policy.mode == "opt" and t_solve < np.inf and ia > 0 and arrival[order[ia - 1]] <= t_solve - step:
            # OPT: no arrival in the last epoch → nothing to re-optimise; jump to the next arrival's epoch
            if ia >= n:
                t_solve = np.inf
            else:
                t_solve = next_solve = (np.floor(t_arr / step) + 1) * step
        t = min(t_arr, t_dep, t_inst, t_solve)
        if t == np.inf or t > horizon:
            break
        if t_dep == t:
            f = int(dep[idp])
            idp += 1
            if active[f]:
                clock.advance([f], t, place)
                place.release(f)
                active[f] = False
        elif t_inst == t:
            install(t, pending[1], pending[2])
            pending = None
        elif t_solve == t and not active.any():
            next_solve = t + step
        elif t_solve == t:
            sol, secs = run_lp(t)
            if policy.mode == "opt":
                install(t, sol, ia)
                next_solve = t + step
            else:
                delay = secs if solve_delay is None else solve_delay
                pending = (t + delay, sol, ia)
                next_solve = t + max(step, delay)
        else:
            f = int(order[ia])
            arrived_at[f] = ia
            ia += 1
            active[f] = True
            clock.last[f] = t
            place.greedy_place(f)
        if progress is not None and time.perf_counter() - last_report > 2.0:
            last_report = time.perf_counter()
            progress(
                f"{policy.name}: t={t:.2f}/{horizon:.2f}s arrived={ia} active={int(active.sum())} solves={result.solves}"
            )
    # censor at the horizon: flows still active stop counting there, requested bytes too
    act = np.flatnonzero(active)
    clock.advance(act, horizon, place)
    lived = np.minimum(end, horizon) - arrival
    m = (arrival >= measure_from) & (arrival <= measure_to) & (lived > 1e-9)
    requested = flows.bw[m] * lived[m]
    result.allocated_bytes_fraction = float(clock.bytes[m].sum() / requested.sum()) if m.any() else 0.0
    result.mean_flow_allocated_fraction = float(np.mean(clock.bytes[m] / requested)) if m.any() else 0.0
    result.satisfaction = float(np.mean(clock.sat[m] / lived[m])) if m.any() else 0.0
    result.flows = int(m.sum())
    result.wall_seconds = time.perf_counter() - wall0
    return result


def stderr_progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
