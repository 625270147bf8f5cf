"""Column generation for graph-mode OTTER placement (issue 27): the LP over *all* paths.

Why: with a fixed k candidate paths per pair the answer depends on the guess — on Fig. 2 the four
one-circuit candidates of A→C were near-copies through one adaptation port, so a pair needing two
circuits got one. Here the LP starts from a small diverse set (``INITIAL_K`` lit paths and
``INITIAL_K`` one-circuit paths per pair, circuits with disjoint optical ports first, plus every
flow's current path) and grows it: each round solves the restricted master, takes its duals and
searches, for every aggregate, the path of best reduced cost

    rc(a, p) = coef_a(p) · (1 − price·[p crosses an unlit circuit]) − Σ_{r ∈ p} y_r − z_a

over the packet layer: lit links and candidate circuits, whose cost includes the duals of the
optical ports they would occupy (adaptation ports and fibre wavelengths are LP rows of capacity one
circuit, so two circuits through one port cannot both be counted). ``coef_a`` is not additive
(tolerances of RTT, jitter and loss, bandwidth as a step), but it only falls as the path's latency,
jitter and loss grow and its bottleneck shrinks, so a label search keeps the Pareto set of
(dual cost, latency, jitter, −log keep, bottleneck clamped at the largest flow, crosses a circuit)
per switch — the best path of every aggregate is among the labels reaching its destination. One
search per source switch serves every destination (one per group for flows with ``avoid`` or a
deadline); labels whose dual cost plus the cheapest dual cost on to a destination leaves none of
its aggregates a positive reduced cost are dropped. Paths are simple (no switch twice).

When a round adds no column, (y, z) is feasible for the dual of the LP over every simple path: the
master's optimum is the optimum over all paths (``certified``). The master is one ``Highs`` object:
new columns enter at 0, so the previous basis stays feasible and the simplex continues from it;
columns through circuits the lighting switched off leave the model (the basis kept), and a cold
master starts from a greedy feasible point rather than the all-slack basis.

Coarser aggregations of the same flows (:data:`LEVELS`: one aggregate per restriction group, or
per group and tolerance class) give smaller masters for the heuristic steps — the priced
lighting's dive — and :meth:`ColumnGeneration.refined` goes on to a finer level whose cold solve
starts from the coarser solution (a basis with whole aggregates on the coarse paths). Only the
exact level is the OTTER LP and only its generation certifies.
"""
from __future__ import annotations

import copy
import heapq
import itertools
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from pce.errors import InfeasibleError, SolverError
from pce.highs import new_highs
from pce.otter.aggregate import Candidates, aggregate_keys
from pce.otter.demand import N_METRICS, score
from pce.otter.scenario import FlowSet

if TYPE_CHECKING:
    from pce.otter.graph import CandidatePath, Hop

#: Lit and one-circuit paths per pair in the initial set.
INITIAL_K = 2
#: Reduced cost a column needs to enter (objective units per Mbit/s).
TOLERANCE = 1e-7
#: Safety stop; a run that reaches it is reported as not certified.
MAX_ROUNDS = 60
#: Aggregations of the flows, finest first: ``exact`` (the LP's own aggregates), ``class`` (one
#: per restriction group and tolerance class, any rate), ``pair`` (one per restriction group).
LEVELS = ("exact", "class", "pair")


@dataclass
class ColgenResult:
    """Candidate paths per (source, destination) switch pair and how the generation went."""

    paths: dict[tuple[str, str], list[CandidatePath]]  # initial ones first
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
    coarse_rounds: int = 0  # rounds of the coarser states it was refined from (the dive's)
    coarse_seconds: float = 0.0  # their time, part of ``seconds``

    def stats(self) -> dict[str, object]:
        return {"colgen_rounds": self.rounds, "colgen_coarse_rounds": self.coarse_rounds,
                "colgen_coarse_seconds": self.coarse_seconds, "colgen_initial_paths": self.initial_paths,
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

    def __init__(self, hops: Sequence[Hop], capacity: Mapping[str, float]) -> None:
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

    def rows_of_path(self, path: CandidatePath) -> list[int]:
        return [r for h in path.hops for r in self.rows_of_hop[self.hop_index[h.id]]]


def path_allowed(path: CandidatePath, group: Group) -> bool:
    """Whether ``path`` respects the group's avoid set and deadline."""
    if group.deadline is not None and any(c.setup_time > group.deadline for c in path.circuits):
        return False
    return not group.avoid or group.avoid.isdisjoint(h.id.split("[", 1)[0] for h in path.hops)


class Master:
    """The restricted OTTER LP: rows z_a (aggregate bandwidth) then y_r (capacities).

    Every column is kept here; only the *live* ones (not through a switched-off circuit) are in
    the HiGHS model. After the dive ~400 of the bench's 480 capacity rows belong to switched-off
    circuits and half the initial columns cross one: such columns are 0 in every optimum, but the
    primal simplex would still price them on each of thousands of iterations. :meth:`set_live`
    deletes them from the model (keeping the basis); a column's index stays its index in this
    store, so :meth:`solve` returns x over every column (those not in the model 0)."""

    def __init__(self, agg_bw: np.ndarray, cap: np.ndarray) -> None:
        self.A, self.R = len(agg_bw), len(cap)
        self.rhs = np.concatenate([agg_bw, cap]).astype(float)
        self.n_cols = 0
        self.coef: list[float] = []
        self.col_index: list[list[int]] = []  # rows of each column (aggregate row first)
        self.col_value: list[list[float]] = []
        self.live: list[bool] = []
        self.in_model: list[int] = []  # store index of each HiGHS column
        self.held: set[int] = set()  # dead but basic when they left: in the model at upper bound 0
        self.upper = self.rhs.copy()  # row upper bounds now (0 for a switched-off circuit)
        self.col_agg: list[int] = []
        self.hint: list[int] = []  # columns a cold solve fills first (see :meth:`start_basis`)
        import highspy

        self.h = new_highs(1)
        self.h.setOptionValue("solver", "simplex")
        # primal simplex: entering columns keep the basis primal feasible (measured on the
        # 2,000-flow bench: the master's solves 7.5 s with HiGHS's default, 7.1 dual, 4.0 primal)
        self.h.setOptionValue("simplex_strategy", 4)
        n = len(self.upper)
        self.h.addRows(n, np.full(n, -highspy.kHighsInf), self.upper, 0, np.zeros(1, np.int32),
                       np.zeros(0, np.int32), np.zeros(0))

    def _push(self, idx: Sequence[int]) -> None:
        """Columns ``idx`` of the store into the HiGHS model."""
        if not len(idx):
            return
        sizes = [len(self.col_index[i]) for i in idx]
        starts = np.zeros(len(idx), np.int32)
        np.cumsum(sizes[:-1], out=starts[1:])
        index = np.fromiter(itertools.chain.from_iterable(self.col_index[i] for i in idx), np.int32, int(sum(sizes)))
        value = np.fromiter(itertools.chain.from_iterable(self.col_value[i] for i in idx), float, int(sum(sizes)))
        coef = np.array([self.coef[i] for i in idx], float)
        self.h.addCols(len(idx), -coef, np.zeros(len(idx)), np.full(len(idx), np.inf), int(sum(sizes)), starts,
                       index, value)
        self.in_model += list(idx)

    def add(self, cols: Sequence[tuple[int, float, Sequence[int]]], live: Sequence[bool] | None = None) -> None:
        """Columns (aggregate, objective coefficient, resource rows; a row listed twice counts twice);
        ``live[n]`` False keeps column n out of the model until :meth:`set_live` says otherwise."""
        first = self.n_cols
        made: dict[int, tuple[list[int], list[float]]] = {}  # the columns of one path share its rows
        for a, c, rows in cols:
            got = made.get(id(rows))
            if got is None:
                counts: dict[int, int] = defaultdict(int)
                for r in rows:
                    counts[self.A + r] += 1
                got = made[id(rows)] = (list(counts), [float(v) for v in counts.values()])
            self.col_index.append([int(a), *got[0]])
            self.col_value.append([1.0, *got[1]])
            self.coef.append(float(c))
            self.col_agg.append(int(a))
        self.live += [True] * len(cols) if live is None else [bool(v) for v in live]
        self.n_cols += len(cols)
        self._push([i for i in range(first, self.n_cols) if self.live[i]])

    def set_row_upper(self, row: int, upper: float) -> None:
        """Capacity row ``row`` (0-based among the capacity rows) gets upper bound ``upper``."""
        self.upper[self.A + row] = upper
        self.h.changeRowBounds(self.A + row, -np.inf, upper)

    def set_live(self, live: Sequence[bool]) -> None:
        """Which stored columns should be in the model. Columns that leave are deleted when
        nonbasic (at 0: the basis stays valid and the next solve continues from it); a basic one
        stays in the model with upper bound 0; columns that come back enter (or get their bound back)."""
        import highspy

        self.live = [bool(v) for v in live]
        basis = self.h.getBasis()
        basic = highspy.HighsBasisStatus.kBasic
        status = basis.col_status if basis.valid else [None] * len(self.in_model)
        drop = [j for j, i in enumerate(self.in_model) if not self.live[i] and status[j] != basic]
        if drop:
            self.h.deleteCols(len(drop), np.array(drop, np.int32))
            gone = set(drop)
            self.in_model = [i for j, i in enumerate(self.in_model) if j not in gone]
        for j, i in enumerate(self.in_model):
            if self.live[i] == (i in self.held):  # held but live again, or dead and not yet held
                self.h.changeColBounds(j, 0.0, np.inf if self.live[i] else 0.0)
                self.held.symmetric_difference_update((i,))
        have = set(self.in_model)
        self._push([i for i in range(self.n_cols) if self.live[i] and i not in have])

    def greedy(self) -> np.ndarray:
        """A feasible start for a cold solve: columns by falling coefficient, each as much as its
        rows have left. HiGHS starts from it instead of the all-slack basis: the bench's first
        master took 2,052 primal simplex iterations from it instead of 4,071 (the optimum is the
        same LP's; its vertex, and so the dive's lit set, can differ)."""
        left = self.rhs.tolist()
        x = [0.0] * len(self.in_model)
        for j in sorted(range(len(self.in_model)), key=lambda j: -self.coef[self.in_model[j]]):
            i = self.in_model[j]
            rows, vals = self.col_index[i], self.col_value[i]
            v = min(left[r] / c for r, c in zip(rows, vals, strict=True))
            if v > 1e-9:
                x[j] = v
                for r, c in zip(rows, vals, strict=True):
                    left[r] -= v * c
        return np.array(x, float)

    def start_basis(self) -> object:
        """A primal feasible basis for a cold solve: whole aggregates onto the :attr:`hint` columns
        first (in order), then greedily by falling coefficient, each onto a column with room left
        for all of bw_a. Such a column is basic at bw_a and its aggregate row nonbasic at its bound;
        every other row is basic. From a coarser model's solution (:meth:`ColumnGeneration.hint_from`)
        the bench's exact master took 1,000 primal simplex iterations instead of 3,100 from the
        greedy point (which HiGHS's ``setSolution`` only uses as values)."""
        import highspy

        left = self.rhs.tolist()
        placed = [False] * self.A
        basic, at_upper = highspy.HighsBasisStatus.kBasic, highspy.HighsBasisStatus.kUpper
        col_status = [highspy.HighsBasisStatus.kLower] * len(self.in_model)
        row_status = [basic] * len(self.rhs)
        pos = {i: j for j, i in enumerate(self.in_model)}
        order = [pos[i] for i in self.hint if i in pos]
        order += sorted(range(len(self.in_model)), key=lambda j: -self.coef[self.in_model[j]])
        for j in order:
            i = self.in_model[j]
            a = self.col_agg[i]
            if placed[a] or i in self.held:
                continue
            v = left[a]
            rows, vals = self.col_index[i], self.col_value[i]
            if v > 0 and all(left[r] >= v * c for r, c in zip(rows, vals, strict=True)):
                placed[a] = True
                col_status[j] = basic
                row_status[a] = at_upper
                for r, c in zip(rows, vals, strict=True):
                    left[r] -= v * c
        basis = highspy.HighsBasis()
        basis.col_status = col_status
        basis.row_status = row_status
        basis.valid = True
        basis.alien = False
        return basis

    def solve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """(x, z ≥ 0, y ≥ 0, objective); HiGHS minimises −coef·x, so a binding row's dual is ≤ 0."""
        import highspy

        if not self.in_model:
            return np.zeros(self.n_cols), np.zeros(self.A), np.zeros(self.R), 0.0
        if not self.h.getBasis().valid:
            if self.hint:
                self.h.setBasis(self.start_basis())
            else:
                x = self.greedy()
                self.h.setSolution(len(x), np.arange(len(x), dtype=np.int32), x)
        self.h.run()
        status = self.h.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            raise InfeasibleError("the OTTER master LP is infeasible")
        if status != highspy.HighsModelStatus.kOptimal:
            raise SolverError(f"HiGHS did not reach an optimum: {self.h.modelStatusToString(status)}")
        sol = self.h.getSolution()
        dual = np.maximum(0.0, -np.asarray(sol.row_dual, float))
        x = np.zeros(self.n_cols)
        x[np.array(self.in_model, np.int64)] = np.maximum(0.0, np.asarray(sol.col_value, float))
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
        self.off = [False] * len(hops)  # circuits switched off by the lighting

    def fresh(self) -> Pricer:
        """A pricer over the same hops (the arrays built in ``__init__`` shared, read only), with no
        circuit switched off and no duals yet: a refined state's, without building it again."""
        new = copy.copy(self)
        new.off = [False] * len(self.w)
        new.__dict__.pop("cost", None)
        new.__dict__.pop("lower", None)
        return new

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

    def labels(self, src: str, bounds: Mapping[str, float], bmax: float, avoid: frozenset[str] = frozenset(),
               deadline: float | None = None) -> dict[str, list[tuple]]:
        """Per destination of ``bounds``: the non-dominated labels reaching it, each (cost, ms,
        jitter, −log keep, bottleneck, circuit, hop indices). One search serves every destination:
        a label at switch v is kept only if its cost plus the cheapest rest to some destination d
        stays below d's bound (the best an aggregate of (src, d) could gain)."""
        s = self.node[src]
        targets = [(self.node[d], b) for d, b in bounds.items()]
        t_idx = np.array([t for t, _b in targets], np.int64)
        t_bound = np.array([b for _t, b in targets], float)
        reach = (t_bound[None, :] - self.lower[:, t_idx]).max(axis=1).tolist()
        if reach[s] <= 0:
            return {}
        banned = self.off
        if avoid or deadline is not None:
            banned = [self.off[k] or self.end_id[k] in avoid or (deadline is not None and self.setup[k] > deadline)
                      for k in range(len(self.w))]
        # label: [cost, ms, jitter, loss, bottleneck, circuit, node, visited mask, parent, hop, alive]
        labels: list[list] = [[0.0, 0.0, 0.0, 0.0, bmax, False, s, 1 << s, -1, -1, True]]
        front: list[list[int]] = [[] for _ in self.names]
        front[s].append(0)
        heap = [(0.0, 0.0, 0)]
        cost, w, jit, loss, cap, circ = self.cost, self.w, self.jit, self.loss, self.cap, self.circ
        # the hops this search may use, and only toward switches it can still reach with a gain
        adj = [[(v, k) for v, k in nb if not banned[k] and cost[k] < reach[v]] for nb in self.adj]
        eps = 1e-12
        while heap:
            _c, _w, li = heapq.heappop(heap)
            lab = labels[li]
            if not lab[10]:
                continue
            c0, w0, j0, l0, b0, k0, _u, mask = lab[:8]
            for v, k in adj[lab[6]]:
                if mask >> v & 1:
                    continue
                c1 = c0 + cost[k]
                if c1 >= reach[v]:
                    continue
                w1, j1, l1 = w0 + w[k], j0 + jit[k], l0 + loss[k]
                b1 = b0 if b0 <= cap[k] else cap[k]
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
        out: dict[str, list[tuple]] = {}
        for d, (t, bound) in zip(bounds, targets, strict=True):
            got = []
            for li in front[t]:
                lab = labels[li]
                if lab[0] >= bound:
                    continue
                hops = []
                at = li
                while labels[at][8] >= 0:
                    hops.append(labels[at][9])
                    at = labels[at][8]
                got.append((lab[0], lab[1], lab[2], lab[3], lab[4], lab[5], tuple(reversed(hops))))
            if got:
                out[d] = got
        return out


def level_aggregates(fs: FlowSet, group_of_flow: np.ndarray, dests: np.ndarray, level: str) -> np.ndarray:
    """Aggregate of each flow at ``level`` (:data:`LEVELS`); ``dests``: destination switch index
    per flow. Each level refines the next: an ``exact`` aggregate lies within one ``class``
    aggregate, which lies within one ``pair`` aggregate (a restriction group)."""
    if level not in LEVELS:
        raise ValueError(f"unknown aggregation level {level!r}")
    g = np.asarray(group_of_flow, np.int64)
    if level == "pair" or not len(g):
        return g
    if level == "class":
        return np.unique(np.stack([g, np.asarray(fs.profile, np.int64)], axis=1), axis=0,
                         return_inverse=True)[1].reshape(-1)
    d = np.asarray(dests, np.int64).reshape(-1, 1)
    return aggregate_keys(fs, np.arange(len(g)), Candidates(d, d, np.zeros(d.shape)), g)[0]


class ColumnGeneration:
    """One restricted master and its pricing, kept across runs: the priced lighting switches
    circuits off (capacity 0, not priced) and generation continues from the last basis."""

    def __init__(self, switches: Sequence[str], hops: Sequence[Hop], hop_capacity: Mapping[str, float], fs: FlowSet,
                 agg: np.ndarray, groups: Sequence[Group], group_of_flow: np.ndarray,
                 initial: Mapping[tuple[str, str], Sequence[CandidatePath]],
                 build_path: Callable[[str, Sequence[int]], CandidatePath],
                 price: float, tolerance: float = TOLERANCE, max_rounds: int = MAX_ROUNDS,
                 base: ColumnGeneration | None = None) -> None:
        """``agg``: aggregate of each flow (the aggregates of ``make_problem``; members share a
        group); ``initial``: starting paths per ordered switch pair; ``build_path(src, hop
        indices)`` makes a CandidatePath of ``hops`` (``hop_capacity``: hop id → capacity left).
        ``base``: a state over the same switches, hops and capacities, whose rows and pricer's
        arrays are reused (:meth:`refined`)."""
        from pce.otter.graph_params import HOP_FLOOR_MS

        self.t0 = time.perf_counter()
        self.setup = (list(switches), list(hops), dict(hop_capacity), np.asarray(group_of_flow, np.int64))
        self.fs, self.agg, self.groups, self.price = fs, agg, list(groups), price
        self.tolerance, self.max_rounds, self.build_path = tolerance, max_rounds, build_path
        self.res = base.res if base is not None else Resources(hops, hop_capacity)
        n_agg = int(agg.max()) + 1 if len(agg) else 0
        self.agg_bw = np.bincount(agg, fs.bw, n_agg) if n_agg else np.zeros(0)
        order = np.argsort(agg, kind="stable")
        self.members = np.split(order, np.cumsum(np.bincount(agg, minlength=n_agg))[:-1]) if n_agg else []
        agg_group = np.zeros(n_agg, np.int64)
        agg_group[agg] = group_of_flow
        self.aggs_of_group = [np.flatnonzero(agg_group == gi) for gi in range(len(groups))]
        self.group_of_agg = agg_group.tolist()
        # per group its flows ordered by aggregate
        self.group_members = [np.concatenate([self.members[a] for a in aggs]) if len(aggs) else np.zeros(0, np.int64)
                              for aggs in self.aggs_of_group]
        self.group_starts = [np.cumsum([0] + [len(self.members[a]) for a in aggs.tolist()[:-1]]).astype(np.int64)
                             for aggs in self.aggs_of_group]
        self.agg_rank = np.zeros(len(agg), np.int64)  # per flow: its aggregate's place in its group
        for aggs in self.aggs_of_group:
            for r, a in enumerate(aggs.tolist()):
                self.agg_rank[self.members[a]] = r
        self.keep: dict[tuple[str, str], list[CandidatePath]] = {}  # paths every refined state starts with
        self.sub_seconds = 0.0  # spent on coarser states this one was refined from
        self.sub_rounds = 0
        self.cmax = np.array([N_METRICS * len(m) / self.agg_bw[a] for a, m in enumerate(self.members)])
        self.pricer = base.pricer.fresh() if base is not None else Pricer(
            switches, self.res, [max(h.latency, HOP_FLOOR_MS) for h in self.res.hops])
        self.circuit_hop = {h.circuit.id: k for k, h in enumerate(self.res.hops) if h.circuit is not None}
        self.master = Master(self.agg_bw, self.res.cap)
        self.paths: dict[tuple[str, str], list[CandidatePath]] = {pair: list(ps) for pair, ps in initial.items()}
        self.keys = {pair: {p.key for p in ps} for pair, ps in self.paths.items()}
        self.col_agg: list[int] = []
        self.col_path: list[CandidatePath] = []
        self.col_raw: list[float] = []  # unpriced coefficient
        self.col_circuits: list[tuple[str, ...]] = []  # circuit ids of each column's path
        self.has_col: set[tuple[int, tuple[str, ...]]] = set()
        self.master.add(self.columns((gi, self.paths.get((g.src, g.dst), [])) for gi, g in enumerate(self.groups)))
        self.initial_columns = self.master.n_cols
        self.initial_paths = sum(len(v) for v in self.paths.values())
        self.rounds = 0
        self.certified = False
        self.objective = 0.0
        self.x = np.zeros(0)
        self.pricing_seconds = 0.0
        self.history: list[dict[str, float]] = []
        self.off: set[str] = set()

    def columns(self, items: Iterable[tuple[int, Iterable[CandidatePath]]]) -> list[tuple[int, float, list[int]]]:
        """Columns of each (group, paths) item: the group's aggregates on the paths it may use (each
        (aggregate, path) once), path by path. Every (member flow, path) pair of all items is scored
        in one numpy call (one call per group cost 0.3 s on the bench's 379 groups)."""
        todo, metrics, flow_i, path_i = [], [], [], []
        for gi, paths in items:
            plist = [p for p in paths if path_allowed(p, self.groups[gi])]
            aggs = self.aggs_of_group[gi]
            if not plist or not len(aggs):
                continue
            base = len(metrics)
            metrics += [p.metrics() for p in plist]
            mem = self.group_members[gi]
            flow_i.append(np.repeat(mem, len(plist)))
            path_i.append(np.tile(np.arange(base, base + len(plist)), len(mem)))
            todo.append((gi, plist, aggs))
        if not todo:
            return []
        fi, pi = np.concatenate(flow_i), np.concatenate(path_i)
        sc = score(self.fs.shapes[fi], self.fs.breakpoints[fi], self.fs.bw[fi], np.array(metrics, float)[pi])
        out, at = [], 0
        for gi, plist, aggs in todo:
            n_mem = len(self.group_members[gi])
            part = sc[at:at + n_mem * len(plist)].reshape(n_mem, len(plist))
            at += n_mem * len(plist)
            coefs = (np.add.reduceat(part, self.group_starts[gi], axis=0) / self.agg_bw[aggs][:, None]).T.tolist()
            agg_l = aggs.tolist()
            for p, row in zip(plist, coefs, strict=True):
                out += self._record(p, zip(agg_l, row, strict=True), self.res.rows_of_path(p))
        return out

    def refined(self, level: str, paths: Mapping[tuple[str, str], Sequence[CandidatePath]] | None = None
                ) -> ColumnGeneration:
        """A state over the same graph, flows and circuits switched off, with the finer aggregates
        of ``level`` and ``paths`` (default: every path this state has) and :attr:`keep` (the
        flows' current paths, for PATHPIN) as its initial set; its first solve starts from this
        state's solution (:meth:`hint_from`)."""
        switches, hops, capacity, group_of_flow = self.setup
        start = {pair: list(ps) for pair, ps in (self.paths if paths is None else paths).items()}
        for pair, ps in self.keep.items():
            start.setdefault(pair, []).extend(p for p in ps if p.key not in {q.key for q in start[pair]})
        dests = np.array([self.pricer.node[self.groups[gi].dst] for gi in group_of_flow.tolist()], np.int64)
        agg = level_aggregates(self.fs, group_of_flow, dests, level)
        new = ColumnGeneration(switches, hops, capacity, self.fs, agg, self.groups, group_of_flow, start,
                               self.build_path, self.price, self.tolerance, self.max_rounds, base=self)
        new.keep = self.keep
        if self.off:
            new.restrict(set(self.circuit_hop) - self.off)
        new.hint_from(self)
        new.sub_seconds = self.sub_seconds + time.perf_counter() - self.t0
        new.sub_rounds = self.sub_rounds + self.rounds
        return new

    def used_paths(self) -> dict[tuple[str, str], list[CandidatePath]]:
        """Per pair the paths the master's solution puts traffic on."""
        out: dict[tuple[str, str], dict[tuple[str, ...], CandidatePath]] = defaultdict(dict)
        for xv, a, p in zip(self.x.tolist(), self.col_agg, self.col_path, strict=True):
            if xv > 1e-9:
                g = self.groups[self.group_of_agg[a]]
                out[g.src, g.dst][p.key] = p
        return {pair: list(ps.values()) for pair, ps in out.items()}

    def hint_from(self, other: ColumnGeneration) -> None:
        """Seed the next cold solve with ``other``'s solution (same flows, coarser aggregates: each
        aggregate here lies within one of ``other``'s): per coarse aggregate, the Mbit/s it puts on
        each path is dealt to its finer aggregates, columns of higher coefficient first, each
        aggregate whole onto one path with that much left (:meth:`Master.start_basis`)."""
        if len(other.x) != len(other.col_agg):  # not solved since its last columns came in
            return
        parent = np.zeros(len(self.agg_bw), np.int64)
        parent[self.agg] = other.agg
        parent_l = parent.tolist()
        left: dict[tuple[int, tuple[str, ...]], float] = defaultdict(float)
        for xv, a, p in zip(other.x.tolist(), other.col_agg, other.col_path, strict=True):
            if xv > 1e-9:
                left[a, p.key] += xv
        cols = sorted((-c, n) for n, c in enumerate(self.master.coef))
        bw = self.agg_bw.tolist()
        done = [False] * len(bw)
        hint = []
        for _c, n in cols:
            a = self.col_agg[n]
            if done[a]:
                continue
            key = (parent_l[a], self.col_path[n].key)
            if left.get(key, 0.0) >= bw[a] - 1e-9 * max(1.0, bw[a]):
                left[key] -= bw[a]
                done[a] = True
                hint.append(n)
        self.master.hint = hint

    def restrict(self, allowed: Iterable[str] | None) -> None:
        """Only the circuits ``allowed`` (None: all) may carry traffic or be priced."""
        off = set(self.circuit_hop) - set(self.circuit_hop if allowed is None else allowed)
        for cid in off ^ self.off:
            k = self.circuit_hop[cid]
            self.master.set_row_upper(k, 0.0 if cid in off else float(self.res.cap[k]))
        self.off = off
        self.master.set_live([off.isdisjoint(cids) for cids in self.col_circuits])
        self.pricer.off = [self.res.hops[k].circuit is not None and self.res.hops[k].circuit.id in off
                           for k in range(len(self.res.hops))]
        self.certified = False

    def run(self, min_gain: float = 0.0) -> bool:
        """Rounds until no column prices out (True) or the round limit (False). ``min_gain`` > 0
        (a coarse level, whose optimum only seeds a finer one): also stop, uncertified, once a
        round raised the objective by less than that fraction."""
        self.certified = False
        last = -math.inf
        while self.rounds < self.max_rounds:
            self.rounds += 1
            self.x, z, y, self.objective = self.master.solve()
            if min_gain > 0 and self.objective - last < min_gain * abs(self.objective):
                return False
            last = self.objective
            tp = time.perf_counter()
            new_cols = self.price_out(z, y)
            self.pricing_seconds += time.perf_counter() - tp
            self.history.append({"objective": self.objective, "columns": float(self.master.n_cols),
                                 "entering": float(len(new_cols))})
            if not new_cols:
                self.certified = True
                return True
            self.master.add(new_cols)
        self.x, _z, _y, self.objective = self.master.solve()
        return False

    def price_out(self, z: np.ndarray, y: np.ndarray) -> list[tuple[int, float, list[int]]]:
        """The columns of every group's paths with a positive reduced cost for some aggregate: one
        label search per source (per group for restricted groups), then every (member flow, label
        of its destination) pair of all searches scored in one numpy call."""
        self.pricer.set_duals(y)
        tol = self.tolerance
        searches: dict[tuple, list[int]] = defaultdict(list)
        bound = np.full(len(self.groups), -np.inf)
        for gi, g in enumerate(self.groups):
            aggs = self.aggs_of_group[gi]
            if len(aggs):
                bound[gi] = float((self.cmax[aggs] - z[aggs]).max()) - tol
            if bound[gi] > 0:
                searches[(g.src, g.avoid, g.deadline)].append(gi)
        items: list[tuple[int, list[tuple]]] = []  # (group, its labels) of every search
        for (src, avoid, deadline), gis in searches.items():
            mem = np.concatenate([self.group_members[gi] for gi in gis])
            found = self.pricer.labels(src, {self.groups[gi].dst: float(bound[gi]) for gi in gis},
                                       float(self.fs.bw[mem].max()), avoid, deadline)
            items += [(gi, found[self.groups[gi].dst]) for gi in gis if found.get(self.groups[gi].dst)]
        new_cols: list[tuple[int, float, list[int]]] = []
        if not items:
            return new_cols
        # every (member flow, label of its group) pair of all searches in flat arrays, scored in
        # one numpy call and summed per (aggregate, label) with one bincount (a few numpy calls
        # per group cost ~0.1 s a placement on the bench's ~330 groups × 13 rounds)
        labs_all = [lab for _gi, labs in items for lab in labs]
        gis = np.array([gi for gi, _labs in items], np.int64)
        n_lab = np.array([len(labs) for _gi, labs in items], np.int64)
        n_mem = np.array([len(self.group_members[gi]) for gi in gis.tolist()], np.int64)
        n_agg = np.array([len(self.aggs_of_group[gi]) for gi in gis.tolist()], np.int64)
        metrics = np.array([(2.0 * lab[1], lab[2], 100.0 * -math.expm1(-lab[3]), lab[4]) for lab in labs_all], float)
        cost = np.array([lab[0] for lab in labs_all])
        factor = np.array([1.0 - self.price if lab[5] else 1.0 for lab in labs_all])
        gl_off = np.cumsum(n_lab) - n_lab  # first label of each item
        members = np.concatenate([self.group_members[gi] for gi in gis.tolist()])
        aggs = np.concatenate([self.aggs_of_group[gi] for gi in gis.tolist()])

        def layout(outer: np.ndarray, outer_off: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            """(item, outer index, label) of each cell of the items' outer × label blocks."""
            size = outer * n_lab
            item = np.repeat(np.arange(len(items)), size)
            local = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)
            width = n_lab[item]
            return item, outer_off[item] + local // width, local % width

        item_e, mem_e, lab_e = layout(n_mem, np.cumsum(n_mem) - n_mem)
        flow = members[mem_e]
        sc = score(self.fs.shapes[flow], self.fs.breakpoints[flow], self.fs.bw[flow], metrics[gl_off[item_e] + lab_e])
        item_k, agg_k, lab_k = layout(n_agg, np.cumsum(n_agg) - n_agg)  # one cell per (aggregate, label)
        block = n_agg * n_lab
        key = np.repeat(np.cumsum(block) - block, n_mem * n_lab) + self.agg_rank[flow] * n_lab[item_e] + lab_e
        a_k, gl_k = aggs[agg_k], gl_off[item_k] + lab_k
        raw = np.bincount(key, sc, int(block.sum())) / self.agg_bw[a_k]
        rc = raw * factor[gl_k] - cost[gl_k] - z[a_k]
        # per aggregate its best label (the first of equal ones), if it improves
        seg = np.repeat(np.cumsum(block) - block, n_agg) + (np.arange(len(aggs)) - np.repeat(np.cumsum(n_agg) - n_agg, n_agg)) * np.repeat(n_lab, n_agg)
        best = np.maximum.reduceat(rc, seg)
        first = np.minimum.reduceat(np.where(rc >= np.repeat(best, np.repeat(n_lab, n_agg)), np.arange(len(rc)), len(rc)), seg)
        win = first[best > tol]
        # only the aggregates that gain enter (fewer columns, a faster master); the others
        # price the path again next round if it comes to pay for them too
        win = win[np.lexsort((agg_k[win], lab_k[win], item_k[win]))]
        winners: dict[tuple[int, int], list[tuple[int, float]]] = defaultdict(list)
        for it, j, a, c in zip(item_k[win].tolist(), lab_k[win].tolist(), a_k[win].tolist(), raw[win].tolist(),
                               strict=True):
            winners[it, j].append((a, c))
        for (it, j), coefs in winners.items():
            g, labs = self.groups[items[it][0]], items[it][1]
            pair = (g.src, g.dst)
            p = self.build_path(g.src, labs[j][6])
            if p.key not in self.keys.setdefault(pair, set()):
                self.keys[pair].add(p.key)
                self.paths.setdefault(pair, []).append(p)
            new_cols += self._record(p, coefs, self.res.rows_of_path(p))
        return new_cols

    def _record(self, p: CandidatePath, coefs: Iterable[tuple[int, float]], rows: list[int]
                ) -> list[tuple[int, float, list[int]]]:
        """Master columns of path ``p`` for (aggregate, unpriced coefficient) pairs not yet in it."""
        out = []
        cids = tuple(c.id for c in p.circuits)
        for a, c in coefs:
            if (a, p.key) in self.has_col:
                continue
            self.has_col.add((a, p.key))
            self.col_agg.append(a)
            self.col_path.append(p)
            self.col_circuits.append(cids)
            self.col_raw.append(c)
            out.append((a, c * (1.0 - self.price) if cids else c, rows))
        return out

    def resolve(self) -> None:
        """The master again, without pricing (after :meth:`restrict`; not certified)."""
        self.x, _z, _y, self.objective = self.master.solve()
        self.certified = False

    def raw_objective(self) -> float:
        """The master's optimum valued without the circuit price (what a placement reports)."""
        return float(np.dot(self.col_raw, self.x)) if len(self.x) else 0.0

    def carried(self) -> dict[str, float]:
        """Mbit/s the master puts on each circuit, in order of first use by a column."""
        out: dict[str, float] = {}
        for xv, p in zip(self.x.tolist(), self.col_path, strict=True):
            if xv > 1e-9:
                for c in p.circuits:
                    out[c.id] = out.get(c.id, 0.0) + xv
        return out

    def shares(self, slot_of: Callable[[int, tuple[str, ...]], int | None], n_flows: int, width: int
               ) -> tuple[np.ndarray, np.ndarray, float]:
        """(aggregate per flow, share of each flow's bw per slot, unpriced objective) of the master's
        optimum; ``slot_of(flow, path key)`` is the flow's slot of that path (None: not a slot)."""
        share = np.zeros((n_flows, width))
        obj = 0.0
        for xv, a, p, raw in zip(self.x.tolist(), self.col_agg, self.col_path, self.col_raw, strict=True):
            if xv <= 1e-9 * max(1.0, self.agg_bw[a]):
                continue
            obj += raw * xv
            for i in self.members[a].tolist():
                j = slot_of(i, p.key)
                if j is not None:
                    share[i, j] += xv / self.agg_bw[a]
        total = share.sum(axis=1, keepdims=True)
        return self.agg, np.where(total > 1.0, share / np.maximum(total, 1e-12), share), obj

    def result(self) -> ColgenResult:
        return ColgenResult({pair: [p for p in ps if not self.off.intersection(c.id for c in p.circuits)]
                             for pair, ps in self.paths.items()}, self.rounds, self.initial_paths,
                            sum(len(v) for v in self.paths.values()) - self.initial_paths, self.master.n_cols,
                            self.master.n_cols - self.initial_columns, self.certified, self.objective,
                            time.perf_counter() - self.t0 + self.sub_seconds, self.pricing_seconds, self.history,
                            self.sub_rounds, self.sub_seconds)
