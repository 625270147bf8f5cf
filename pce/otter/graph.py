"""OTTER placement over the live multi-layer graph ("graph mode", issue 15).

Why: the OTTER LP (paper §4) places flows by how well each path suits each flow's tolerance of
latency, jitter and loss; on a multi-layer WAN some of the best paths do not exist yet — they need
an optical circuit lit first. This module turns a ``MultiLayerGraph`` and a flow list into the
same ``Network``/``FlowSet``/``make_problem`` instance as ``pce/otter`` (same LP, same exact
presolve) and reads a placement back: each flow → one path, and the circuits to light.

Candidate paths per (source switch, destination switch), at most ``k`` of each kind:

* *existing*: the k shortest (latency) simple paths over lit packet links;
* *new circuit*: shortest existing path to one end of a candidate circuit
  (``pce.circuits.candidate_circuits``: free uplinks, one granularity, setup time, capacity of one
  whole port), the circuit, shortest existing path from its other end — one unlit circuit per
  path, the k of lowest latency.

Path metrics: RTT = 2 × Σ one-way hop latency, each hop at least ``HOP_FLOOR_MS`` (a graph without
latencies still prefers fewer hops); jitter = Σ hop ``jitter_ms`` (0 when unknown); loss % =
1 − Π(1 − hop ``loss_pct``) (0 when unknown); throughput = the bottleneck capacity. A link's two
directions share its capacity (as in the CSPF and the joint circuit model).

Circuit lighting (``lighting``): ``priced`` (default) puts every candidate circuit in a first LP
with its paths' objective coefficients lowered by ``circuit_price`` (a relative price: a new
circuit must beat an equally free lit path by that much), keeps the circuits that carry traffic
(port conflicts resolved by ``pce.circuits.round_circuits``, most-used first), then solves again
with only those. ``joint`` fixes the lit set first with the exact joint routing + lighting MIP
(``pce.circuits.plan_circuits``) on per-pair bandwidth totals. Priced is the default because the
OTTER objective — tolerance, not only bandwidth — then decides which circuits are worth lighting,
and it stays two LPs where the MIP grows with demands × arcs (measured in docs/otter.md).

PATHPIN (PER-style re-solve): a flow that has a current ``path`` among its candidates keeps it
unless moving gains at least ``pin_gain`` of its satisfaction (mean tolerance × share placed, in
[0, 1]): the LP is solved with every such flow pinned and with none; flows whose own gain is below
the threshold are pinned in the final LP.

5-tuple rules cannot split a flow, so the LP's fractions are rounded: flows the LP committed most
to go first, each whole onto the first of its paths (LP share, then tolerance) with room for all
of it, else partially onto the one with most room; members of one aggregate are dealt out to the
aggregate's paths in proportion. Placed rates never exceed a link's capacity.
"""
from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pce.circuits import Circuit, Demand, candidate_circuits, plan_circuits, round_circuits
from pce.errors import InvalidInputError
from pce.otter.aggregate import Candidates, aggregate_keys
from pce.otter.colgen import INITIAL_K, ColgenResult, ColumnGeneration, Group, Resources
from pce.otter.demand import N_METRICS, SHAPES, score
from pce.otter.graph_flows import ClassRules, GraphFlow
from pce.otter.graph_params import (
    CIRCUIT_PRICE,
    DEFAULT_K,
    DEFAULT_PATHS,
    DEFAULT_PER_PAIR,
    DEFAULT_PIN_GAIN,
    HOP_FLOOR_MS,
    LIGHTING,
    PATH_MODES,
    POLICIES,
)
from pce.otter.matrix import solve_problem
from pce.otter.problem import LpSolution, make_problem
from pce.otter.scenario import FlowSet, Network


def hop_id(a: str, a_port: int, b: str, b_port: int) -> str:
    """Stable name of a packet hop by its two switch ports: a lit circuit keeps its candidate's name."""
    return "-".join(sorted((f"{a}:{a_port}", f"{b}:{b_port}")))


@dataclass(frozen=True)
class Hop:
    """A packet-layer hop: an existing link or an unlit candidate circuit (``circuit`` set)."""

    id: str
    a: str
    a_port: int
    b: str
    b_port: int
    capacity: float
    latency: float
    jitter: float = 0.0
    loss_pct: float = 0.0
    circuit: Circuit | None = None

    def port_at(self, switch: str) -> int:
        return self.a_port if switch == self.a else self.b_port

    def other(self, switch: str) -> str:
        return self.b if switch == self.a else self.a


@dataclass(frozen=True)
class CandidatePath:
    """Switches in order and the hops between them."""

    switches: tuple[str, ...]
    hops: tuple[Hop, ...]

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(h.id for h in self.hops)

    @property
    def circuits(self) -> tuple[Circuit, ...]:
        return tuple(h.circuit for h in self.hops if h.circuit is not None)

    @property
    def one_way_ms(self) -> float:
        return sum(max(h.latency, HOP_FLOOR_MS) for h in self.hops)

    def metrics(self) -> tuple[float, float, float, float]:
        """(RTT ms, jitter ms, loss %, throughput Mbit/s) as in the module docstring."""
        keep = 1.0
        for h in self.hops:
            keep *= 1.0 - min(h.loss_pct, 100.0) / 100.0
        bw = min((h.capacity for h in self.hops), default=math.inf)
        return 2.0 * self.one_way_ms, sum(h.jitter for h in self.hops), 100.0 * (1.0 - keep), bw

    def reversed(self) -> CandidatePath:
        return CandidatePath(self.switches[::-1], self.hops[::-1])

    def as_dict(self) -> dict[str, Any]:
        rtt, jit, loss, bw = self.metrics()
        return {"switches": list(self.switches), "hops": list(self.key),
                "circuits": [c.id for c in self.circuits], "rtt_ms": rtt, "jitter_ms": jit, "loss_pct": loss,
                "capacity_mbps": bw}


def packet_edges(g: Any) -> Iterable[tuple[Any, str, int, str, int, dict[str, Any]]]:
    """Each packet edge of the networkx multigraph ``g``: its key, its ends (sorted) with their
    ports (``hop_id`` of them names the hop), and its attribute dict."""
    for u, v, k, d in g.edges(keys=True, data=True):
        if d.get("kind") == "packet":
            ports = d.get("ports", {})
            a, b = sorted((u, v))
            yield k, a, int(ports.get(a, 0)), b, int(ports.get(b, 0)), d


def lit_links(g: Any) -> Iterable[tuple[str, int, str, int, dict[str, Any]]]:
    """Each lit packet link with capacity of the networkx graph ``g``: its ends (sorted), their
    ports and its attribute dict."""
    for _k, a, pa, b, pb, d in packet_edges(g):
        if (d.get("capacity") or 0) > 0:
            yield a, pa, b, pb, d


def existing_hops(graph: Any) -> list[Hop]:
    """Lit packet links with capacity (``latency``, optional ``jitter_ms``/``loss_pct`` attributes)."""
    out = [Hop(hop_id(a, pa, b, pb), a, pa, b, pb, float(d["capacity"]), float(d.get("latency") or 0.0),
               float(d.get("jitter_ms") or 0.0), float(d.get("loss_pct") or 0.0))
           for a, pa, b, pb, d in lit_links(getattr(graph, "g", graph))]
    return sorted(out, key=lambda h: h.id)


def circuit_hops(circuits: Iterable[Circuit], known: Iterable[str] = ()) -> list[Hop]:
    """Candidate circuits as hops. Alternatives with the same ends (other XCON chains) stay apart:
    their id is the ends plus the chain's optical ports (``A:3-C:1[X:1,X:3,Z:3,Z:2]``); a circuit
    whose ends already carry a lit link is left out."""
    seen = set(known)
    out = []
    for c in circuits:
        ends = hop_id(c.a, c.a_port, c.b, c.b_port)
        hid = f"{ends}[{','.join(c.oports)}]"
        if ends in seen or hid in seen or c.capacity <= 0:
            continue
        seen.add(hid)
        out.append(Hop(hid, c.a, c.a_port, c.b, c.b_port, float(c.capacity), float(c.latency), circuit=c))
    return out


def same_hops(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two hop-id paths are the same, either way round; a lit circuit matches its candidate."""
    def ends(p: Sequence[str]) -> tuple[str, ...]:
        return tuple(h.split("[", 1)[0] for h in p)
    return ends(a) in (ends(b), ends(b)[::-1])


def _ends(hops: Iterable[str]) -> set[str]:
    """Hop ids without a candidate circuit's optical chain (``A:3-C:1[X:1,...]`` → ``A:3-C:1``)."""
    return {h.split("[", 1)[0] for h in hops}


class PathFinder:
    """k shortest existing paths and one-circuit paths between switches (see module docstring).

    Why not networkx: its k-shortest-simple-paths (Yen on a node-split graph, bidirectional Dijkstra
    per spur) was a third of a 2,000-flow placement; here Yen runs over an adjacency list of the few
    switches with a plain Dijkstra, and built paths are memoised, so a finder serves every pair (and,
    cached by :func:`path_finder`, every re-solve on the same graph)."""

    def __init__(self, switches: Sequence[str], existing: Sequence[Hop], circuits: Sequence[Hop], k: int) -> None:
        if k < 1:
            raise InvalidInputError("k (paths per flow aggregate and kind) must be ≥ 1")
        self.k = k
        self.circuits = list(circuits)
        self.hop_by_id = {h.id: h for h in existing}
        # switch -> [(neighbour, hop id, weight)]; parallel links stay distinct (by hop id)
        self.adj: dict[str, list[tuple[str, str, float]]] = {s: [] for s in switches}
        for hop in existing:
            w = max(hop.latency, HOP_FLOOR_MS)
            self.adj.setdefault(hop.a, []).append((hop.b, hop.id, w))
            self.adj.setdefault(hop.b, []).append((hop.a, hop.id, w))
        self._sp: dict[str, tuple[dict[str, float], dict[str, tuple[str, ...]]]] = {}
        self._paths: dict[tuple[str, str], list[CandidatePath]] = {}
        self._built: dict[tuple[str, ...], CandidatePath] = {}
        self._metrics: dict[Any, tuple[float, float, float, float]] = {}
        self._circuit_ms = np.array([max(c.latency, HOP_FLOOR_MS) for c in self.circuits])
        # circuit ends as indices into per-source distance arrays (vectorised path costs)
        self._index = {n: i for i, n in enumerate(self.adj)}
        for c in self.circuits:
            for end in (c.a, c.b):
                self._index.setdefault(end, len(self._index))
        self._ca = np.array([self._index[c.a] for c in self.circuits], np.int64)
        self._cb = np.array([self._index[c.b] for c in self.circuits], np.int64)
        self._dist: dict[str, np.ndarray] = {}

    def _dijkstra(self, s: str, d: str | None, banned_nodes: frozenset[str] | set[str] = frozenset(),
                  banned_hops: frozenset[str] | set[str] = frozenset()
                  ) -> tuple[dict[str, float], dict[str, tuple[str, ...]]]:
        """Distances and hop-id paths from ``s`` to the settled switches (stops at ``d`` when given;
        then only ``d``'s path is spelled out). Parent pointers, paths built at the end: a path is
        final once its switch is settled, so this is the path a per-step copy would have kept."""
        dist: dict[str, float] = {s: 0.0}
        parent: dict[str, tuple[str, str]] = {}
        done: set[str] = set()
        heap = [(0.0, 0, s)]
        n = 0
        adj, pop, push, inf = self.adj, heapq.heappop, heapq.heappush, math.inf
        while heap:
            du, _, u = pop(heap)
            if u in done:
                continue
            done.add(u)
            if u == d:
                break
            for v, hid, w in adj.get(u, ()):
                if v in done or v in banned_nodes or hid in banned_hops:
                    continue
                dv = du + w
                if dv < dist.get(v, inf):
                    dist[v] = dv
                    parent[v] = (u, hid)
                    n += 1
                    push(heap, (dv, n, v))
        paths: dict[str, tuple[str, ...]] = {s: ()}

        def path(v: str) -> tuple[str, ...]:
            chain = []
            while v not in paths:
                v, hid = parent[v][0], parent[v][1]
                chain.append(hid)
            return paths[v] + tuple(reversed(chain))

        wanted = done if d is None else ({d} & done)
        for v in wanted:
            paths[v] = path(v)
        return {v: dist[v] for v in done}, {v: paths[v] for v in wanted | {s}}

    def _build(self, start: str, hop_ids: Sequence[str]) -> CandidatePath:
        """The path from ``start`` along ``hop_ids`` (memoised: the same heads and tails recur)."""
        key = (start, *hop_ids)
        p = self._built.get(key)
        if p is None:
            switches, at = [start], start
            hops = tuple(self.hop_by_id[h] for h in hop_ids)
            for h in hops:
                at = h.other(at)
                switches.append(at)
            p = self._built[key] = CandidatePath(tuple(switches), hops)
        return p

    def shortest_from(self, s: str) -> tuple[dict[str, float], dict[str, tuple[str, ...]]]:
        if s not in self._sp:
            self._sp[s] = self._dijkstra(s, None)
        return self._sp[s]

    def _dist_array(self, s: str) -> np.ndarray:
        """Distances from ``s`` indexed like ``self._ca``/``self._cb`` (inf: unreachable)."""
        if s not in self._dist:
            arr = np.full(len(self._index), math.inf)
            for n, v in self.shortest_from(s)[0].items():
                arr[self._index[n]] = v
            self._dist[s] = arr
        return self._dist[s]

    def existing(self, s: str, d: str) -> list[CandidatePath]:
        """Yen's k shortest simple paths (by one-way latency), ties in the order they were found."""
        dist, path = self.shortest_from(s)
        if d not in dist:
            return []
        accepted = [(dist[d], path[d])]
        seen = {path[d]}
        cands: list[tuple[float, int, tuple[str, ...]]] = []
        tie = itertools.count()
        w = {h.id: max(h.latency, HOP_FLOOR_MS) for h in self.hop_by_id.values()}
        while len(accepted) < self.k:
            hops = accepted[-1][1]
            nodes = self._build(s, hops).switches
            root_cost = 0.0
            for i in range(len(hops)):
                banned = {p[i] for _c, p in accepted if len(p) > i and p[:i] == hops[:i]}
                sd, sp = self._dijkstra(nodes[i], d, set(nodes[:i]), banned)
                if d in sd:
                    total = hops[:i] + sp[d]
                    if total not in seen:
                        seen.add(total)
                        heapq.heappush(cands, (root_cost + sd[d], next(tie), total))
                root_cost += w[hops[i]]
            if not cands:
                break
            c, _, p = heapq.heappop(cands)
            accepted.append((c, p))
        return [self._build(s, p) for _c, p in accepted]

    def with_circuit(self, s: str, d: str) -> list[CandidatePath]:
        _dist_s, path_s = self.shortest_from(s)
        _dist_d, path_d = self.shortest_from(d)
        if not self.circuits:
            return []
        ds, dd = self._dist_array(s), self._dist_array(d)
        # both orientations of every circuit: cost = dist(s, near end) + circuit + dist(far end, d)
        near = np.stack([ds[self._ca], ds[self._cb]], axis=1)
        far = np.stack([dd[self._cb], dd[self._ca]], axis=1)
        cost = (near + self._circuit_ms[:, None] + far).ravel()
        pool = 4 * self.k  # the cheapest few, from which k port-disjoint-first are taken
        order = np.argsort(cost, kind="stable").tolist()
        cost_l = cost.tolist()
        # by cost (ties: circuit order); circuits sharing no optical port with an earlier pick come
        # first, so the k alternatives could all be lit together. Paths are built lazily: the scan
        # stops once k port-disjoint ones are found (the rest could no longer enter the k).
        ranked: list[CandidatePath] = []
        first: list[int] = []
        taken: set[str] = set()
        for flat in order:
            if not math.isfinite(cost_l[flat]) or len(ranked) == pool or len(first) == self.k:
                break
            c = self.circuits[flat // 2]
            a, b = (c.a, c.b) if flat % 2 == 0 else (c.b, c.a)
            head = self._build(s, path_s[a])
            tail = self._build(d, path_d[b]).reversed()
            switches = head.switches + tail.switches
            if len(set(switches)) != len(switches):
                continue  # not a simple path
            ports = set(c.circuit.oports) if c.circuit is not None else set()
            if not ports & taken:
                first.append(len(ranked))
                taken |= ports
            ranked.append(CandidatePath(switches, head.hops + (c,) + tail.hops))
        rest = [i for i in range(len(ranked)) if i not in set(first)]
        return [ranked[i] for i in sorted((first + rest)[: self.k])]

    def metrics(self, p: CandidatePath) -> tuple[float, float, float, float]:
        """``p.metrics()``, memoised (a path and its reverse have the same)."""
        key = frozenset((p.switches, p.switches[::-1])), p.key
        got = self._metrics.get(key)
        if got is None:
            got = self._metrics[key] = p.metrics()
        return got

    def paths(self, s: str, d: str) -> list[CandidatePath]:
        """Existing then one-circuit paths, memoised per pair (the reverse pair reuses them)."""
        got = self._paths.get((s, d))
        if got is None:
            back = self._paths.get((d, s))
            got = [p.reversed() for p in back] if back is not None else self.existing(s, d) + self.with_circuit(s, d)
            self._paths[s, d] = got
        return got


#: PathFinders of recent graphs: a PER re-solve on an unchanged graph reuses every candidate path.
_FINDERS: OrderedDict[tuple[Any, ...], PathFinder] = OrderedDict()
#: Candidate circuits of recent graphs (``pce.circuits.candidate_circuits`` is a Yen per switch pair).
_CIRCUITS: OrderedDict[tuple[Any, ...], list[Circuit]] = OrderedDict()
CACHE_SIZE = 4


def _remember(cache: OrderedDict, key: tuple[Any, ...], make: Any) -> Any:
    """LRU get-or-make (``make()`` only on a miss)."""
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    value = cache[key] = make()
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)
    return value


def path_finder(switches: Sequence[str], existing: Sequence[Hop], circuits: Sequence[Hop], k: int) -> PathFinder:
    """A :class:`PathFinder`, shared by placements on the same lit links, circuits and k."""
    key = (tuple(switches), tuple(existing), tuple(circuits), k)
    return _remember(_FINDERS, key, lambda: PathFinder(switches, existing, circuits, k))


def graph_key(graph: Any) -> tuple[Any, ...]:
    """Every node and edge with its attributes, as a hashable value (the caches' key)."""
    g = getattr(graph, "g", graph)
    nodes = tuple((n, tuple(sorted((a, repr(v)) for a, v in d.items()))) for n, d in g.nodes(data=True))
    edges = tuple((u, v, tuple(sorted((a, repr(x)) for a, x in d.items()))) for u, v, d in g.edges(data=True))
    return nodes, edges


def cached_candidate_circuits(graph: Any, per_pair: int, pairs: Iterable[tuple[str, str]]) -> list[Circuit]:
    """``candidate_circuits`` of the graph, reused while the graph and the pairs are unchanged."""
    pairs = frozenset(pairs)
    key = (graph_key(graph), per_pair, pairs)
    return list(_remember(_CIRCUITS, key, lambda: candidate_circuits(graph, per_pair=per_pair, pairs=pairs)))


def clear_caches() -> None:
    """Forget cached candidate paths and circuits (benchmarks measure cold placements with it)."""
    _FINDERS.clear()
    _CIRCUITS.clear()


@dataclass
class FlowPlacement:
    """Where one flow goes: ``path`` None = not placed (no room); ``moved``: off its current path."""

    flow: GraphFlow
    path: CandidatePath | None
    allocated: float
    satisfaction: float
    moved: bool
    pinned: bool = False
    gain: float | None = None

    def as_dict(self) -> dict[str, Any]:
        f = self.flow
        return {"id": f.id, "src": f.src, "dst": f.dst, "class": f.cls, "bw_mbps": f.bw,
                "allocated_mbps": self.allocated, "satisfaction": self.satisfaction, "moved": self.moved,
                "pinned": self.pinned, "gain": self.gain,
                "path": None if self.path is None else self.path.as_dict()}


@dataclass
class GraphPlacement:
    """The placement: per flow a path, the circuits to light, and what it took."""

    policy: str
    flows: list[FlowPlacement]
    circuits: list[Circuit]
    objective: float
    stats: dict[str, Any] = field(default_factory=dict)

    def by_id(self) -> dict[str, FlowPlacement]:
        return {p.flow.id: p for p in self.flows}

    def as_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "objective": self.objective,
                "allocated_mbps": sum(p.allocated for p in self.flows),
                "requested_mbps": sum(p.flow.bw for p in self.flows),
                "circuits": [{"id": c.id, "a": f"{c.a}:{c.a_port}", "b": f"{c.b}:{c.b_port}", "capacity_mbps": c.capacity,
                              "setup_s": c.setup_time, "latency_ms": c.latency, "xcons": [list(x) for x in c.xcons]}
                             for c in self.circuits],
                "flows": [p.as_dict() for p in self.flows], "stats": self.stats}


@dataclass
class GraphInstance:
    """The OTTER arrays of a graph and flows; slot j of flow i is ``paths[i][j]``."""

    network: Network
    flowset: FlowSet
    cand: Candidates
    flows: list[GraphFlow]  # the flows in the LP (not local ones)
    paths: list[list[CandidatePath]]
    circuit_slots: np.ndarray  # (N, K) bool: slot uses an unlit circuit
    deadline_ok: np.ndarray  # (N, K) bool: slot usable within the flow's deadline and avoiding its ``avoid`` hops
    slot_circuits: list[list[tuple[str, ...]]]  # circuit ids per slot
    hop_index: dict[str, int]
    #: the same incidence flat, in (flow, slot, circuit-on-path) order: entry e says slot
    #: ``uses_slot[e]`` of flow ``uses_flow[e]`` crosses circuit ``circuit_ids[uses_circuit[e]]``
    circuit_ids: list[str] = field(default_factory=list)
    uses_flow: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    uses_slot: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    uses_circuit: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: per flow its restriction group (pair, avoid, deadline): flows of different groups may have
    #: different usable slots, so they never share an aggregate
    group_key: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def _flowset(flows: Sequence[GraphFlow], rules: ClassRules, src_idx: np.ndarray) -> FlowSet:
    """The flows as an OTTER ``FlowSet``: tolerance shapes and breakpoints by class (one row per class)."""
    n = len(flows)
    names = sorted(rules.classes)
    shapes_c = np.full((len(names), 3), -1, np.int8)
    bps_c = np.ones((len(names), 3))
    for c, name in enumerate(names):
        for j, t in enumerate(rules.classes[name].tolerances()):
            if t is not None:
                shapes_c[c, j], bps_c[c, j] = SHAPES[t[0]], t[1]
    index = {name: c for c, name in enumerate(names)}
    cls = np.array([index[f.cls] for f in flows], np.int64)
    z = np.zeros(n)
    return FlowSet(src_idx, shapes_c[cls].reshape(n, 3), bps_c[cls].reshape(n, 3), np.array([f.bw for f in flows], float),
                   np.zeros((n, 3)), cls, z, z.copy()).validate()


def build_instance(graph: Any, flows: Sequence[GraphFlow], rules: ClassRules, circuits: Sequence[Circuit],
                   k: int = DEFAULT_K, background: Mapping[str, float] | None = None,
                   pair_paths: Mapping[tuple[str, str], Sequence[CandidatePath]] | None = None) -> GraphInstance:
    """Candidate paths and the OTTER arrays for ``flows`` (src ≠ dst) over lit links + ``circuits``.

    ``background``: hop id → Mbit/s already on that lit link from traffic that is not among
    ``flows`` (measured, not placed): the LP and the rounding get only the rest of its capacity.
    ``pair_paths``: the candidate paths per ordered pair (column generation) instead of the k
    shortest of each kind; the optical ports of the circuits then are capacity rows too."""
    g = getattr(graph, "g", graph)
    switches = sorted(n for n, d in g.nodes(data=True) if d.get("kind") == "packet")
    sw_index = {s: i for i, s in enumerate(switches)}
    for f in flows:
        for end in (f.src, f.dst):
            if end not in sw_index:
                raise InvalidInputError(f"flow {f.id}: {end!r} is not a packet switch of the graph")
        if f.cls not in rules.classes:
            raise InvalidInputError(f"flow {f.id}: unknown class {f.cls!r}")
    bg = background or {}
    existing = existing_hops(graph)
    chops = circuit_hops(circuits, (h.id for h in existing))
    hops = existing + chops
    hop_index = {h.id: i for i, h in enumerate(hops)}
    pair_list: dict[tuple[str, str], list[CandidatePath]] = {}
    if pair_paths is None:
        finder = path_finder(switches, existing, chops, k)
        metrics: Any = finder.metrics
        for f in flows:
            if (f.src, f.dst) not in pair_list:
                pair_list[f.src, f.dst] = finder.paths(f.src, f.dst)
        cap = np.array([max(h.capacity - bg.get(h.id, 0.0), 0.0) for h in hops], float)
        link_names = [h.id for h in hops]

        def rows(p: CandidatePath) -> list[int]:
            return [hop_index[h.id] for h in p.hops]
    else:
        metrics = CandidatePath.metrics
        for f in flows:
            pair_list.setdefault((f.src, f.dst), list(pair_paths.get((f.src, f.dst), ())))
        res = Resources(hops, {h.id: max(h.capacity - bg.get(h.id, 0.0), 0.0) for h in hops})
        cap, link_names, rows = res.cap, res.names, res.rows_of_path
    path_rows: list[CandidatePath] = []
    K = max((len(v) for v in pair_list.values()), default=1) or 1
    S = len(switches)
    slot_paths = -np.ones((S, S, K), np.int64)
    for (s, d), plist in pair_list.items():
        for j, p in enumerate(plist):
            slot_paths[sw_index[s], sw_index[d], j] = len(path_rows)
            path_rows.append(p)
    P = len(path_rows)
    row_lists = [rows(p) for p in path_rows]
    M = max((len(r) for r in row_lists), default=1) or 1
    path_links = -np.ones((max(P, 0), M), np.int64)
    for i, r in enumerate(row_lists):
        path_links[i, : len(r)] = r
    network = Network(
        n_sources=S, n_dests=S, dest_is_edge=np.zeros(S, bool), dest_cap=np.full((S, 3), np.inf),
        link_cap=cap,
        path_src=np.array([sw_index[p.switches[0]] for p in path_rows], np.int64),
        path_dst=np.array([sw_index[p.switches[-1]] for p in path_rows], np.int64),
        path_links=path_links, path_metrics=np.array([metrics(p) for p in path_rows], float).reshape(P, 4),
        pair_paths=slot_paths, link_names=link_names,
    ).validate()
    src_idx = np.array([sw_index[f.src] for f in flows], np.int64)
    dst_idx = np.array([sw_index[f.dst] for f in flows], np.int64)
    fs = _flowset(flows, rules, src_idx)
    cp = slot_paths[src_idx, dst_idx] if len(flows) else np.zeros((0, K), np.int64)
    valid = cp >= 0
    metrics = np.vstack([network.path_metrics, np.zeros((1, 4))])
    sc = score(fs.shapes[:, None, :], fs.breakpoints[:, None, :], fs.bw[:, None], metrics[cp])
    cand = Candidates(dst_idx[:, None], cp, np.where(valid, sc, 0.0).astype(np.float32))
    per_flow = [pair_list[(f.src, f.dst)] for f in flows]
    # per pair once (flows share their pair's rows): circuit ids per slot, whether a slot needs one
    pair_rows = {pair: [tuple(c.id for c in p.circuits) for p in plist] for pair, plist in pair_list.items()}
    pair_circ = {pair: np.array([bool(r) for r in rows] + [False] * (K - len(rows))) for pair, rows in pair_rows.items()}
    circ = np.array([pair_circ[f.src, f.dst] for f in flows], bool).reshape(cp.shape)
    ok = np.ones(cp.shape, bool)
    slot_circuits = [pair_rows[f.src, f.dst] for f in flows]
    circuit_ids = [h.circuit.id for h in chops if h.circuit is not None]
    uses = _circuit_uses(pair_rows, [(f.src, f.dst) for f in flows], circuit_ids)
    for i, (f, plist) in enumerate(zip(flows, per_flow, strict=True)):
        if f.deadline is None and not f.avoid:
            continue
        for j, p in enumerate(plist):
            cs = p.circuits
            if cs and f.deadline is not None:
                ok[i, j] = f.deadline >= max(c.setup_time for c in cs)
            if f.avoid and not _ends(f.avoid).isdisjoint(_ends(p.key)):
                ok[i, j] = False
    return GraphInstance(network, fs, cand, list(flows), per_flow, circ, ok, slot_circuits, hop_index,
                         circuit_ids, *uses, group_key=restriction_groups(flows)[1])


def restriction_groups(flows: Sequence[GraphFlow]) -> tuple[list[Group], np.ndarray]:
    """The flows' (source, destination, avoided hop ends, deadline) groups and each flow's group."""
    index: dict[Group, int] = {}
    of_flow = [index.setdefault(Group(f.src, f.dst, frozenset(_ends(f.avoid)), f.deadline), len(index))
               for f in flows]
    return list(index), np.array(of_flow, np.int64)


def path_from_ids(start: str, ids: Sequence[str], hops: Sequence[Hop]) -> CandidatePath | None:
    """The path from ``start`` along hop ids (a lit circuit's ``A:3-C:1`` or its candidate's full id),
    None if a hop is not among ``hops`` or does not continue the path."""
    by_id = {h.id: h for h in hops}
    by_ends: dict[str, Hop] = {}
    for h in hops:
        by_ends.setdefault(h.id.split("[", 1)[0], h)
    at, switches, out = start, [start], []
    for hid in ids:
        h = by_id.get(hid) or by_ends.get(hid.split("[", 1)[0])
        if h is None or at not in (h.a, h.b):
            return None
        at = h.other(at)
        switches.append(at)
        out.append(h)
    if len(set(switches)) != len(switches):
        return None
    return CandidatePath(tuple(switches), tuple(out))


def colgen_state(graph: Any, flows: Sequence[GraphFlow], rules: ClassRules, circuits: Sequence[Circuit],
                 price: float, background: Mapping[str, float] | None = None,
                 initial_k: int = INITIAL_K) -> ColumnGeneration:
    """Column generation of ``flows`` (src ≠ dst) over lit links + ``circuits``, not yet run
    (``pce.otter.colgen``). The initial set: ``initial_k`` lit and one-circuit paths per pair
    (circuits with disjoint optical ports first) and each flow's current path."""
    g = getattr(graph, "g", graph)
    switches = sorted(n for n, d in g.nodes(data=True) if d.get("kind") == "packet")
    existing = existing_hops(graph)
    hops = existing + circuit_hops(circuits, (h.id for h in existing))
    finder = path_finder(switches, existing, hops[len(existing):], initial_k)
    start: dict[tuple[str, str], list[CandidatePath]] = {}
    for f in flows:
        plist = start.setdefault((f.src, f.dst), [])
        if not plist:
            plist += finder.paths(f.src, f.dst)
        if f.path is not None:
            cur = path_from_ids(f.src, f.path, hops)
            if cur is not None and cur.switches[-1] == f.dst:
                plist.append(cur)
    for pair, plist in start.items():
        start[pair] = list({p.key: p for p in plist}.values())
    groups, of_flow = restriction_groups(flows)
    sw_index = {s: i for i, s in enumerate(switches)}
    fs = _flowset(flows, rules, np.array([sw_index[f.src] for f in flows], np.int64))
    dests = np.array([sw_index[f.dst] for f in flows], np.int64).reshape(len(flows), 1)
    agg, _n = aggregate_keys(fs, np.arange(len(flows)), Candidates(dests, dests, np.zeros(dests.shape)), of_flow)
    bg = background or {}

    def build(src: str, hop_idx: Sequence[int]) -> CandidatePath:
        at, on, out = src, [src], []
        for k in hop_idx:
            at = hops[k].other(at)
            on.append(at)
            out.append(hops[k])
        return CandidatePath(tuple(on), tuple(out))

    return ColumnGeneration(switches, hops, {h.id: max(h.capacity - bg.get(h.id, 0.0), 0.0) for h in hops}, fs,
                            agg, groups, of_flow, start, build, price)


def column_generation(graph: Any, flows: Sequence[GraphFlow], rules: ClassRules, circuits: Sequence[Circuit],
                      price: float, background: Mapping[str, float] | None = None,
                      initial_k: int = INITIAL_K) -> ColgenResult:
    """The priced LP over every simple path through lit links + ``circuits``, by column
    generation (:func:`colgen_state`, run to the end)."""
    state = colgen_state(graph, flows, rules, circuits, price, background, initial_k)
    state.run()
    return state.result()


def _circuit_uses(pair_rows: dict[tuple[str, str], list[tuple[str, ...]]], flow_pairs: Sequence[tuple[str, str]],
                  circuit_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flow, slot, circuit) entries of every slot through a circuit, in flow, slot, path order —
    per pair once, then repeated for the pair's flows with numpy."""
    cidx = {c: n for n, c in enumerate(circuit_ids)}
    pair_no = {pair: n for n, pair in enumerate(pair_rows)}
    p_slot: list[int] = []
    p_circ: list[int] = []
    count = np.zeros(len(pair_rows), np.int64)
    for n, rows in enumerate(pair_rows.values()):
        for j, cids in enumerate(rows):
            p_slot += [j] * len(cids)
            p_circ += [cidx[c] for c in cids]
            count[n] += len(cids)
    start = np.cumsum(count) - count
    fp = np.array([pair_no[p] for p in flow_pairs], np.int64)
    per_flow = count[fp]
    flow = np.repeat(np.arange(len(fp)), per_flow)
    at = np.repeat(start[fp] - (np.cumsum(per_flow) - per_flow), per_flow) + np.arange(len(flow))
    return flow, np.asarray(p_slot, np.int64)[at], np.asarray(p_circ, np.int64)[at]


# ---------------------------------------------------------------------- LP
def _solve(inst: GraphInstance, allowed: np.ndarray, pin_key: np.ndarray | None, price: float
           ) -> tuple[LpSolution, np.ndarray, float]:
    """The OTTER LP with a circuit price; returns (solution, per-flow share per slot, unpriced objective)."""
    K = inst.cand.paths.shape[1]
    key = inst.group_key * (K + 1) + (0 if pin_key is None else np.asarray(pin_key) + 1)
    prob = make_problem(inst.network, inst.flowset, cand=inst.cand, allowed=allowed, pin_key=key, use_c4=False)
    raw = prob.col_coef.copy()
    circuit_col = inst.circuit_slots[_rep(prob), prob.col_slot] if prob.n_cols else np.zeros(0, bool)
    prob.col_coef = np.where(circuit_col, raw * (1.0 - price), raw)
    sol = solve_problem(prob, "matrix", "highs", presolve=True)
    agg_share = np.zeros((prob.n_aggs, inst.cand.paths.shape[1]))
    for a, (_paths, frac, slots) in enumerate(sol.path_fractions()):
        agg_share[a, slots] = frac
    return sol, agg_share[prob.flow_agg], float(raw @ sol.x)


def _rep(prob: Any) -> np.ndarray:
    """A member flow of each column's aggregate (all members share the aggregate's candidate slots)."""
    rep = np.full(prob.n_aggs, -1, np.int64)
    rep[prob.flow_agg[::-1]] = np.arange(len(prob.flow_agg))[::-1]
    return rep[prob.col_agg]


def _satisfaction(inst: GraphInstance, share: np.ndarray) -> np.ndarray:
    """Per flow Σ_slot share · mean_m 𝒟 ∈ [0, 1] (unplaced share counts 0)."""
    return (share * inst.cand.score).sum(axis=1) / N_METRICS


def _current_slots(inst: GraphInstance) -> np.ndarray:
    """Slot of each flow's current path among its candidates, -1 when it has none there."""
    out = np.full(len(inst.flows), -1, np.int64)
    for i, f in enumerate(inst.flows):
        if f.path is None:
            continue
        for j, p in enumerate(inst.paths[i]):
            if same_hops(p.key, f.path):
                out[i] = j
                break
    return out


def _pinned_allowed(allowed: np.ndarray, slots: np.ndarray, pin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = allowed.copy()
    rows = np.flatnonzero(pin)
    a[rows] = False
    a[rows, slots[rows]] = True
    key = np.where(pin, slots, -1)
    return a, key


def _preferred(share: np.ndarray, prob_agg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each flow's slot by its aggregate's LP shares, and that share: an aggregate of n members
    deals floor(share·n) of them to each slot (the largest remainders get the rest), members in
    flow order, slots by decreasing share. All aggregates at once (one numpy pass, no loop)."""
    N, K = share.shape
    preferred = np.full(N, -1, np.int64)
    weight = np.zeros(N)
    if not N:
        return preferred, weight
    by_agg = np.argsort(prob_agg, kind="stable")
    new = np.r_[True, prob_agg[by_agg][1:] != prob_agg[by_agg][:-1]]
    first = by_agg[new]  # each aggregate's first member, whose share row is the aggregate's
    n = np.diff(np.r_[np.flatnonzero(new), N])  # members per aggregate
    frac = share[first]
    scaled = frac * n[:, None]
    counts = np.floor(scaled + 1e-9).astype(np.int64)
    rest = np.rint(frac.sum(axis=1) * n).astype(np.int64) - counts.sum(axis=1)
    by_rem = np.argsort(-(scaled - counts), axis=1, kind="stable")
    extra = np.zeros_like(counts)
    np.put_along_axis(extra, by_rem, np.arange(K)[None, :] < rest[:, None], axis=1)
    counts += extra
    by_share = np.argsort(-frac, axis=1, kind="stable")
    reps = np.take_along_axis(counts, by_share, axis=1).ravel()
    total = counts.sum(axis=1)
    deal_slot = np.repeat(by_share.ravel(), reps)  # per aggregate: its slots in dealing order
    deal_agg = np.repeat(np.arange(len(n)), total)
    deal_pos = np.arange(len(deal_agg)) - np.repeat(np.cumsum(total) - total, total)
    take = deal_pos < n[deal_agg]
    member = by_agg[(np.cumsum(n) - n)[deal_agg[take]] + deal_pos[take]]
    preferred[member] = deal_slot[take]
    weight[member] = frac[deal_agg[take], deal_slot[take]]
    return preferred, weight


def _round(inst: GraphInstance, share: np.ndarray, allowed: np.ndarray, prob_agg: np.ndarray,
           prefer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whole-flow placement from LP shares; returns (slot per flow or -1, allocated Mbit/s).

    The order of tries per flow is one numpy sort; the greedy itself is sequential (each flow's
    pick changes the room left for the next), so it runs on plain lists: a few lookups per flow
    cost less there than numpy's per-call overhead."""
    N, K = share.shape
    bw = inst.flowset.bw
    preferred, weight = _preferred(share, prob_agg)
    preferred = np.where(prefer >= 0, prefer, preferred)
    cand = inst.cand.paths
    ok = allowed & (cand >= 0)
    slots = np.broadcast_to(np.arange(K), (N, K))
    is_pref = (slots == preferred[:, None]) & ok
    # tries per flow: its preferred slot, then by LP share, tolerance, slot (np.lexsort: last key first)
    rank = np.lexsort((slots, -inst.cand.score.astype(float), -share, ~is_pref), axis=-1)
    tries_of = np.where(np.take_along_axis(ok, rank, axis=1), rank, -1).tolist()
    path_of = cand.tolist()
    hops = [[h for h in row if h >= 0] for row in inst.network.path_links.tolist()]
    residual = inst.network.link_cap.astype(float).tolist()
    bw_l = bw.tolist()
    slot = np.full(N, -1, np.int64)
    alloc = np.zeros(N)
    order = sorted(range(N), key=lambda i: (-weight[i], -bw[i], i))
    for i in order:
        need = bw_l[i]
        best_j, best_room, pick, room_pick = -1, -math.inf, -1, 0.0
        for j in tries_of[i]:
            if j < 0:
                continue
            room = min((residual[h] for h in hops[path_of[i][j]]), default=math.inf)
            if room >= need * (1 - 1e-9):
                pick, room_pick = j, room
                break
            if room > best_room:
                best_j, best_room = j, room
        if pick < 0:
            if best_j < 0 or best_room <= 1e-9:
                continue
            pick, room_pick = best_j, best_room
        amount = min(need, room_pick)
        for h in hops[path_of[i][pick]]:
            residual[h] -= amount
        slot[i], alloc[i] = pick, amount
    return slot, alloc


def _links(inst: GraphInstance, i: int, j: int) -> np.ndarray:
    pl = inst.network.path_links[inst.cand.paths[i, j]]
    return pl[pl >= 0]


def _carried(inst: GraphInstance, share: np.ndarray) -> dict[str, float]:
    """Mbit/s the LP puts on each candidate circuit (ids in order of first use by a flow's slot)."""
    f, c = inst.uses_flow, inst.uses_circuit
    total = np.bincount(c, share[f, inst.uses_slot] * inst.flowset.bw[f], len(inst.circuit_ids))
    first = np.unique(c, return_index=True)[1]
    return {inst.circuit_ids[n]: float(total[n]) for n in c[np.sort(first)] if total[n] > 1e-9}


def _usable(inst: GraphInstance, base: np.ndarray, keep: set[str]) -> np.ndarray:
    """``base`` without the slots through a circuit outside ``keep``."""
    usable = base.copy()
    out = np.array([c not in keep for c in inst.circuit_ids], bool)[inst.uses_circuit]
    usable[inst.uses_flow[out], inst.uses_slot[out]] = False
    return usable


#: Priced lighting: LP rounds at most (each removes at least one circuit in conflict).
MAX_DIVES = 8


def _priced_circuits(circuits: Sequence[Circuit], run: Any) -> tuple[list[str], Any]:
    """Circuits worth lighting: the LP over every candidate says which carry traffic; the most used
    win port conflicts (``round_circuits``); the circuits that lost are dropped and the LP re-run
    (traffic may move to a circuit that conflicts with none), until nothing used is dropped.

    ``run(allowed ids)`` solves the LP with only those circuits and returns (Mbit/s per circuit
    used, its result). Returns (chosen ids, the last LP result when it used only chosen circuits —
    then it is also optimal for the LP restricted to them, which need not be solved again — else None)."""
    by_id = {c.id: c for c in circuits}
    allowed = set(by_id)
    chosen: list[str] = []
    for _ in range(MAX_DIVES):
        carried, result = run(allowed)
        chosen = round_circuits([by_id[c] for c in carried],
                                {cid: v / max(by_id[cid].capacity, 1e-12) for cid, v in carried.items()})
        if set(carried) <= set(chosen):
            return chosen, result
        taken = {p for cid in chosen for p in by_id[cid].oports}
        allowed = {cid for cid in allowed if cid in chosen or not taken & set(by_id[cid].oports)}
    return chosen, None


def _keep_held(circuits: Sequence[Circuit], chosen: list[str], held: Sequence[str]) -> list[str]:
    """A held flow keeps its (not yet seen lit) circuit whatever the LP without it prefers: the
    held circuits first, then the chosen ones that share no optical port with them."""
    keep = [cid for cid in dict.fromkeys(held) if cid not in chosen]
    if not keep:
        return chosen
    by_id = {c.id: c for c in circuits}
    taken = {o for cid in keep for o in by_id[cid].oports}
    return keep + [c for c in chosen if taken.isdisjoint(by_id[c].oports)]


def background_residual(graph: Any, background: Mapping[str, float] | None) -> Any:
    """``graph`` with each lit packet link's capacity less its ``background`` (hop id → Mbit/s), as
    :func:`build_instance` gives the LP; a copy, so the live graph keeps its capacities. (The TE
    loop's ``app.te.decisions.residual_graph`` is keyed by edge and floors at 1e-3 for the CSPF;
    the joint MIP takes a link's 0 as 0.)"""
    if not background:
        return graph
    g = getattr(graph, "g", graph).copy()
    for a, pa, b, pb, d in list(lit_links(g)):
        used = background.get(hop_id(a, pa, b, pb), 0.0)
        if used:
            d["capacity"] = max(float(d["capacity"]) - used, 0.0)
    return g


def _joint_circuits(graph: Any, flows: Sequence[GraphFlow], circuits: Sequence[Circuit], solver: str,
                    time_limit: float | None, background: Mapping[str, float] | None = None) -> list[str]:
    """The joint MIP's lit set for per-pair totals of the flows that may wait for a circuit, on what
    the ``background`` leaves of the lit links (without it the MIP saw a loaded detour as free)."""
    totals: dict[tuple[str, str], float] = defaultdict(float)
    deadlines: dict[tuple[str, str], float] = {}
    for f in flows:
        a, b = sorted((f.src, f.dst))
        totals[a, b] += f.bw
        if f.deadline is not None:
            deadlines[a, b] = min(deadlines.get((a, b), math.inf), f.deadline)
    demands = [Demand(f"{a}~{b}", a, b, bw, deadlines.get((a, b))) for (a, b), bw in sorted(totals.items())]
    if not demands:
        return []
    plan = plan_circuits(background_residual(graph, background), demands, circuits=list(circuits), solver=solver,
                         time_limit=time_limit)
    return [c.id for c in plan.lit]


def place_lp(graph: Any, flows: Sequence[GraphFlow], rules: ClassRules | None = None, *, k: int = DEFAULT_K,
             lighting: str = "priced", circuit_price: float = CIRCUIT_PRICE, pin_gain: float = DEFAULT_PIN_GAIN,
             circuits: Sequence[Circuit] | None = None, per_pair: int = DEFAULT_PER_PAIR, solver: str = "highs",
             time_limit: float | None = 30.0, background: Mapping[str, float] | None = None,
             paths: str = DEFAULT_PATHS) -> GraphPlacement:
    """OTTER placement of ``flows`` on ``graph`` (see the module docstring for each step;
    ``background`` as in :func:`build_instance`). ``paths``: ``colgen`` (column generation, the LP
    over all paths) or ``k`` (the k shortest of each kind, as before issue 27)."""
    if paths not in PATH_MODES:
        raise InvalidInputError(f"unknown path mode {paths!r} (choose from {', '.join(PATH_MODES)})")
    if lighting not in LIGHTING:
        raise InvalidInputError(f"unknown lighting {lighting!r} (choose from {', '.join(LIGHTING)})")
    if not 0 <= circuit_price < 1:
        raise InvalidInputError("circuit price must be in [0, 1)")
    if pin_gain < 0:
        raise InvalidInputError("PATHPIN gain threshold must be ≥ 0")
    rules = rules or ClassRules()
    stats: dict[str, Any] = {"lps": 0}
    t0 = time.perf_counter()
    local = [f for f in flows if f.src == f.dst]
    remote = [f for f in flows if f.src != f.dst]
    pairs = {tuple(sorted((f.src, f.dst))) for f in remote}
    if circuits is None:
        circuits = cached_candidate_circuits(graph, per_pair, pairs) if pairs else []
    stats["candidate_circuits"] = len(circuits)
    stats["circuits_seconds"] = time.perf_counter() - t0
    if lighting == "joint" and circuits:
        t = time.perf_counter()
        lit = set(_joint_circuits(graph, remote, circuits, solver, time_limit, background))
        circuits = [c for c in circuits if c.id in lit]
        stats["joint_seconds"] = time.perf_counter() - t
    t1 = time.perf_counter()
    N = len(remote)
    state = colgen_state(graph, remote, rules, circuits, circuit_price, background) if paths == "colgen" and N else None
    lp_build = lp_solve = 0.0
    inst: GraphInstance | None = None

    def solve(allowed: np.ndarray, key: np.ndarray | None, price: float) -> tuple[np.ndarray, np.ndarray, float]:
        nonlocal lp_build, lp_solve
        assert inst is not None
        t = time.perf_counter()
        sol, share, obj = _solve(inst, allowed, key, price)
        lp_solve += sol.solve_seconds
        lp_build += time.perf_counter() - t - sol.solve_seconds
        stats["lps"] += 1
        stats["columns"], stats["aggregates"] = sol.problem.n_cols, sol.problem.n_aggs
        return sol.problem.flow_agg, share, obj

    chosen = [c.id for c in circuits]  # joint: the MIP's lit set
    free = None  # an LP result over exactly the usable slots, if one is at hand
    if state is not None:
        def run(allowed: set[str] | None) -> tuple[dict[str, float], None]:
            # the first LP over every candidate circuit is generated to the end; the dive's re-runs
            # only re-solve the master (the final lit set is generated to the end below)
            state.restrict(allowed)
            if state.rounds == 0 or allowed is None:
                state.run()
            else:
                state.resolve()
            return state.carried(), None

        if lighting == "priced" and circuits:
            chosen, last = _priced_circuits(circuits, run)
            held = [c.id for f in remote if f.hold and f.path is not None
                    for c in (path_from_ids(f.src, f.path, state.res.hops) or CandidatePath((f.src,), ())).circuits]
            chosen = _keep_held(circuits, chosen, held)
            if not state.certified or set(state.carried()) - set(chosen) or state.off & set(chosen):
                state.restrict(set(chosen))
                state.run()
        else:
            run(None)
        result = state.result()
        stats.update(result.stats())
        lit_ok = set(chosen)
        inst = build_instance(graph, remote, rules, [c for c in circuits if c.id in lit_ok], k, background,
                              {pair: [p for p in ps if all(c.id in lit_ok for c in p.circuits)]
                               for pair, ps in result.paths.items()})
        slot_of = [{p.key: j for j, p in enumerate(plist)} for plist in inst.paths]
        free = state.shares(lambda i, key: slot_of[i].get(key), N, inst.cand.paths.shape[1])
    else:
        inst = build_instance(graph, remote, rules, circuits, k, background)
    stats["paths"] = inst.network.n_paths
    stats["paths_seconds"] = time.perf_counter() - t1
    base = (inst.cand.paths >= 0) & inst.deadline_ok
    current = _current_slots(inst)
    if state is None and lighting == "priced" and N and inst.circuit_slots.any():
        def run_k(allowed: set[str]) -> tuple[dict[str, float], Any]:
            result = solve(_usable(inst, base, allowed), None, circuit_price)
            return _carried(inst, result[1]), result

        chosen, free = _priced_circuits(circuits, run_k)
        # a held flow keeps its (not yet seen lit) circuit whatever the LP without it prefers
        held = [cid for i, f in enumerate(remote) if f.hold and current[i] >= 0 for cid in inst.slot_circuits[i][current[i]]]
        if set(held) - set(chosen):
            chosen = _keep_held(circuits, chosen, held)
            free = None
    usable = _usable(inst, base, set(chosen))
    gain = np.full(N, np.nan)
    pinned = np.zeros(N, bool)
    if N:
        can_pin = (current >= 0) & usable[np.arange(N), np.maximum(current, 0)]
        sol, share, obj = free if free is not None else solve(usable, None, circuit_price)
        if can_pin.any():
            a_pin, k_pin = _pinned_allowed(usable, current, can_pin)
            sol_p, share_p, obj_p = solve(a_pin, k_pin, circuit_price)
            gain = np.where(can_pin, _satisfaction(inst, share) - _satisfaction(inst, share_p), np.nan)
            hold = np.array([f.hold for f in remote], bool)
            pinned = can_pin & ((gain < pin_gain) | hold)
            if pinned.sum() == can_pin.sum():
                sol, share, obj = sol_p, share_p, obj_p
            elif pinned.any():
                a_fin, k_fin = _pinned_allowed(usable, current, pinned)
                sol, share, obj = solve(a_fin, k_fin, circuit_price)
        slot, alloc = _round(inst, share, usable, sol, np.where(pinned, current, -1))
    else:
        obj, slot, alloc = 0.0, np.zeros(0, np.int64), np.zeros(0)
    stats["build_seconds"], stats["solve_seconds"] = lp_build, lp_solve
    out = _placements(inst, slot, alloc, pinned, gain)
    out += [FlowPlacement(f, CandidatePath((f.src,), ()), f.bw, 1.0, False) for f in local]
    lit = sorted({c.id: c for p in out if p.path is not None and p.allocated > 0 for c in p.path.circuits}.values(),
                 key=lambda c: c.id)
    stats["total_seconds"] = time.perf_counter() - t0
    return GraphPlacement("otter" if lighting == "priced" else "joint", out, lit, obj, stats)


def _placements(inst: GraphInstance, slot: np.ndarray, alloc: np.ndarray, pinned: np.ndarray,
                gain: np.ndarray) -> list[FlowPlacement]:
    out = []
    for i, f in enumerate(inst.flows):
        j = int(slot[i])
        path = inst.paths[i][j] if j >= 0 else None
        sat = float(inst.cand.score[i, j]) / N_METRICS * alloc[i] / f.bw if j >= 0 else 0.0
        moved = path is not None and f.path is not None and not same_hops(path.key, f.path)
        out.append(FlowPlacement(f, path, float(alloc[i]), sat, moved, bool(pinned[i]),
                                 None if np.isnan(gain[i]) else float(gain[i])))
    return out


def place_cspf(graph: Any, flows: Sequence[GraphFlow], rules: ClassRules | None = None, *, k: int = DEFAULT_K,
               circuits: Sequence[Circuit] | None = None, per_pair: int = DEFAULT_PER_PAIR,
               background: Mapping[str, float] | None = None) -> GraphPlacement:
    """Baseline without tolerances: largest flows first, each on its lowest-latency path with room —
    lit links before new circuits, a circuit only if its ports are still free — else partially on
    the path with most room. Held flows (``hold``, on a candidate path) go first, onto their path."""
    rules = rules or ClassRules()
    t0 = time.perf_counter()
    remote = [f for f in flows if f.src != f.dst]
    pairs = {tuple(sorted((f.src, f.dst))) for f in remote}
    if circuits is None:
        circuits = cached_candidate_circuits(graph, per_pair, pairs) if pairs else []
    inst = build_instance(graph, remote, rules, circuits, k, background)
    residual = inst.network.link_cap.astype(float).copy()
    used_ports: set[str] = set()
    lit: set[str] = set()
    N = len(remote)
    slot, alloc = np.full(N, -1, np.int64), np.zeros(N)
    current = _current_slots(inst)
    held = np.array([f.hold for f in remote], bool) & (current >= 0)
    for i in sorted(range(N), key=lambda i: (not held[i], -remote[i].bw, i)):
        cands = [j for j in range(len(inst.paths[i])) if inst.deadline_ok[i, j]]
        if held[i]:
            cands = [int(current[i])]
        cands = [j for j in cands if all(c.id in lit or not used_ports & set(c.oports) for c in inst.paths[i][j].circuits)]
        cands.sort(key=lambda j: (bool(inst.paths[i][j].circuits), inst.paths[i][j].one_way_ms, j))
        room = [float(residual[_links(inst, i, j)].min(initial=math.inf)) for j in cands]
        pick = next((j for j, r in zip(cands, room, strict=True) if r >= remote[i].bw * (1 - 1e-9)), None)
        if pick is None and cands and max(room) > 1e-9:
            pick = cands[int(np.argmax(room))]
        if pick is None:
            continue
        links = _links(inst, i, pick)
        amount = min(remote[i].bw, float(residual[links].min(initial=math.inf)))
        residual[links] -= amount
        slot[i], alloc[i] = pick, amount
        for c in inst.paths[i][pick].circuits:
            lit.add(c.id)
            used_ports.update(c.oports)
    out = _placements(inst, slot, alloc, held, np.full(N, np.nan))
    out += [FlowPlacement(f, CandidatePath((f.src,), ()), f.bw, 1.0, False) for f in flows if f.src == f.dst]
    chosen = sorted({c.id: c for p in out if p.path is not None and p.allocated > 0 for c in p.path.circuits}.values(),
                    key=lambda c: c.id)
    sat = sum(p.satisfaction * N_METRICS * p.allocated / p.flow.bw if p.allocated else 0.0 for p in out)
    return GraphPlacement("cspf", out, chosen, sat, {"total_seconds": time.perf_counter() - t0,
                                                     "candidate_circuits": len(circuits), "paths": inst.network.n_paths})


def place(graph: Any, flows: Sequence[GraphFlow], rules: ClassRules | None = None, policy: str = "otter",
          **opts: Any) -> GraphPlacement:
    """Dispatch by policy: ``otter`` (priced lighting), ``joint`` (joint MIP lighting), ``cspf``."""
    if policy == "otter":
        return place_lp(graph, flows, rules, lighting="priced", **opts)
    if policy == "joint":
        return place_lp(graph, flows, rules, lighting="joint", **opts)
    if policy == "cspf":
        keep = {k: v for k, v in opts.items() if k in ("k", "circuits", "per_pair", "background")}
        return place_cspf(graph, flows, rules, **keep)
    raise InvalidInputError(f"unknown placement policy {policy!r} (choose from {', '.join(POLICIES)})")
