"""Load-aware mapping of a site pair's flows onto two or more paths (seed 004), as plain code.

"Bandwidth Aggregation over Multihoming Links" (A. Sterca, D. Bufnea, V. Niculescu, Babeș-Bolyai
University) maps *whole* flows between two multihomed sites onto m paths, so no flow is reordered.
Each path gets a weight w_i (Σ w_i = 1) from a load estimate and carries ⌊w_i·N⌋ of the N flows;
when a weight drops, the path gives up its *youngest* flows (the most recently remapped) first.
Per remap |Δw_i| ≤ 0.1 and every w_i ≥ 0.1. Three policies:

- ``static``: equal weights for ever (the paper's ECMP baseline, a fixed N/m split);
- ``throughput``: w_i ∝ (cycle-average throughput of path i) / (flows on path i);
- ``rtt``: w_i = 1 − load_i/Σload with load_i the path's cycle-average RTT normalised between its
  minimum cycle average and its maximum RTT.

After a remap that moved flows the mapper *settles*: the sample that spans the move is dropped and
no weight changes until every path has ``min_samples`` samples taken since (the paper, too, decides
once per measurement cycle). For ``throughput`` the paths' estimators also restart: their averages
were measured with the old flow sets, and dividing them by the new counts misjudges both paths —
measured on the multihoming lab (10 Mbit/s paths, greedy background on path 1), the flow moved onto
path 2 made its next 1-s sample fall from ~9.5 to ~3.7 Mbit/s (the receivers saw the dip too), the
old-set average over the new count pushed the weight straight back, and the split flipped between
4/4 and 3/5 every ~1.3 s, each flip another dip.

The estimators and the remapper are :mod:`monitor.load_estimators`; this module adds the site pair
(paths as hops through packet switches), per-flow OpenFlow 1.3 rules in the ``mapping`` band, and
update plans (values) that move flows make-before-break. Time comes in as ``now``.

Why per-flow rules and not select-group bucket weights: with a select group the switch decides
which flows change bucket when weights change (Open vSwitch hashes the 5-tuple; the NTR/OF1.5
``selection_method`` only picks the hash fields), so neither "youngest first" nor "at most 10% of
the flows per step" can be kept, and a group's counters do not say how many flows a bucket has,
which the throughput policy needs. Per-flow rules give both; the flow table grows by ~2 rules per
flow per switch on the path.
"""
from __future__ import annotations

import copy
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.te.decisions import five_tuple_match
from app.update import planner
from app.update.model import FlowRule, IngressChange
from app.update.plan import Plan
from monitor.load_estimators import (
    CycleSmoother,
    FlowRemapper,
    limit_weights,
    rtt_weights,
    throughput_weights,
)
from topology import rule_plan
from topology.flow import FiveTuple

STATIC, THROUGHPUT, RTT = "static", "throughput", "rtt"
POLICIES = (STATIC, THROUGHPUT, RTT)
PLACE, REMAP, REMOVE, KEEP = "place", "remap", "remove", "keep"
_L4 = (6, 17)  # TCP, UDP: flows with ports, so one 5-tuple is one flow
#: The throughput policy closes a path's cycle after this many samples even without a trough. A
#: cycle closes on a trough -> rise; on the multihoming lab (0.25-s samples) path 1's rate fell for
#: 7 s after the extra load started, no cycle closed, and the weights stayed at the pre-load
#: cycle's average (0.5/0.5 while the paths gave ~0.2 and ~0.8 Mbit/s per flow; docs/labs.md).
MAX_CYCLE_SAMPLES = 8


class MappingError(ValueError):
    """A site pair, path or flow the mapper cannot work with (one line saying which and why)."""


@dataclass(frozen=True)
class Hop:
    """One packet switch on a path: traffic A → Z enters on ``in_port`` and leaves on ``out_port``."""

    switch: str
    in_port: int
    out_port: int


@dataclass(frozen=True)
class SitePath:
    """One path between the site switches ``a`` and ``z``.

    ``a_out``: the port of ``a`` the path leaves by; ``z_in``: the port of ``z`` it arrives on;
    ``transit``: the switches between (A → Z direction); ``links``: the packet-link ids it crosses,
    in order (to add up per-link latencies for the RTT policy).
    """

    name: str
    a: str
    a_out: int
    z: str
    z_in: int
    transit: tuple[Hop, ...] = ()
    links: tuple[str, ...] = ()


@dataclass(frozen=True)
class MappedFlow:
    """A flow of the site pair: its 5-tuple (A → Z) and the host ports at both site switches."""

    five: FiveTuple
    a_port: int
    z_port: int

    def __post_init__(self) -> None:
        if self.five.proto not in _L4:
            raise MappingError(f"flow {self.five}: only TCP and UDP flows are mapped (proto {self.five.proto})")


@dataclass(frozen=True)
class FlowRules:
    """A flow's rules on one path: the two ingress rules (the ones that choose the path: at ``a``
    forward, at ``z`` reverse) and the path rules (transit both ways, egress at both sites)."""

    ingress: tuple[FlowRule, FlowRule]
    path: tuple[FlowRule, ...]

    @property
    def all(self) -> tuple[FlowRule, ...]:
        return self.ingress + self.path

    @property
    def counted(self) -> FlowRule:
        """The forward egress rule at ``z``: its byte counter is what the flow delivered on this path."""
        return self.path[0]


def flow_rules(flow: MappedFlow, path: SitePath, ident: int, priority: int | None = None) -> FlowRules:
    """Every rule that carries ``flow`` both ways over ``path`` (band ``mapping``, cookie id ``ident``)."""
    band = rule_plan.MAPPING
    prio = band.priority() if priority is None else priority
    f = flow.five

    def rule(switch: str, in_port: int, out_port: int, reverse: bool) -> FlowRule:
        return FlowRule(switch, band.name, ident, prio, five_tuple_match(f, in_port, reverse), out_port)

    fwd_in = rule(path.a, flow.a_port, path.a_out, False)
    rev_in = rule(path.z, flow.z_port, path.z_in, True)
    fwd_out = rule(path.z, path.z_in, flow.z_port, False)
    rev_out = rule(path.a, path.a_out, flow.a_port, True)
    transit = [rule(h.switch, h.in_port, h.out_port, False) for h in path.transit]
    transit += [rule(h.switch, h.out_port, h.in_port, True) for h in reversed(path.transit)]
    return FlowRules((fwd_in, rev_in), (fwd_out, rev_out, *transit))


# ---------------------------------------------------------------------- paths from the graph
def site_paths(graph: Any, a: str, z: str, k: int = 2, max_hops: int = 8) -> list[SitePath]:
    """Up to ``k`` link-disjoint packet paths ``a`` → ``z`` in a multi-layer graph (shortest first).

    Only packet switches and ``packet`` edges count (LLDP links and lit circuits alike); each edge
    carries ``ports`` ``{node: port}``. MappingError if fewer than two paths exist: one path leaves
    nothing to map.
    """
    import networkx as nx

    g = nx.MultiGraph()
    for u, v, key, d in graph.g.edges(keys=True, data=True):
        if d.get("kind") == "packet" and u != v:
            g.add_edge(u, v, key=key, ports=dict(d.get("ports") or {}))
    for s in (a, z):
        if s not in g:
            raise MappingError(f"site switch {s!r} has no packet link in the graph")
    candidates = sorted(nx.all_simple_edge_paths(g, a, z, cutoff=max_hops),
                        key=lambda p: (len(p), [str(e[2]) for e in p]))
    chosen: list[list[tuple[str, str, str]]] = []
    used: set[str] = set()
    for p in candidates:
        keys = {str(e[2]) for e in p}
        if keys & used:
            continue
        chosen.append(p)
        used |= keys
        if len(chosen) == k:
            break
    if len(chosen) < 2:
        raise MappingError(f"{a} -> {z}: {len(chosen)} link-disjoint path(s); load-aware mapping needs 2 or more")
    out = []
    for i, p in enumerate(chosen):
        node, hops_in, transit = a, None, []
        a_out = z_in = 0
        for u, v, key in p:
            ports = g.edges[u, v, key]["ports"]
            nxt = v if u == node else u
            if hops_in is None:
                a_out = int(ports[node])
            else:
                transit.append(Hop(node, hops_in, int(ports[node])))
            hops_in = int(ports[nxt])
            node = nxt
        z_in = int(hops_in)  # type: ignore[arg-type]
        out.append(SitePath(f"path{i + 1}", a, a_out, z, z_in, tuple(transit), tuple(str(e[2]) for e in p)))
    return out


# ---------------------------------------------------------------------- measurements
def path_rates(prev: Mapping[Any, int], counters: Mapping[Any, tuple[int, int]], dt: float
               ) -> tuple[dict[int, float], dict[Any, int]]:
    """Mbit/s per path from per-rule byte counters read ``dt`` s apart.

    ``counters``: rule key -> (path index, bytes now). A rule seen for the first time (a flow just
    placed or moved onto the path) counts from 0; a counter that went down (the rule was replaced)
    counts from 0 too. Returns (Mbit/s per path index, the byte counts to pass as ``prev`` next time).
    """
    if dt <= 0:
        raise MappingError(f"counter interval must be > 0 s, got {dt}")
    rates: dict[int, float] = {}
    for key, (path, now_bytes) in counters.items():
        before = prev.get(key, 0)
        delta = now_bytes - before if now_bytes >= before else now_bytes
        rates[path] = rates.get(path, 0.0) + delta * 8 / 1e6 / dt
    return rates, {k: b for k, (_p, b) in counters.items()}


class RateWindow:
    """Per-path Mbit/s over the last ``span`` seconds of counter reads, updated at every read.

    Why not the difference between two consecutive reads: Open vSwitch copies its datapath's
    counters into the OpenFlow rules only every ~0.5 s (the revalidator), so reads 0.25 s apart
    alternate between no change and twice the bytes — measured on the multihoming lab at a 0.25-s
    interval: a 10-Mbit/s path read 0.0, 18.5, 0.0, 18.2, ... Mbit/s. A span holding whole updates
    (1 s: two of them) gives the right rate, and reading every interval keeps it fresh. A rule seen
    for the first time counts from 0 (it is younger than the span); a rule gone since the span's
    start loses its bytes (the mapper drops samples spanning a move, see ``SiteMapper.min_samples``).
    """

    def __init__(self, span: float) -> None:
        if not span > 0:
            raise MappingError(f"rate window must be > 0 s, got {span}")
        self.span = span
        self._reads: deque[tuple[float, dict[Any, int]]] = deque()

    def add(self, now: float, counters: Mapping[Any, tuple[int, int]]) -> dict[int, float]:
        """Record one read (rule key -> (path index, bytes)); Mbit/s per path index since the newest
        read at least ``span`` old (the oldest one while none is), {} on the first read."""
        if self._reads and now <= self._reads[-1][0]:
            raise MappingError(f"counter reads must move forward in time ({now} after {self._reads[-1][0]})")
        self._reads.append((now, {k: b for k, (_p, b) in counters.items()}))
        slack = 0.1 * self.span  # reads come every interval ± scheduling jitter
        while len(self._reads) > 2 and now - self._reads[1][0] >= self.span - slack:
            self._reads.popleft()
        t0, base = self._reads[0]
        if t0 == now:
            return {}
        return path_rates(base, counters, now - t0)[0]


def path_rtt_ms(path: SitePath, link_ms: Mapping[str, float | None]) -> float | None:
    """A path's delay: the sum of its links' latest latencies (None while any link has no sample)."""
    vals = [link_ms.get(lid) for lid in path.links]
    if not vals or any(v is None for v in vals):
        return None
    return float(sum(v for v in vals if v is not None))


# ---------------------------------------------------------------------- decisions
@dataclass
class MappingDecision:
    """What one call decided: the weights before/after, the flows moved (youngest first) and why."""

    kind: str  # place | remap | remove | keep
    reason: str
    at: float
    weights_before: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    estimate: tuple[float, ...] = ()  # the policy's unlimited weights
    moves: tuple[tuple[str, int, int], ...] = ()  # (flow, from path, to path)
    plan: Plan | None = None

    def as_dict(self) -> dict[str, Any]:
        r = lambda xs: [round(x, 4) for x in xs]  # noqa: E731
        return {"decision": self.kind, "reason": self.reason, "t": self.at,
                "weights_before": r(self.weights_before), "weights": r(self.weights),
                "estimate": r(self.estimate), "moves": [list(m) for m in self.moves],
                "plan": self.plan.id if self.plan else None}


@dataclass
class _Est:
    smoother: CycleSmoother = field(default_factory=CycleSmoother)
    samples: int = 0


class SiteMapper:
    """The flows of one site pair on its paths, under one policy.

    ``add_flow`` places a new flow on the path furthest below its share; ``observe`` feeds each
    path's measurement (Mbit/s for ``throughput``, ms for ``rtt``; ``static`` ignores them);
    ``step`` turns the estimate into limited weights and returns the moves and the plan that makes
    them. The mapper's own state (weights, which flow is where) changes only through :meth:`done`
    after a plan ran, so a failed plan leaves it describing the network as it is.
    """

    def __init__(self, paths: Sequence[SitePath], policy: str = STATIC, *, ident: int = 1, max_step: float = 0.1,
                 floor: float = 0.1, min_samples: int = 3, drain: bool = True,
                 max_cycle: int | None = MAX_CYCLE_SAMPLES) -> None:
        if policy not in POLICIES:
            raise MappingError(f"mapping policy {policy!r} is not one of {', '.join(POLICIES)}")
        if len(paths) < 2:
            raise MappingError(f"load-aware mapping needs 2 or more paths, got {len(paths)}")
        ends = {(p.a, p.z) for p in paths}
        if len(ends) != 1:
            raise MappingError(f"paths join different site pairs: {sorted(ends)}")
        if not 0 < max_step <= 1 or not 0 <= floor <= 1.0 / len(paths):
            raise MappingError(f"need 0 < max_step <= 1 and 0 <= floor <= 1/{len(paths)}")
        self.paths = tuple(paths)
        self.policy = policy
        self.ident = ident
        self.max_step, self.floor = max_step, floor
        self.min_samples = min_samples
        self.drain = drain
        self.max_cycle = max_cycle if policy == THROUGHPUT else None
        n = len(paths)
        self.weights: tuple[float, ...] = tuple([1.0 / n] * n)
        self.remapper = FlowRemapper(n)
        self.flows: dict[FiveTuple, MappedFlow] = {}
        self._est = [_Est(CycleSmoother(max_cycle=self.max_cycle)) for _ in paths]
        self._skip = 0  # samples still to drop after a move (the one spanning it)

    # ---- state -------------------------------------------------------------------------------------
    def path_of(self, five: FiveTuple) -> int:
        return self.remapper.assign[five].path

    def counts(self) -> list[int]:
        return self.remapper.counts()

    def rules(self) -> list[FlowRule]:
        """Every rule the mapper's flows need where they are now (the intended flow table)."""
        return [r for f, mf in self.flows.items() for r in flow_rules(mf, self.paths[self.path_of(f)],
                                                                      self.ident).all]

    def counted_rules(self) -> dict[tuple, tuple[int, FlowRule]]:
        """Rule key -> (path index, rule) of each flow's forward egress rule (what ``path_rates`` reads)."""
        out = {}
        for f, mf in self.flows.items():
            p = self.path_of(f)
            r = flow_rules(mf, self.paths[p], self.ident).counted
            out[r.key()] = (p, r)
        return out

    # ---- flows -------------------------------------------------------------------------------------
    def add_flow(self, flow: MappedFlow, now: float) -> MappingDecision:
        """Place a new flow on the path with the largest deficit w_i·(N+1) − n_i (lowest index on ties)."""
        if flow.five in self.flows:
            return MappingDecision(KEEP, f"{flow.five} is already mapped on {self.paths[self.path_of(flow.five)].name}",
                                   now, self.weights, self.weights)
        counts = self.counts()
        n = sum(counts) + 1
        deficit = [w * n - c for w, c in zip(self.weights, counts, strict=True)]
        best = max(range(len(self.paths)), key=lambda i: (deficit[i], -i))
        rules = flow_rules(flow, self.paths[best], self.ident)
        plan = planner.provision([], [], [], list(rules.path), list(rules.ingress), verify=False,
                                 plan_id=f"map{self.ident}-place-{flow.five.sport}-{now:.3f}")
        return MappingDecision(PLACE, f"{flow.five} onto {self.paths[best].name} (share {self.weights[best]:.2f}, "
                               f"{counts[best]} flow(s) there)", now, self.weights, self.weights,
                               moves=((str(flow.five), -1, best),), plan=plan)

    def remove_flow(self, five: FiveTuple, now: float) -> MappingDecision:
        if five not in self.flows:
            return MappingDecision(KEEP, f"{five} is not mapped", now, self.weights, self.weights)
        p = self.path_of(five)
        rules = flow_rules(self.flows[five], self.paths[p], self.ident)
        plan = planner.release([], list(rules.path), list(rules.ingress), drain=False,
                               plan_id=f"map{self.ident}-remove-{five.sport}-{now:.3f}")
        return MappingDecision(REMOVE, f"{five} off {self.paths[p].name}", now, self.weights, self.weights,
                               moves=((str(five), p, -1),), plan=plan)

    # ---- measurements and weights --------------------------------------------------------------------
    def observe(self, samples: Mapping[int, float | None]) -> None:
        """One measurement per path index (Mbit/s or ms, by policy); None: no sample this round."""
        if self._skip and any(x is not None for x in samples.values()):
            self._skip -= 1  # it spans the last move: neither the old nor the new flow set
            return
        for i, x in samples.items():
            if x is not None and math.isfinite(x) and x >= 0:
                self._est[i].smoother.add(float(x))
                self._est[i].samples += 1

    def estimate(self) -> tuple[tuple[float, ...], str]:
        """The policy's weights before the seed's limits, and why."""
        n = len(self.paths)
        if self.policy == STATIC:
            return tuple([1.0 / n] * n), "static: equal split"
        short = [p.name for p, e in zip(self.paths, self._est, strict=True) if e.samples < self.min_samples]
        if short:
            return self.weights, f"{self.policy}: waiting for {self.min_samples} samples on {', '.join(short)}"
        sm = [e.smoother for e in self._est]
        if self.policy == THROUGHPUT:
            counts = self.counts()
            vals = [s.value() or 0.0 for s in sm]
            per_flow = ", ".join(f"{p.name} {v:.2f} Mbit/s / {c}" for p, v, c in
                                 zip(self.paths, vals, counts, strict=True))
            return tuple(throughput_weights(sm, counts)), f"throughput per flow: {per_flow}"
        vals = [s.value() or 0.0 for s in sm]
        rtts = ", ".join(f"{p.name} {v:.1f} ms (min cycle {s.min_cycle_avg:.1f}, max {s.max_value:.1f})"
                         for p, v, s in zip(self.paths, vals, sm, strict=True))
        return tuple(rtt_weights(sm)), f"rtt: {rtts}"

    def step(self, now: float) -> MappingDecision:
        """New weights (each moved at most ``max_step``, none below ``floor``) and the flows that move."""
        est, why = self.estimate()
        new = tuple(limit_weights(self.weights, est, self.max_step, self.floor))
        if all(abs(a - b) < 1e-9 for a, b in zip(new, self.weights, strict=True)):
            return MappingDecision(KEEP, f"weights unchanged; {why}", now, self.weights, new, est)
        moves = copy.deepcopy(self.remapper).remap(new, now)  # a trial: the state changes in done()
        plan = self._move_plan([(m.flow, m.src, m.dst) for m in moves], now) if moves else None
        text = f"weights {_fmt(self.weights)} -> {_fmt(new)}; {len(moves)} flow(s) move; {why}"
        return MappingDecision(REMAP, text, now, self.weights, new, est,
                               tuple((str(m.flow), m.src, m.dst) for m in moves), plan)

    def _move_plan(self, moves: Iterable[tuple[Any, int, int]], now: float) -> Plan:
        old_rules: list[FlowRule] = []
        new_rules: list[FlowRule] = []
        changes: list[IngressChange] = []
        for five, src, dst in moves:
            mf = self.flows[five]
            old = flow_rules(mf, self.paths[src], self.ident)
            new = flow_rules(mf, self.paths[dst], self.ident)
            old_rules += old.path
            new_rules += new.path
            changes += [IngressChange(n, o) for n, o in zip(new.ingress, old.ingress, strict=True)]
        return planner.move([], old_rules, [], [], [], new_rules, changes, verify=False, drain=self.drain,
                            plan_id=f"map{self.ident}-remap-{now:.3f}")

    # ---- what the executor did ------------------------------------------------------------------------
    def done(self, d: MappingDecision, ok: bool, flow: MappedFlow | None = None) -> None:
        """Record an executed decision (``flow``: the placed flow). A failed plan changes nothing."""
        if not ok:
            return
        if d.kind == PLACE:
            assert flow is not None, "a placement records its flow"
            _f, _src, dst = d.moves[0]
            self.flows[flow.five] = flow
            self.remapper.add_flow(flow.five, dst, d.at)
        elif d.kind == REMOVE:
            for five in [f for f in self.flows if str(f) == d.moves[0][0]]:
                del self.flows[five]
                self.remapper.remove_flow(five)
        elif d.kind in (REMAP, KEEP):
            by_name = {str(f): f for f in self.flows}
            for name, _src, dst in d.moves:
                self.remapper.add_flow(by_name[name], dst, d.at)  # re-assign: the flow is now the youngest there
            self.weights = d.weights
            if d.moves:
                self._settle()

    def _settle(self) -> None:
        """Flows moved: drop the sample spanning the move and wait for ``min_samples`` new ones per path
        before the next weight change; the throughput estimators start again (see the module doc)."""
        self._skip = 1
        for e in self._est:
            e.samples = 0
            if self.policy == THROUGHPUT:
                e.smoother = CycleSmoother(max_cycle=self.max_cycle)

    def status(self) -> dict[str, Any]:
        return {"policy": self.policy, "weights": [round(w, 4) for w in self.weights], "counts": self.counts(),
                "paths": [{"name": p.name, "a_out": p.a_out, "z_in": p.z_in, "links": list(p.links),
                           "transit": [[h.switch, h.in_port, h.out_port] for h in p.transit]} for p in self.paths],
                "flows": {str(f): self.paths[self.path_of(f)].name for f in self.flows},
                "estimate": [e.smoother.value() for e in self._est]}


def _fmt(ws: Sequence[float]) -> str:
    return "(" + ", ".join(f"{w:.2f}" for w in ws) + ")"


# ---------------------------------------------------------------------- metrics (the paper's, + Jain)
def flow_metrics(mbps: Sequence[float]) -> dict[str, float]:
    """AVGT (mean per-flow throughput), STD (population), MMR (min/max) and Jain's fairness index."""
    xs = [float(x) for x in mbps]
    if not xs:
        raise MappingError("no flow throughputs to summarise")
    n = len(xs)
    mean = sum(xs) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / n)
    top = max(xs)
    sq = sum(x * x for x in xs)
    return {"avgt_mbps": mean, "std_mbps": std, "mmr": (min(xs) / top) if top > 0 else 0.0,
            "jain": (sum(xs) ** 2) / (n * sq) if sq > 0 else 0.0, "flows": n}


def samples_for(policy: str, rates: Mapping[int, float], rtts: Mapping[int, float | None]
                ) -> dict[int, float | None]:
    """What a policy's estimator is fed: Mbit/s (throughput), ms (rtt) or nothing (static)."""
    if policy == THROUGHPUT:
        return dict(rates)
    if policy == RTT:
        return dict(rtts)
    return {}

