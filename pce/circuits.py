"""Multi-layer circuit planning: route demands on existing packet capacity or light new circuits.

A *circuit* is an XCON chain ``switch port -> oport -> XCON -> oport -> fibre -> ... -> oport ->
switch port``; lighting it creates a packet link between the two switch ports with the port
granularity's capacity (one whole unit: a virtual port is taken whole). Candidate circuits are the
few shortest optical chains between every pair of packet switches with free uplinks
(:func:`candidate_circuits`).

One model decides routing and lighting jointly (:func:`build_circuit_model`):

* ``y_c`` in {0, 1} lights candidate ``c`` (``integer=True``) or in [0, 1] (the LP relaxation);
* ``f[d, arc]`` >= 0 is demand ``d``'s Mbit/s on a directed packet arc (existing links and
  candidate circuits), with flow conservation and ``s_d`` <= bandwidth served;
* a link's two directions share its capacity (as in the reservation CSPF); a circuit's capacity
  is ``capacity_c * y_c``; two candidates sharing an optical port are exclusive
  (``sum y_c <= 1`` per port);
* a demand whose deadline is shorter than a circuit's setup time has no variable on that circuit;
* objective: minimise ``unserved_penalty * unserved Mbit/s + circuit_cost * circuits lit +
  hop_cost * Mbit/s * hops`` — serve as much as possible, then with as few new circuits as
  possible, then on short routes.

``model.solve()`` solves the integer model exactly (HiGHS by default, CBC available).
:func:`plan_circuits` with ``method="relax"`` solves the LP relaxation, rounds it by diving (fix
the most-lit fractional circuit to 1 and its port conflicts to 0, re-solve, repeat until no
circuit is fractional), then re-solves the routing LP with those circuits fixed, drops
circuits that carry nothing and, while demand is unserved, adds (or swaps in, replacing the
circuits it conflicts with) the candidate that improves the objective most (a few LP solves). docs/pce-paths.md reports the
measured gap between the two.
"""
from __future__ import annotations

import itertools
import math
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pulp

from pce.cspf import Constraints, RoutingView, nx_graph
from pce.errors import InvalidInputError, SolverError, UnknownTopologyError
from pce.highs import quiet_banner
from pce.ksp import IndexedView, yen_indexed

METHODS = ("integer", "relax")
#: Repair after rounding: rounds, and candidate circuits tried (one LP each) per round.
REPAIR_ROUNDS = 5
REPAIR_TRIALS = 16
SOLVERS = ("highs", "cbc")
#: A chain's ports must have headroom: a port held by a lit circuit or a booking has 0.
CHAIN_MIN_WIDTH = 1e-6


@dataclass(frozen=True)
class Demand:
    """``bandwidth`` Mbit/s from ``src`` to ``dst`` (switches or hosts), needed within ``deadline``
    seconds (None = no hurry: any circuit may be lit for it)."""

    id: str
    src: str
    dst: str
    bandwidth: float
    deadline: float | None = None


@dataclass(frozen=True)
class CandidateCircuit:
    """A candidate XCON chain and the packet link it would create."""

    id: str
    a: str
    a_port: int
    b: str
    b_port: int
    oports: tuple[str, ...]
    xcons: tuple[tuple[str, str], ...]
    capacity: float
    setup_time: float
    latency: float = 0.0


@dataclass
class CircuitPlan:
    """What the model decided: circuits to light, each demand's flow per edge and what is served."""

    method: str
    status: str
    objective: float
    lit: list[CandidateCircuit]
    served: dict[str, float]
    unserved: dict[str, float]
    flows: dict[str, dict[str, float]]  # demand id -> edge key or circuit id -> Mbit/s
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    lp_bound: float | None = None  # objective of the LP relaxation (relax method)
    candidates: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lit"] = [asdict(c) for c in self.lit]
        return d


def _var(prob: pulp.LpProblem, name: str, low: float | None = None, up: float | None = None,
         cat: str = pulp.LpContinuous) -> pulp.LpVariable:
    """A variable attached to ``prob`` (PuLP >= 3.3 API; plain LpVariable on older PuLP)."""
    if hasattr(prob, "add_variable"):
        return prob.add_variable(name, low, up, cat)
    return pulp.LpVariable(name, low, up, cat)


#: Absolute MIP gap: below one circuit's cost, so "optimal" means no cheaper plan exists
#: (HiGHS' default relative gap of 1e-4 could hide whole circuits behind the unserved penalty).
MIP_GAP_ABS = 1e-4


def _solver(name: str, time_limit: float | None = None) -> Any:
    if name == "highs":
        quiet_banner()  # msg=False does not cover the banner HiGHS prints at its first construction
        return pulp.HiGHS(msg=False, gapAbs=MIP_GAP_ABS, gapRel=0.0, timeLimit=time_limit)
    if name == "cbc":
        import warnings

        with warnings.catch_warnings():  # PuLP 3.3 deprecates the bundled CBC; it still works
            warnings.simplefilter("ignore", DeprecationWarning)
            return pulp.PULP_CBC_CMD(msg=False, gapAbs=MIP_GAP_ABS, gapRel=0.0, timeLimit=time_limit)
    raise InvalidInputError(f"unknown solver {name!r} (choose: {', '.join(SOLVERS)})")


# ---------------------------------------------------------------------- candidates
def _uplinks(g: Any) -> dict[str, list[tuple[int, str]]]:
    """Packet switch -> [(port, oport)] of adaptation edges on ports not held by an active XCON."""
    out: dict[str, list[tuple[int, str]]] = {}
    lit = {n for u, v, d in g.edges(data=True) if d.get("kind") == "xcon" and d.get("active") for n in (u, v)}
    for u, v, d in g.edges(data=True):
        if d.get("kind") != "adaptation":
            continue
        sw, op = (u, v) if g.nodes[v].get("kind") == "oport" else (v, u)
        if op in lit:  # held by an active XCON
            continue
        out.setdefault(sw, []).append((int(d.get("ports", {}).get(sw, 0)), op))
    return out


def candidate_circuits(graph: Any, per_pair: int = 8, pairs: Iterable[tuple[str, str]] | None = None
                       ) -> list[CandidateCircuit]:
    """The ``per_pair`` shortest XCON chains between each pair of switches with free uplinks.

    Chains cross only optical ports (no packet switch in the middle) and only free ports of one
    granularity; ``pairs`` restricts the switch pairs considered (default: all).
    """
    return _numbered(_chains_by_pair(graph, per_pair, pairs).values())


#: Edge kinds a candidate circuit's XCON chain is made of (and so all its search looks at).
CHAIN_EDGE_KINDS = ("adaptation", "optical", "xcon")


def optical_key(graph: Any) -> tuple[Any, ...]:
    """What every switch pair's XCON chains depend on, as a hashable value: the optical ports, the
    adaptation, fibre and XCON edges (with their attributes: capacity, latency, active, ports) and
    which nodes are switches or hosts. The packet layer (its links, their loads) is not in it: a
    chain never crosses a packet link or another switch, so its chains stay valid when only that
    layer changes."""
    g = nx_graph(graph)
    nodes = tuple((n, d.get("kind"), tuple(sorted((a, repr(v)) for a, v in d.items())) if d.get("kind") == "oport"
                   else ()) for n, d in g.nodes(data=True))
    edges = tuple((u, v, k, tuple(sorted((a, repr(x)) for a, x in d.items())))
                  for u, v, k, d in g.edges(keys=True, data=True) if d.get("kind") in CHAIN_EDGE_KINDS)
    return nodes, edges


def _numbered(chains_by_pair: Iterable[list[CandidateCircuit]]) -> list[CandidateCircuit]:
    """Chains of the pairs in order, numbered ``c0``, ``c1``, … across them (the ids' ``c<n>`` prefix)."""
    out: list[CandidateCircuit] = []
    for chains in chains_by_pair:
        out += [replace(c, id=f"c{len(out) + i}{c.id}") for i, c in enumerate(chains)]
    return out


class ChainCache:
    """:func:`candidate_circuits` that keeps each switch pair's chains while the optical layer
    (:func:`optical_key`) is unchanged: a placement whose flows gained a switch pair searches that
    pair only, and a change of the packet layer alone searches nothing. The result is the same list
    as :func:`candidate_circuits` (a pair's chains do not depend on the other pairs; the numbering
    is redone per call). ``size`` optical layers are kept (least recently used dropped)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._chains: OrderedDict[tuple[Any, ...], dict[tuple[tuple[str, str], int], list[CandidateCircuit]]] = \
            OrderedDict()
        self._lists: OrderedDict[tuple[Any, ...], list[CandidateCircuit]] = OrderedDict()
        self.searched_pairs = 0  # pairs searched since made (tests and benchmarks read it)

    def clear(self) -> None:
        self._chains.clear()
        self._lists.clear()

    def circuits(self, graph: Any, per_pair: int, pairs: Iterable[tuple[str, str]]) -> list[CandidateCircuit]:
        """``candidate_circuits(graph, per_pair, pairs)``, searching only the pairs not yet known."""
        key = optical_key(graph)
        todo = sorted({tuple(sorted(p)) for p in pairs})
        whole = (key, per_pair, tuple(todo))
        got = self._lists.get(whole)
        if got is not None:
            self._lists.move_to_end(whole)
            return list(got)
        known = self._chains.get(key)
        if known is None:
            known = self._chains[key] = {}
            while len(self._chains) > self.size:
                self._chains.popitem(last=False)
        else:
            self._chains.move_to_end(key)
        missing = [p for p in todo if (p, per_pair) not in known]
        if missing:
            self.searched_pairs += len(missing)
            known.update({(p, per_pair): c for p, c in _chains_by_pair(graph, per_pair, missing).items()})
        out = self._lists[whole] = _numbered(known[p, per_pair] for p in todo)
        while len(self._lists) > self.size:
            self._lists.popitem(last=False)
        return list(out)


def candidate_circuits_by_pair(graph: Any, pairs: Iterable[tuple[str, str]], per_pair: int = 8
                               ) -> dict[tuple[str, str], list[CandidateCircuit]]:
    """:func:`candidate_circuits` of each sorted pair alone (ids numbered per pair, as one call per pair
    gives them), from one routing view of ``graph``: a decision with several switch pairs builds it once."""
    return {pair: [replace(c, id=f"c{i}{c.id}") for i, c in enumerate(chains)]
            for pair, chains in _chains_by_pair(graph, per_pair, pairs).items()}


def _chains_by_pair(graph: Any, per_pair: int, pairs: Iterable[tuple[str, str]] | None
                    ) -> dict[tuple[str, str], list[CandidateCircuit]]:
    """Per sorted switch pair (in sorted order), its shortest XCON chains; each id is only the
    ``:a:port-b:port`` tail (the callers number them)."""
    g = nx_graph(graph)
    view = RoutingView.build(graph)
    ups = _uplinks(g)
    switches = sorted(ups)
    blocked = frozenset(n for n, k in view.kind.items() if k in ("packet", "host"))
    # a lit packet link between the two switches is no XCON chain (it would end the search at once)
    packet_links = frozenset(k for k, kind in view.edge_kind.items() if kind == "packet")
    todo = sorted({tuple(sorted(p)) for p in pairs}) if pairs is not None else [
        (a, b) for i, a in enumerate(switches) for b in switches[i + 1:]]
    out: dict[tuple[str, str], list[CandidateCircuit]] = {}
    iv: IndexedView | None = None  # the view as integer adjacency, shared by every pair's search
    for a, b in todo:
        chains = out.setdefault((a, b), [])
        if a not in ups or b not in ups:
            continue
        if iv is None:
            iv = IndexedView(view, CHAIN_MIN_WIDTH, packet_links, blocked)
        cons = Constraints(min_width=CHAIN_MIN_WIDTH, banned_bases=blocked - {a, b}, banned_keys=packet_links)
        for route in itertools.islice(yen_indexed(iv, (a, ""), b, cons), per_pair):
            first, last = route.arcs[0], route.arcs[-1]
            a_port = int(view.edge_attrs[first.key].get("ports", {}).get(a, 0))
            b_port = int(view.edge_attrs[last.key].get("ports", {}).get(b, 0))
            oports = tuple(v[0] for v in route.vertices[1:-1])
            xcons = tuple((route.vertices[i][0], arc.head[0]) for i, arc in enumerate(route.arcs)
                          if arc.kind == "xcon")
            setup = max((float(view.edge_attrs[arc.key].get("setup_time") or 0.0)
                         for arc in route.arcs if arc.kind == "xcon"), default=0.0)
            cap = min(float(g.nodes[p].get("capacity", math.inf)) for p in oports)
            chains.append(CandidateCircuit(f":{a}:{a_port}-{b}:{b_port}", a, a_port, b, b_port, oports, xcons,
                                           cap, setup, route.latency))
    return out


# ---------------------------------------------------------------------- model
@dataclass
class CircuitModel:
    """The PuLP problem and its variables (inspectable before solving)."""

    problem: pulp.LpProblem
    demands: list[Demand]
    circuits: list[CandidateCircuit]
    links: dict[str, tuple[str, str, float]]  # existing packet link key -> (u, v, capacity)
    y: dict[str, pulp.LpVariable]
    flow: dict[tuple[str, str, str, str], pulp.LpVariable]  # (demand, link/circuit id, tail, head)
    served: dict[str, pulp.LpVariable]
    integer: bool
    build_seconds: float = 0.0
    params: dict[str, float] = field(default_factory=dict)

    def fix(self, lit: Iterable[str]) -> None:
        """Fix every circuit variable: 1 for the ids in ``lit``, 0 for the others."""
        on = set(lit)
        for cid, var in self.y.items():
            var.lowBound = var.upBound = 1 if cid in on else 0

    def solve(self, solver: str = "highs", method: str | None = None, time_limit: float | None = None
              ) -> CircuitPlan:
        """Solve and read the plan back.

        With ``time_limit`` (seconds) a MIP stopped early returns its best integer plan with
        status ``"Feasible"``; no solution at all (or a solver failure) raises SolverError.
        """
        t0 = time.perf_counter()
        try:
            self.problem.solve(_solver(solver, time_limit))
        except pulp.PulpSolverError as exc:
            raise SolverError(f"{solver} failed: {exc}") from None
        dt = time.perf_counter() - t0
        status = pulp.LpStatus[self.problem.status]
        if status != "Optimal":
            raise SolverError(f"circuit model not solved ({status})")
        if getattr(self.problem, "sol_status", pulp.LpSolutionOptimal) == pulp.LpSolutionIntegerFeasible:
            status = "Feasible"  # stopped by the time limit: best plan found, optimality not proven
        lit = [c for c in self.circuits if (self.y[c.id].value() or 0) > 0.5]
        served = {d.id: max(0.0, self.served[d.id].value() or 0.0) for d in self.demands}
        flows: dict[str, dict[str, float]] = {d.id: {} for d in self.demands}
        for (did, eid, _, _), var in self.flow.items():
            val = var.value() or 0.0
            if val > 1e-7:
                flows[did][eid] = flows[did].get(eid, 0.0) + val
        return CircuitPlan(
            method=method or ("integer" if self.integer else "lp"),
            status=status,
            objective=float(pulp.value(self.problem.objective) or 0.0),
            lit=lit,
            served=served,
            unserved={d.id: max(0.0, d.bandwidth - served[d.id]) for d in self.demands},
            flows=flows,
            build_seconds=self.build_seconds,
            solve_seconds=dt,
            candidates=len(self.circuits),
        )

    def fractional(self) -> dict[str, float]:
        """Circuit variable values after a solve (fractional for the relaxation)."""
        return {cid: float(v.value() or 0.0) for cid, v in self.y.items()}


def _endpoint(g: Any, name: str) -> str:
    if name not in g:
        raise UnknownTopologyError(f"unknown demand endpoint {name!r}")
    kind = g.nodes[name].get("kind")
    if kind == "packet":
        return name
    if kind == "host":
        for _, sw, d in g.edges(name, data=True):
            if d.get("kind") == "access":
                return sw
        raise InvalidInputError(f"host {name!r} is not attached to a switch")
    raise InvalidInputError(f"demand endpoint {name!r} is an {kind} node, not a switch or host")


def check_demands(graph: Any, demands: Sequence[Demand]) -> list[Demand]:
    """Validate demands and map host endpoints to their switches."""
    g = nx_graph(graph)
    out, ids = [], set()
    for d in demands:
        if d.id in ids:
            raise InvalidInputError(f"duplicate demand id {d.id!r}")
        ids.add(d.id)
        bw = d.bandwidth
        if isinstance(bw, bool) or not isinstance(bw, (int, float)) or not math.isfinite(bw) or bw <= 0:
            raise InvalidInputError(f"demand {d.id}: bandwidth must be a finite number > 0, got {bw!r}")
        if d.deadline is not None and (not isinstance(d.deadline, (int, float)) or d.deadline < 0):
            raise InvalidInputError(f"demand {d.id}: deadline must be >= 0 seconds or null")
        src, dst = _endpoint(g, d.src), _endpoint(g, d.dst)
        if src == dst:
            raise InvalidInputError(f"demand {d.id}: both ends are on switch {src}")
        out.append(Demand(d.id, src, dst, float(bw), d.deadline))
    return out


def build_circuit_model(
    graph: Any,
    demands: Sequence[Demand],
    circuits: Sequence[CandidateCircuit] | None = None,
    *,
    integer: bool = True,
    circuit_cost: float = 1.0,
    unserved_penalty: float = 100.0,
    hop_cost: float = 1e-3,
) -> CircuitModel:
    """Build (not solve) the joint routing + circuit lighting model."""
    t0 = time.perf_counter()
    g = nx_graph(graph)
    dem = check_demands(graph, demands)
    if circuits is None:
        circuits = candidate_circuits(graph)
    nodes = sorted(n for n, d in g.nodes(data=True) if d.get("kind") == "packet")
    links = {k: (u, v, float(d.get("capacity") or 0.0)) for u, v, k, d in g.edges(keys=True, data=True)
             if d.get("kind") == "packet"}
    prob = pulp.LpProblem("circuits", pulp.LpMinimize)
    row = itertools.count()
    cat = pulp.LpBinary if integer else pulp.LpContinuous
    y = {c.id: _var(prob, f"y_{i}", 0, 1, cat) for i, c in enumerate(circuits)}
    served = {d.id: _var(prob, f"s_{i}", 0, d.bandwidth) for i, d in enumerate(dem)}
    flow: dict[tuple[str, str, str, str], pulp.LpVariable] = {}
    out_arcs: dict[tuple[str, str], list[pulp.LpVariable]] = {}
    in_arcs: dict[tuple[str, str], list[pulp.LpVariable]] = {}
    per_edge: dict[str, list[pulp.LpVariable]] = {}
    hop_terms = []
    for i, d in enumerate(dem):
        arcs: list[tuple[str, str, str]] = []
        for k, (u, v, _) in links.items():
            arcs += [(k, u, v), (k, v, u)]
        for c in circuits:
            if d.deadline is not None and d.deadline < c.setup_time:
                continue  # the circuit would come up too late for this demand
            arcs += [(c.id, c.a, c.b), (c.id, c.b, c.a)]
        for j, (eid, tail, head) in enumerate(arcs):
            var = _var(prob, f"f_{i}_{j}", 0)
            flow[(d.id, eid, tail, head)] = var
            out_arcs.setdefault((d.id, tail), []).append(var)
            in_arcs.setdefault((d.id, head), []).append(var)
            per_edge.setdefault(eid, []).append(var)
            hop_terms.append(var)
    for d in dem:
        for n in nodes:
            rhs = served[d.id] if n == d.src else (-served[d.id] if n == d.dst else 0)
            prob += (pulp.lpSum(out_arcs.get((d.id, n), [])) - pulp.lpSum(in_arcs.get((d.id, n), []))
                     == rhs), f"conserve_{next(row)}"
    for k, (_, _, cap) in links.items():
        if per_edge.get(k):
            prob += pulp.lpSum(per_edge[k]) <= cap, f"cap_{next(row)}"
    for c in circuits:
        prob += pulp.lpSum(per_edge.get(c.id, [])) <= c.capacity * y[c.id], f"circ_{next(row)}"
    ports: dict[str, list[pulp.LpVariable]] = {}
    for c in circuits:
        for p in c.oports:
            ports.setdefault(p, []).append(y[c.id])
    for _port, ys in sorted(ports.items()):
        if len(ys) > 1:
            prob += pulp.lpSum(ys) <= 1, f"port_{next(row)}"
    prob += (unserved_penalty * pulp.lpSum(d.bandwidth - served[d.id] for d in dem)
             + circuit_cost * pulp.lpSum(y.values()) + hop_cost * pulp.lpSum(hop_terms))
    return CircuitModel(prob, dem, list(circuits), links, y, flow, served, integer,
                        time.perf_counter() - t0,
                        {"circuit_cost": circuit_cost, "unserved_penalty": unserved_penalty, "hop_cost": hop_cost})


def plan_circuits(graph: Any, demands: Sequence[Demand], *, method: str = "integer", solver: str = "highs",
                  circuits: Sequence[CandidateCircuit] | None = None, time_limit: float | None = None,
                  **weights: float) -> CircuitPlan:
    """Plan circuits for ``demands``: ``integer`` (exact MIP; ``time_limit`` seconds caps it and
    returns the best plan found, status "Feasible") or ``relax`` (LP + rounding)."""
    if method not in METHODS:
        raise InvalidInputError(f"unknown method {method!r} (choose: {', '.join(METHODS)})")
    if circuits is None:
        circuits = candidate_circuits(graph)
    if method == "integer":
        return build_circuit_model(graph, demands, circuits, integer=True, **weights).solve(
            solver, "integer", time_limit)
    lp = build_circuit_model(graph, demands, circuits, integer=False, **weights)
    relaxed = lp.solve(solver, "lp")
    plan = _dive(lp, solver)
    plan.lp_bound = relaxed.objective
    plan.build_seconds = lp.build_seconds
    plan.solve_seconds += relaxed.solve_seconds
    return plan


def _dive(lp: CircuitModel, solver: str) -> CircuitPlan:
    """Round the relaxation by diving: fix the most-lit fractional circuit to 1 (and the circuits
    sharing a port with it to 0), re-solve, until no circuit is fractional; then fix the result,
    switch off lit circuits that carry nothing, and re-solve the routing."""
    by_id = {c.id: c for c in lp.circuits}
    relaxed_values = lp.fractional()
    on: set[str] = set()
    off: set[str] = set()
    solves = 0.0
    while True:
        frac = lp.fractional()
        free = [cid for cid, v in frac.items() if cid not in on | off and 1e-6 < v < 1 - 1e-6]
        if not free:
            break
        pick = max(free, key=lambda cid: (frac[cid], cid))
        on.add(pick)
        ports = set(by_id[pick].oports)
        off |= {c.id for c in lp.circuits if c.id != pick and ports & set(c.oports)}
        for cid in on:
            lp.y[cid].lowBound = 1
        for cid in off:
            lp.y[cid].upBound = 0
        solves += lp.solve(solver, "relax").solve_seconds
    frac = lp.fractional()
    chosen = round_circuits(lp.circuits, {cid: v for cid, v in frac.items() if v > 1 - 1e-6 or cid in on})
    lp.fix(chosen)
    plan = lp.solve(solver, "relax")
    idle = [c.id for c in plan.lit if not any(f.get(c.id) for f in plan.flows.values())]
    if idle:  # a rounded-up circuit nobody uses only costs: switch it off
        chosen = [cid for cid in chosen if cid not in idle]
        lp.fix(chosen)
        plan = lp.solve(solver, "relax")
    plan, extra = _repair(lp, solver, plan, chosen, relaxed_values)
    plan.solve_seconds += solves + extra
    return plan


def _repair(lp: CircuitModel, solver: str, plan: CircuitPlan, chosen: list[str],
            relaxed: dict[str, float]) -> tuple[CircuitPlan, float]:
    """While demand is unserved, light the candidate at a short switch that lowers the objective
    most — added if its ports are free, else swapped for the lit circuits it conflicts with —
    trying the ``REPAIR_TRIALS`` most promising moves per round (additions first, then by
    relaxation value). Rounding can give away ports the optimum needs; this local search wins
    some of that back at a few LP solves."""
    spent = 0.0
    for _ in range(REPAIR_ROUNDS):
        short = {n for d in lp.demands if plan.unserved[d.id] > 1e-6 for n in (d.src, d.dst)}
        if not short:
            break
        by_id = {c.id: c for c in lp.circuits}
        used = {p for cid in chosen for p in by_id[cid].oports}
        moves = [c for c in lp.circuits if c.id not in chosen and (c.a in short or c.b in short)]
        # adding a compatible circuit first, then swaps (the circuit replaces those it conflicts with)
        moves.sort(key=lambda c: (bool(used & set(c.oports)), -relaxed.get(c.id, 0.0),
                                  -((c.a in short) + (c.b in short)), c.id))
        best: tuple[float, list[str], CircuitPlan] | None = None
        for c in moves[:REPAIR_TRIALS]:
            ports = set(c.oports)
            trial_set = [cid for cid in chosen if not ports & set(by_id[cid].oports)] + [c.id]
            lp.fix(trial_set)
            trial = lp.solve(solver, "relax")
            spent += trial.solve_seconds
            if trial.objective < plan.objective - 1e-6 and (best is None or trial.objective < best[0]):
                best = (trial.objective, trial_set, trial)
        if best is None:
            break
        chosen, plan = best[1], best[2]
    lp.fix(chosen)
    return plan, spent


def round_circuits(circuits: Sequence[CandidateCircuit], frac: dict[str, float], threshold: float = 1e-6) -> list[str]:
    """Circuits by decreasing fractional value, each kept unless it shares a port with a kept one."""
    taken: set[str] = set()
    chosen: list[str] = []
    for c in sorted(circuits, key=lambda c: (-frac.get(c.id, 0.0), c.id)):
        if frac.get(c.id, 0.0) <= threshold or taken & set(c.oports):
            continue
        chosen.append(c.id)
        taken.update(c.oports)
    return chosen
