"""Column generation for graph-mode OTTER placement (issue 27): the LP over *all* paths.

Why: with a fixed k candidate paths per pair the answer depends on the guess — on Fig. 2 the four
one-circuit candidates of A→C were near-copies through one adaptation port, so a pair needing two
circuits got one. Here the LP starts from a small diverse set (``INITIAL_K`` lit paths and
``INITIAL_K`` one-circuit paths per pair, circuits with disjoint optical ports first, plus every
flow's current path) and grows it: each round solves the restricted master, takes its duals and
searches, per (source, destination, restriction) group, the path of best reduced cost

    rc(a, p) = coef_a(p) · (1 − price·[p crosses an unlit circuit]) − Σ_{r ∈ p} y_r − z_a

over the packet layer: lit links and candidate circuits, whose cost includes the duals of the
optical ports they would occupy (adaptation ports and fibre wavelengths are LP rows of capacity one
circuit, so two circuits through one port cannot both be counted). ``coef_a`` is not additive
(tolerances of RTT, jitter and loss, bandwidth as a step), but it only falls as the path's latency,
jitter and loss grow and its bottleneck shrinks, so a label search keeps the Pareto set of
(dual cost, latency, jitter, −log keep, bottleneck clamped at the largest flow, crosses a circuit)
per switch — the best path of every aggregate of the group is among the labels reaching the
destination. Labels whose dual cost plus the cheapest dual cost to the destination leaves no
aggregate a positive reduced cost are dropped. Paths are simple (no switch twice).

When a round adds no column, (y, z) is feasible for the dual of the LP over every simple path: the
master's optimum is the optimum over all paths (``certified``). The master is one ``Highs`` object:
new columns enter at 0, so the previous basis stays feasible and the simplex continues from it.
"""
from __future__ import annotations

import heapq
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pce.errors import InfeasibleError, SolverError
from pce.highs import new_highs
from pce.otter.demand import N_METRICS, score
from pce.otter.scenario import FlowSet

#: Lit and one-circuit paths per pair in the initial set.
INITIAL_K = 2
#: Reduced cost a column needs to enter (objective units per Mbit/s).
TOLERANCE = 1e-7
#: Safety stop; a run that reaches it is reported as not certified.
MAX_ROUNDS = 60


@dataclass
class ColgenResult:
    """Candidate paths per (source, destination) switch pair and how the generation went."""

    paths: dict[tuple[str, str], list]  # CandidatePath lists, initial ones first
    rounds: int
    initial_paths: int
    generated_paths: int
    columns: int  # LP columns of the final master
    generated_columns: int
    certified: bool  # no column with positive reduced cost is left
    objective: float  # priced LP optimum
    seconds: float
    pricing_seconds: float
    history: list[dict[str, float]] = field(default_factory=list)

    def stats(self) -> dict[str, object]:
        return {"colgen_rounds": self.rounds, "colgen_initial_paths": self.initial_paths,
                "colgen_generated_paths": self.generated_paths, "colgen_columns": self.columns,
                "colgen_generated_columns": self.generated_columns, "colgen_certified": self.certified,
                "colgen_lp_objective": self.objective, "colgen_seconds": self.seconds,
                "colgen_pricing_seconds": self.pricing_seconds}


@dataclass(frozen=True)
class Group:
    """Aggregates priced together: one ordered switch pair and one restriction (avoid, deadline)."""

    src: str
    dst: str
    avoid: frozenset[str]  # hop ends (``A:3-C:1``) the flows must not use
    deadline: float | None  # circuits with a longer setup are excluded


class Resources:
    """LP capacity rows: every hop, then every optical port a candidate circuit occupies."""

    def __init__(self, hops: Sequence, capacity: Mapping[str, float]) -> None:
        self.hops = list(hops)
        self.hop_index = {h.id: i for i, h in enumerate(self.hops)}
        ports: dict[str, float] = {}
        for h in self.hops:
            if h.circuit is not None:
                for o in h.circuit.oports:
                    ports[o] = max(ports.get(o, 0.0), float(h.circuit.capacity))
        self.ports = sorted(ports)
        self.port_index = {o: len(self.hops) + i for i, o in enumerate(self.ports)}
        self.cap = np.array([capacity.get(h.id, h.capacity) for h in self.hops] + [ports[o] for o in self.ports], float)
        # per hop: its own row and the port rows of its circuit
        self.rows_of_hop = [[i] + ([self.port_index[o] for o in h.circuit.oports] if h.circuit is not None else [])
                            for i, h in enumerate(self.hops)]

    @property
    def names(self) -> list[str]:
        return [h.id for h in self.hops] + [f"oport:{o}" for o in self.ports]

    def rows_of_path(self, path) -> list[int]:
        return [r for h in path.hops for r in self.rows_of_hop[self.hop_index[h.id]]]


def path_allowed(path, group: Group) -> bool:
    """Whether ``path`` respects the group's avoid set and deadline."""
    if group.deadline is not None and any(c.setup_time > group.deadline for c in path.circuits):
        return False
    return not group.avoid or group.avoid.isdisjoint(h.id.split("[", 1)[0] for h in path.hops)


class Master:
    """The restricted OTTER LP: rows z_a (aggregate bandwidth) then y_r (capacities)."""

    def __init__(self, agg_bw: np.ndarray, cap: np.ndarray) -> None:
        import highspy

        self.A, self.R = len(agg_bw), len(cap)
        self.h = new_highs(1)
        self.h.setOptionValue("solver", "simplex")
        inf = highspy.kHighsInf
        rhs = np.concatenate([agg_bw, cap]).astype(float)
        self.h.addRows(len(rhs), np.full(len(rhs), -inf), rhs, 0, np.zeros(1, np.int32), np.zeros(0, np.int32),
                       np.zeros(0))
        self.n_cols = 0
        self.coef: list[float] = []

    def add(self, cols: Sequence[tuple[int, float, Sequence[int]]]) -> None:
        """Columns (aggregate, objective coefficient, resource rows; a row listed twice counts twice)."""
        if not cols:
            return
        starts, index, value = [], [], []
        for a, _coef, rows in cols:
            starts.append(len(index))
            counts: dict[int, int] = defaultdict(int)
            for r in rows:
                counts[self.A + r] += 1
            index += [a, *counts]
            value += [1.0, *map(float, counts.values())]
        n = len(cols)
        coef = np.array([c for _a, c, _r in cols], float)
        self.h.addCols(n, -coef, np.zeros(n), np.full(n, np.inf), len(index), np.array(starts, np.int32),
                       np.array(index, np.int32), np.array(value, float))
        self.n_cols += n
        self.coef += coef.tolist()

    def solve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """(x, z ≥ 0, y ≥ 0, objective); HiGHS minimises −coef·x, so a binding row's dual is ≤ 0."""
        import highspy

        if not self.n_cols:
            return np.zeros(0), np.zeros(self.A), np.zeros(self.R), 0.0
        self.h.run()
        status = self.h.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            raise InfeasibleError("the OTTER master LP is infeasible")
        if status != highspy.HighsModelStatus.kOptimal:
            raise SolverError(f"HiGHS did not reach an optimum: {self.h.modelStatusToString(status)}")
        sol = self.h.getSolution()
        dual = np.maximum(0.0, -np.asarray(sol.row_dual, float))
        x = np.maximum(0.0, np.asarray(sol.col_value, float))
        return x, dual[: self.A], dual[self.A:], float(np.dot(self.coef, x))


class Pricer:
    """Best reduced-cost paths over the hops (module docstring), one label search per group."""

    def __init__(self, switches: Sequence[str], res: Resources, hop_ms: Sequence[float]) -> None:
        self.node = {s: i for i, s in enumerate(switches)}
        self.names = list(switches)
        hops = res.hops
        self.res = res
        self.ends = [(self.node[h.a], self.node[h.b]) for h in hops]
        self.w = list(hop_ms)
        self.jit = [h.jitter for h in hops]
        self.loss = [-math.log1p(-min(h.loss_pct, 100.0) / 100.0) if h.loss_pct < 100.0 else math.inf for h in hops]
        self.cap = [h.capacity for h in hops]
        self.circ = [h.circuit is not None for h in hops]
        self.setup = [h.circuit.setup_time if h.circuit is not None else 0.0 for h in hops]
        self.end_id = [h.id.split("[", 1)[0] for h in hops]
        self.adj: list[list[tuple[int, int]]] = [[] for _ in switches]
        for k, (a, b) in enumerate(self.ends):
            self.adj[a].append((b, k))
            self.adj[b].append((a, k))
        rows, cols = [], []
        for k, rs in enumerate(res.rows_of_hop):
            rows += [k] * len(rs)
            cols += rs
        import scipy.sparse as sp

        self.hop_rows = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(hops), len(res.cap)))

    def set_duals(self, y: np.ndarray) -> None:
        """Hop dual costs and the all-pairs cheapest dual cost (a lower bound on any rest of a path)."""
        self.cost = (self.hop_rows @ y).tolist()
        n = len(self.names)
        dist = np.full((n, n), np.inf)
        np.fill_diagonal(dist, 0.0)
        for k, (a, b) in enumerate(self.ends):
            c = self.cost[k]
            if c < dist[a, b]:
                dist[a, b] = dist[b, a] = c
        for m in range(n):
            dist = np.minimum(dist, dist[:, m:m + 1] + dist[m:m + 1, :])
        self.lower = dist

    def labels(self, g: Group, bound: float, bmax: float) -> list[tuple]:
        """Non-dominated labels reaching ``g.dst``: (cost, ms, jitter, −log keep, bottleneck, circuit,
        hop ids); only labels that can still price below ``bound`` are kept."""
        s, d = self.node[g.src], self.node[g.dst]
        lower = self.lower[:, d].tolist()
        if lower[s] >= bound:
            return []
        banned = [False] * len(self.w)
        if g.avoid or g.deadline is not None:
            banned = [self.end_id[k] in g.avoid or (g.deadline is not None and self.setup[k] > g.deadline)
                      for k in range(len(self.w))]
        # label: [cost, ms, jitter, loss, bottleneck, circuit, node, visited mask, parent, hop, alive]
        labels: list[list] = [[0.0, 0.0, 0.0, 0.0, bmax, False, s, 1 << s, -1, -1, True]]
        front: list[list[int]] = [[] for _ in self.names]
        front[s].append(0)
        heap = [(0.0, 0.0, 0)]
        cost, w, jit, loss, cap, circ, adj = self.cost, self.w, self.jit, self.loss, self.cap, self.circ, self.adj
        eps = 1e-12
        while heap:
            _c, _w, li = heapq.heappop(heap)
            lab = labels[li]
            if not lab[10] or lab[6] == d:
                continue
            c0, w0, j0, l0, b0, k0, _u, mask = lab[:8]
            for v, k in adj[lab[6]]:
                if mask >> v & 1 or banned[k]:
                    continue
                c1 = c0 + cost[k]
                if c1 + lower[v] >= bound:
                    continue
                w1, j1, l1 = w0 + w[k], j0 + jit[k], l0 + loss[k]
                b1 = min(b0, cap[k])
                k1 = k0 or circ[k]
                dominated = False
                keep = []
                for oi in front[v]:
                    o = labels[oi]
                    if (o[0] <= c1 + eps and o[1] <= w1 + eps and o[2] <= j1 + eps and o[3] <= l1 + eps
                            and o[4] >= b1 - eps and (not o[5] or k1)):
                        dominated = True
                        break
                    if (c1 <= o[0] + eps and w1 <= o[1] + eps and j1 <= o[2] + eps and l1 <= o[3] + eps
                            and b1 >= o[4] - eps and (not k1 or o[5])):
                        o[10] = False
                    else:
                        keep.append(oi)
                if dominated:
                    continue
                keep.append(len(labels))
                front[v] = keep
                labels.append([c1, w1, j1, l1, b1, k1, v, mask | 1 << v, li, k, True])
                heapq.heappush(heap, (c1, w1, len(labels) - 1))
        out = []
        for li in front[d]:
            lab = labels[li]
            hops = []
            at = li
            while labels[at][8] >= 0:
                hops.append(labels[at][9])
                at = labels[at][8]
            out.append((lab[0], lab[1], lab[2], lab[3], lab[4], lab[5], tuple(reversed(hops))))
        return out


def _scores(fs: FlowSet, members: np.ndarray, metrics: np.ndarray) -> np.ndarray:
    """Σ_m 𝒟 of each member flow (rows) on each path (columns, metrics rows)."""
    return score(fs.shapes[members][:, None, :], fs.breakpoints[members][:, None, :], fs.bw[members][:, None],
                 metrics[None, :, :])


def generate(switches: Sequence[str], hops: Sequence, hop_capacity: Mapping[str, float], flows: Sequence,
             fs: FlowSet, agg: np.ndarray, groups: Sequence[Group], group_of_flow: np.ndarray,
             initial: Mapping[tuple[str, str], Sequence], build_path, price: float,
             tolerance: float = TOLERANCE, max_rounds: int = MAX_ROUNDS) -> ColgenResult:
    """Column generation of the priced OTTER LP (module docstring).

    ``agg``: aggregate of each flow (the aggregates of ``make_problem``; members share a group);
    ``initial``: starting paths per ordered switch pair; ``build_path(src, hop indices)`` makes a
    CandidatePath from hops of ``hops`` (``hop_capacity``: hop id → capacity left for the LP)."""
    t0 = time.perf_counter()
    res = Resources(hops, hop_capacity)
    n_agg = int(agg.max()) + 1 if len(agg) else 0
    agg_bw = np.bincount(agg, fs.bw, n_agg) if n_agg else np.zeros(0)
    members = [np.flatnonzero(agg == a) for a in range(n_agg)]
    agg_group = np.zeros(n_agg, np.int64)
    agg_group[agg] = group_of_flow
    aggs_of_group = [np.flatnonzero(agg_group == gi) for gi in range(len(groups))]
    from pce.otter.graph_params import HOP_FLOOR_MS

    pricer = Pricer(switches, res, [max(h.latency, HOP_FLOOR_MS) for h in res.hops])
    master = Master(agg_bw, res.cap)
    paths: dict[tuple[str, str], list] = {pair: list(ps) for pair, ps in initial.items()}
    keys = {pair: {p.key for p in ps} for pair, ps in paths.items()}
    has_col: set[tuple[int, tuple[str, ...]]] = set()

    def columns(gi: int, plist: Iterable, aggs: np.ndarray | None = None) -> list[tuple[int, float, list[int]]]:
        g = groups[gi]
        plist = [p for p in plist if path_allowed(p, g)]
        aggs = aggs_of_group[gi] if aggs is None else aggs
        if not plist or not len(aggs):
            return []
        metrics = np.array([p.metrics() for p in plist], float)
        out = []
        for a in aggs:
            coef = _scores(fs, members[a], metrics).sum(axis=0) / agg_bw[a]
            for p, c in zip(plist, coef.tolist(), strict=True):
                if (int(a), p.key) in has_col:
                    continue
                has_col.add((int(a), p.key))
                out.append((int(a), c * (1.0 - price) if p.circuits else c, res.rows_of_path(p)))
        return out

    cols = []
    for gi, g in enumerate(groups):
        cols += columns(gi, paths.get((g.src, g.dst), []))
    master.add(cols)
    n_initial_cols = master.n_cols
    n_initial_paths = sum(len(v) for v in paths.values())
    history: list[dict[str, float]] = []
    cmax = np.array([N_METRICS * len(m) / agg_bw[a] for a, m in enumerate(members)]) if n_agg else np.zeros(0)
    pricing = 0.0
    certified = False
    rounds = 0
    objective = 0.0
    while rounds < max_rounds:
        rounds += 1
        _x, z, y, objective = master.solve()
        tp = time.perf_counter()
        pricer.set_duals(y)
        new_cols = []
        for gi, g in enumerate(groups):
            aggs = aggs_of_group[gi]
            if not len(aggs):
                continue
            bound = float((cmax[aggs] - z[aggs]).max()) - tolerance
            if bound <= 0:
                continue
            mem = np.concatenate([members[a] for a in aggs])
            labs = pricer.labels(g, bound, float(fs.bw[mem].max()))
            if not labs:
                continue
            lab_cost = np.array([lab[0] for lab in labs])
            metrics = np.array([(2.0 * lab[1], lab[2], 100.0 * -math.expm1(-lab[3]), lab[4]) for lab in labs], float)
            factor = np.where([lab[5] for lab in labs], 1.0 - price, 1.0)
            best: set[int] = set()  # labels that are some aggregate's best improving path
            for a in aggs:
                coef = _scores(fs, members[a], metrics).sum(axis=0) / agg_bw[a]
                rc = coef * factor - lab_cost - z[a]
                j = int(np.argmax(rc))
                if rc[j] > tolerance:
                    best.add(j)
            for j in sorted(best):
                p = build_path(g.src, labs[j][6])
                pair = (g.src, g.dst)
                if p.key not in keys.setdefault(pair, set()):
                    keys[pair].add(p.key)
                    paths.setdefault(pair, []).append(p)
                new_cols += columns(gi, [p])
        pricing += time.perf_counter() - tp
        history.append({"objective": objective, "columns": float(master.n_cols), "entering": float(len(new_cols))})
        if not new_cols:
            certified = True
            break
        master.add(new_cols)
    if not certified:  # the last columns added were not solved for
        objective = master.solve()[3]
    return ColgenResult(paths, rounds, n_initial_paths, sum(len(v) for v in paths.values()) - n_initial_paths,
                        master.n_cols, master.n_cols - n_initial_cols, certified, objective,
                        time.perf_counter() - t0, pricing, history)
