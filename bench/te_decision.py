"""TE decision time on WAN-sized networks (issue 25 target: ≤ 100 ms on germany50 with 1,000 active flows).

What is timed is what the TE app (``app/controller/te_app.py``) computes when the monitor raises an
*unconstrained imbalance*: ``decider.on_event(event, graph, now, flow_bytes=..., loads_mbps=...)`` —
pure logic, no switch — for each ``[te] placement``: ``joint`` (the default: the named elephants onto a
circuit chosen by the joint circuit-lighting model), ``otter`` (every monitored flow placed by the OTTER
LP over the multi-layer graph) and ``cspf`` (the same with the baseline placement).

Instance (:func:`build_instance`): each PoP of a topohub topology is a packet switch + OTS with one host
(``topology.spec.from_topohub``, as the WAN lab); the fibres of the topology's minimum spanning tree
(by latency) carry a lit backbone — one circuit per tree fibre, a packet link seen by LLDP — and the
other fibres are dark, so new circuits can be lit over them (every switch keeps two free uplinks).
Fig. 2 uses its ``initial`` circuit. ``flows`` active 5-tuples between the hosts: pairs drawn with the
gravity model (mass: the PoP's fibre degree), each pair's demand shared by its flows (log-normal
jitter), scaled so the busiest backbone link runs at 60 %; 10 % are interactive (ports 22, 53, 5060).
A few elephants (``elephants``, over two host pairs) cross the busiest backbone link: the monitor's
event names them on it. Default forwarding (switch → host MAC → port) follows the backbone tree, the
monitor's link loads are what the flows put on each link, and every flow has a byte count (fine data).

Per size and policy: ``--repeat`` decisions, each with a fresh decider; *cold* = the PCE's candidate
path/circuit caches cleared first (the first decision after the graph changed), *warm* = kept (the
same graph again), *new-pairs* (``otter``/``cspf``) = the caches as an untimed decision left them
one monitor period earlier, when the flows of every tenth host pair had not started (:func:`earlier`):
the graph unchanged, the flows' switch pairs partly new. The split (seconds, summed within a decision): ``graph`` = the decision's working
graph and candidates (hosts, residual copy and candidate circuits for ``joint``; flows, current paths,
background and candidate circuits for ``otter``/``cspf``), ``lp`` = the placement LP (the joint
circuit-lighting model; OTTER's LP build + solve; ``cspf`` has none), ``paths`` = the rest of the
``otter``/``cspf`` placement (candidate paths or column generation, rounding, the greedy of ``cspf``),
``plan`` = building the update plans and rules, ``other`` = the rest. ``cpu_seconds``: the process's
CPU time over the decision (the wall time moves with the load of a shared machine, the CPU time less). Median and p95 of each; the same run's Fig. 2 row is the
baseline. ``view_graph_s``: building the multi-layer graph itself (the network view caches it between
changes, so a decision does not pay it).

``--wavelengths N``: N ODU2 wavelengths per fibre instead of the WAN lab's one (the backbone on the
first, the others free: candidate circuits between most PoP pairs).

``--scope named|congested|all``: the ``otter``/``cspf`` decider's ``[te] placement_scope`` (default
``congested``: the flows crossing the event's link are re-placed, the rest held as background).

Usage: bench/te_decision.py --json PATH [--quick] [--repeat N] [--policies joint otter cspf] [--wavelengths N]
       [--scope named|congested|all]
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.events import UNCONSTRAINED_IMBALANCE, Event  # noqa: E402
from monitor.flowstats import FlowCount  # noqa: E402
from topology.flow import FiveTuple  # noqa: E402
from topology.graph import MultiLayerGraph, oport_id  # noqa: E402
from topology.spec import LabSpec, fig2_testbed, from_topohub, spec_to_graph  # noqa: E402

#: (topology, active flows): Fig. 2 (the baseline), abilene, germany50, germany50 at the issue's 1,000 flows.
SIZES = (("fig2", 20), ("sndlib/abilene", 250), ("sndlib/germany50", 250), ("sndlib/germany50", 1000))
QUICK_SIZES = (("fig2", 20), ("sndlib/germany50", 1000))
POLICIES = ("joint", "otter", "cspf")
TARGET_S = 0.1
#: ``new-pairs`` state: the flows of every this-many-th host pair are new since the last decision.
NEW_PAIR_EVERY = 10
INTERACTIVE_PORTS = (22, 53, 5060)
BULK_PORTS = (80, 443, 5201, 8080)
BUSIEST_UTIL = 0.3  # the busiest backbone link's utilisation before the elephants
ELEPHANT_SHARE = 0.08  # each elephant's rate, of the congested link's capacity
FREE_UPLINKS = 2  # uplinks per switch left free for new circuits
#: app.te.placement's steps before the placement itself, timed as the decision's graph phase
GRAPH_STEPS = ("flows_from_monitor", "packet_ports", "forwarding_path", "unmonitored_load", "edge_hop",
               "flows_from_reservations")


@dataclass
class TeInstance:
    """What the TE app hands its decider: the view's graph and fine data, default forwarding, link loads,
    and the monitor's event."""

    name: str
    graph: MultiLayerGraph
    flows: dict[FiveTuple, FlowCount]
    forwarding: dict[str, dict[str, int]]  # switch -> host MAC -> out port
    link_loads: dict[str, float]  # packet edge key -> Mbit/s
    event: Event
    backbone: list[str] = field(default_factory=list)  # edge keys of the lit circuits
    paths: dict[FiveTuple, list[str]] = field(default_factory=dict)  # flow -> switches on its path
    view_graph_s: float = 0.0

    @property
    def pops(self) -> int:
        return len(self.graph.nodes_of_kind("packet"))


def _tree_fibres(spec: LabSpec) -> list[Any]:
    """The fibres of the minimum spanning tree of the OTS graph (by latency, then name)."""
    import networkx as nx

    g = nx.Graph()
    for link in spec.links_of_kind("optical"):
        g.add_edge(link.a, link.b, w=link.latency_ms, link=link)
    tree = nx.minimum_spanning_tree(g, weight="w")
    return sorted((d["link"] for _a, _b, d in tree.edges(data=True)), key=lambda k: (k.a, k.a_port))


def _uplinks_of(spec: LabSpec) -> dict[str, list[tuple[int, str, int]]]:
    """Switch -> [(its port, OTS, OTS port)] of its adaptation links, in port order."""
    out: dict[str, list[tuple[int, str, int]]] = {}
    for link in spec.links_of_kind("adaptation"):
        out.setdefault(link.a, []).append((link.a_port, link.b, link.b_port))
    return {sw: sorted(ups) for sw, ups in out.items()}


def light_backbone(spec: LabSpec, g: MultiLayerGraph) -> list[str]:
    """Light one circuit per fibre of the spanning tree (switch uplink → XCON → fibre → XCON → uplink);
    returns the packet edge keys. Each PoP's switch hangs off its own OTS (``from_topohub``)."""
    ups = _uplinks_of(spec)
    at_ots = {ots: sw for sw, lst in ups.items() for _p, ots, _op in lst}
    used: dict[str, int] = {}
    keys = []
    for fib in _tree_fibres(spec):
        ends = []
        for ots, oport in ((fib.a, fib.a_port), (fib.b, fib.b_port)):
            sw = at_ots[ots]
            port, _ots, up_oport = ups[sw][used.get(sw, 0)]
            used[sw] = used.get(sw, 0) + 1
            g.set_xcon_active(oport_id(ots, up_oport), oport_id(ots, oport), True)
            ends.append((sw, port))
        (a, ap), (b, bp) = ends
        keys.append(g.add_packet_link(a, ap, b, bp, fib.mbps, fib.latency_ms, source="lldp"))
    return keys


def _fig2() -> tuple[LabSpec, MultiLayerGraph, list[str]]:
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS

    spec = fig2_testbed()
    g = spec_to_graph(spec)
    for ots, a, b in FIG2_CIRCUITS["initial"]:
        g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    keys = [g.add_packet_link(a, ap, b, bp, 10.0, source="lldp") for a, ap, b, bp in FIG2_CIRCUIT_LINKS["initial"]]
    return spec, g, keys


def with_wavelengths(spec: LabSpec, n: int) -> LabSpec:
    """``spec`` with ``n`` wavelengths per fibre: ``n - 1`` more ODU2 port pairs along each fibre
    (numbered after the OTS's last port), as parallel optical links."""
    if n <= 1:
        return spec
    from dataclasses import replace

    from topology.spec import LinkSpec, OtsSpec

    ports = {o.name: dict(o.ports) for o in spec.ots}
    extra = []
    for link in spec.links_of_kind("optical"):
        for _ in range(n - 1):
            pa, pb = max(ports[link.a]) + 1, max(ports[link.b]) + 1
            ports[link.a][pa], ports[link.b][pb] = ports[link.a][link.a_port], ports[link.b][link.b_port]
            extra.append(LinkSpec(link.a, pa, link.b, pb, "optical", link.mbps, link.latency_ms))
    return replace(spec, ots=tuple(OtsSpec(o.name, o.dpid, ports[o.name]) for o in spec.ots),
                   links=spec.links + tuple(extra))


def _network(topology: str, wavelengths: int = 1) -> tuple[LabSpec, MultiLayerGraph, list[str]]:
    if topology == "fig2":
        return _fig2()
    import networkx as nx

    base = from_topohub(topology)
    tree = nx.Graph([(f.a, f.b) for f in _tree_fibres(base)])
    spec = from_topohub(topology, uplinks=max(d for _n, d in tree.degree()) + FREE_UPLINKS)
    g = spec_to_graph(spec)
    keys = light_backbone(spec, g)  # on the first wavelength of the tree's fibres
    if wavelengths > 1:
        spec = with_wavelengths(spec, wavelengths)
        lit = g
        g = spec_to_graph(spec)
        for x in lit.active_xcons():
            u, v = lit.edge_ends(x)
            g.set_xcon_active(u, v, True)
        keys = [g.add_packet_link(*_ends(lit, k), lit.edge(k)["capacity"], lit.edge(k)["latency"], source="lldp")
                for k in keys]
    return spec, g, keys


def _ends(g: MultiLayerGraph, key: str) -> tuple[str, int, str, int]:
    (a, pa), (b, pb) = sorted(g.edge(key)["ports"].items())
    return a, int(pa), b, int(pb)


def _tree_routes(g: MultiLayerGraph, keys: list[str]) -> tuple[dict[str, dict[str, tuple[int, str]]], Any]:
    """Per switch, per destination switch: (out port, edge key) along the backbone (a tree, or Fig. 2's line)."""
    import networkx as nx

    t = nx.Graph()
    for k in keys:
        e = g.edge(k)
        (a, pa), (b, pb) = sorted(e["ports"].items())
        t.add_edge(a, b, key=k, ports={a: pa, b: pb})
    paths = dict(nx.all_pairs_shortest_path(t))
    nxt: dict[str, dict[str, tuple[int, str]]] = {}
    for s, by_dst in paths.items():
        for d, p in by_dst.items():
            if len(p) > 1:
                e = t.edges[p[0], p[1]]
                nxt.setdefault(s, {})[d] = (int(e["ports"][s]), e["key"])
    return nxt, paths


def _hosts(g: MultiLayerGraph) -> list[tuple[str, str, str, str, int]]:
    """(host, ip, mac, switch, port) of every host, by name."""
    out = []
    for h in sorted(g.nodes_of_kind("host")):
        d = g.g.nodes[h]
        for _u, _v, e in g.g.edges(h, data=True):
            if e.get("kind") == "access":
                (sw, port), = ((n, p) for n, p in e["ports"].items() if n != h)
                out.append((h, d["ip"], d["mac"], sw, int(port)))
    return out


def build_instance(topology: str, flows: int, *, elephants: int = 4, seed: int = 1, wavelengths: int = 1
                   ) -> TeInstance:
    """The network view, fine data and event of one size (see the module docstring); ``wavelengths``
    per fibre (the WAN lab's spec has one: the backbone then leaves only the other fibres dark)."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    spec, g, keys = _network(topology, wavelengths)
    view_graph_s = time.perf_counter() - t0
    nxt, sw_paths = _tree_routes(g, keys)
    hosts = _hosts(g)
    degree: dict[str, int] = {}
    for link in spec.links_of_kind("optical"):
        for ots in (link.a, link.b):
            degree[ots] = degree.get(ots, 0) + 1
    ots_of = {link.a: link.b for link in spec.links_of_kind("adaptation")}
    mass = {h[0]: max(degree.get(ots_of.get(h[3], ""), 1), 1) for h in hosts}
    pairs = [(a, b) for a in hosts for b in hosts if a[3] != b[3]]
    if not pairs:
        raise ValueError(f"{topology}: no two hosts on different switches")
    weights = [mass[a[0]] * mass[b[0]] for a, b in pairs]
    total_w = sum(weights)
    drawn = rng.choices(range(len(pairs)), weights, k=flows)
    per_pair: dict[int, int] = {}
    for i in drawn:
        per_pair[i] = per_pair.get(i, 0) + 1
    raw: list[tuple[int, float]] = []
    for i in drawn:
        share = weights[i] / total_w / per_pair[i]
        raw.append((i, share * math.exp(rng.gauss(0.0, 0.5))))

    def route(a: tuple, b: tuple) -> list[str]:
        return sw_paths[a[3]][b[3]]

    def edges_of(path: list[str]) -> list[str]:
        return [nxt[u][v][1] for u, v in zip(path, path[1:], strict=False)]

    load = dict.fromkeys(keys, 0.0)
    for i, r in raw:
        for k in edges_of(route(*pairs[i])):
            load[k] += r
    busiest = max(keys, key=lambda k: (load[k], k))
    cap = float(g.edge(busiest)["capacity"])
    scale = BUSIEST_UTIL * cap / load[busiest] if load[busiest] > 0 else 1.0
    now = 1000.0
    used_ports: set[tuple[str, str, int]] = set()

    def five(a: tuple, b: tuple, proto: int, dport: int) -> FiveTuple:
        while True:
            sport = rng.randrange(10000, 60000)
            if (a[1], b[1], sport) not in used_ports:
                used_ports.add((a[1], b[1], sport))
                return FiveTuple(a[1], b[1], proto, sport, dport)

    out: dict[FiveTuple, FlowCount] = {}
    paths: dict[FiveTuple, list[str]] = {}
    for n, (i, r) in enumerate(raw):
        a, b = pairs[i]
        interactive = n % 10 == 0
        proto = 17 if interactive or n % 5 == 1 else 6
        f = five(a, b, proto, rng.choice(INTERACTIVE_PORTS if interactive else BULK_PORTS))
        mbps = r * scale
        age = rng.uniform(5.0, 60.0)
        out[f] = FlowCount(int(mbps * 1e6 / 8 * age), mbps, now, age)
        paths[f] = route(a, b)
    # the elephants: on the busiest link, between the heaviest two host pairs that cross it
    crossing = sorted({i for i in range(len(pairs)) if busiest in edges_of(route(*pairs[i]))},
                      key=lambda i: (-weights[i], i))[:2]
    named: list[FiveTuple] = []
    rates: list[float] = []
    for n in range(elephants):
        a, b = pairs[crossing[n % len(crossing)]]
        f = five(a, b, 6, 5201)
        mbps = ELEPHANT_SHARE * cap
        out[f] = FlowCount(int(mbps * 1e6 / 8 * 30.0), mbps, now, 30.0)
        paths[f] = route(a, b)
        named.append(f)
        rates.append(round(mbps, 3))
    link_loads = {k: 0.0 for k in keys}
    for f, c in out.items():
        for k in edges_of(paths[f]):
            link_loads[k] += c.mbps
    forwarding: dict[str, dict[str, int]] = {}
    for sw in g.nodes_of_kind("packet"):
        table = forwarding.setdefault(sw, {})
        for _h, _ip, mac, hsw, port in hosts:
            if hsw == sw:
                table[mac] = port
            elif hsw in nxt.get(sw, {}):
                table[mac] = nxt[sw][hsw][0]
    util = link_loads[busiest] / cap
    event = Event(now, busiest, UNCONSTRAINED_IMBALANCE, tuple(named),
                  {"elephant_mbps": rates, "util": round(util, 3), "drops": 50,
                   "threshold_mbps": round(0.5 * min(rates), 3) if rates else 1.0})
    name = topology if topology == "fig2" else topology.split("/")[-1]
    if wavelengths > 1 and topology != "fig2":
        name += f"-{wavelengths}wl"
    return TeInstance(f"{name}-{flows}", g, out, forwarding, link_loads, event, keys, paths, view_graph_s)


# ---------------------------------------------------------------------------------------------- timing
class Split:
    """Seconds per phase within one decision: wrapped functions add their time to their phase, less the
    time of phases nested inside them (each second is counted once, in the innermost phase)."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}
        self._inner: list[float] = []  # per open phase: seconds spent in phases nested in it

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._inner.append(0.0)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - t0
            own = spent - self._inner.pop()
            self.t[name] = self.t.get(name, 0.0) + own
            if self._inner:
                self._inner[-1] += spent

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            with self.phase(name):
                return fn(*a, **kw)
        return timed


#: (module, function, phase) the decision's phases are timed by (a name the code does not have is skipped,
#: so the bench also times older revisions of the code)
TIMED = (("app.te.decisions", "residual_graph", "graph"), ("app.te.decisions", "host_ports", "graph"),
         ("pce.circuits", "candidate_circuits", "graph"), ("pce.circuits", "candidate_circuits_by_pair", "graph"),
         ("pce.otter.graph", "cached_candidate_circuits", "graph"), ("pce.circuits", "plan_circuits", "lp"),
         ("app.update.planner", "provision", "plan"),
         *(("app.te.placement", name, "graph") for name in GRAPH_STEPS))


@contextmanager
def instrumented(split: Split) -> Iterator[None]:
    """Time the decision's phases by wrapping the functions it calls (restored afterwards)."""
    import importlib

    saved = []
    for mod_name, name, phase in TIMED:
        mod = importlib.import_module(mod_name)
        fn = getattr(mod, name, None)
        if fn is not None:
            saved.append((mod, name, fn))
            setattr(mod, name, split.wrap(phase, fn))
    try:
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)


def make_decider(policy: str, inst: TeInstance, scope: str = "congested") -> Any:
    """The decider the TE app builds for ``[te] placement = policy`` (its defaults; ``scope``: its
    ``placement_scope``), fed from ``inst``."""
    from app.te.decisions import OffloadDecider
    from app.te.placement import PlacementDecider, PlacementPolicy

    if policy == "joint":
        return OffloadDecider()
    return PlacementDecider(PlacementPolicy(policy), monitored=lambda: inst.flows,
                            forwarding=lambda: inst.forwarding, link_loads=lambda: inst.link_loads,
                            event_scope=scope)


def earlier(inst: TeInstance, every: int = NEW_PAIR_EVERY) -> TeInstance:
    """The instance a monitor period earlier: the flows of every ``every``-th host pair (sorted; never
    an elephant's) had not started yet. The graph is the same object, so only the pairs differ."""
    hot = {(f.src, f.dst) for f in inst.event.flows}
    pairs = sorted({(f.src, f.dst) for f in inst.flows} - hot)
    late = set(pairs[::every])
    return replace(inst, flows={f: c for f, c in inst.flows.items() if (f.src, f.dst) not in late})


def decide(policy: str, inst: TeInstance, *, cold: bool, before: TeInstance | None = None,
           scope: str = "congested") -> dict[str, Any]:
    """One decision as ``TeApp._monitor`` makes it; its wall time, split and outcome. ``before``
    (with ``cold``): the caches are cleared, then filled by an untimed decision on that instance."""
    from app.te.decisions import link_capacity
    from pce.otter import graph as otter_graph

    if cold:
        otter_graph.clear_caches()
        if before is not None:
            decide(policy, before, cold=False, scope=scope)
    decider = make_decider(policy, inst, scope)
    split = Split()
    e = inst.event
    if policy != "joint":  # the placement's own phases: its stats say which part was the LP
        place = decider.policy.place

        def timed_place(*a: Any, **kw: Any) -> Any:
            with split.phase("paths"):  # its candidate circuits are timed inside it, as the graph phase
                out = place(*a, **kw)
            lp = float(out.stats.get("build_seconds", 0.0)) + float(out.stats.get("solve_seconds", 0.0))
            split.t["lp"] = split.t.get("lp", 0.0) + lp
            split.t["paths"] -= lp
            return out
        decider.policy.place = timed_place

    def flow_bytes(f: FiveTuple) -> float | None:
        c = inst.flows.get(f)
        return float(c.bytes) if c is not None else None

    graph = inst.graph
    with instrumented(split):
        t0, c0 = time.perf_counter(), time.process_time()
        cap = link_capacity(graph, e.circuit)  # TeApp._loads
        loads = {e.circuit: float(e.detail.get("util", 0.0)) * cap} if cap else {}
        out = decider.on_event(e, graph, e.t, flow_bytes=flow_bytes, loads_mbps=loads)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    parts = {k: v for k, v in split.t.items()}
    parts["other"] = max(wall - sum(parts.values()), 0.0)
    kinds: dict[str, int] = {}
    for d in out:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    moved = [d for d in out if d.kind == "offload"]
    return {"seconds": wall, "cpu_seconds": cpu, "split": parts, "decisions": kinds,
            "moved_flows": sum(len(d.flows) for d in moved),
            "circuits": sorted({d.offload.circuit_id for d in moved if d.offload and d.offload.circuit_id}),
            "rules": sum(len(d.offload.ingress) + len(d.offload.egress) for d in moved if d.offload),
            "reasons": [d.reason for d in out][:4]}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def stats(xs: list[float]) -> dict[str, float]:
        xs = sorted(xs)
        p95 = xs[min(len(xs) - 1, math.ceil(0.95 * len(xs)) - 1)]
        return {"median": round(statistics.median(xs), 5), "p95": round(p95, 5), "min": round(xs[0], 5)}

    phases = sorted({k for r in runs for k in r["split"]})
    last = runs[-1]
    return {"seconds": stats([r["seconds"] for r in runs]), "cpu_seconds": stats([r["cpu_seconds"] for r in runs]),
            "split_median": {k: round(statistics.median([r["split"].get(k, 0.0) for r in runs]), 5) for k in phases},
            "runs": len(runs), "decisions": last["decisions"], "moved_flows": last["moved_flows"],
            "circuits": last["circuits"], "rules": last["rules"], "reasons": last["reasons"],
            "same_every_run": all((r["decisions"], r["circuits"], r["moved_flows"]) ==
                                  (last["decisions"], last["circuits"], last["moved_flows"]) for r in runs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true", help="Fig. 2 and germany50 at 1,000 flows, 3 repetitions")
    ap.add_argument("--repeat", type=int, help="decisions per size, policy and cache state (default 7; quick 3)")
    ap.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES))
    ap.add_argument("--sizes", nargs="+", help="TOPOLOGY:FLOWS, e.g. sndlib/germany50:1000 (default: the four sizes)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scope", choices=("named", "congested", "all"), default="congested",
                    help="otter/cspf: [te] placement_scope, the flows the event re-places (default congested)")
    ap.add_argument("--wavelengths", type=int, default=1,
                    help="ODU2 wavelengths per fibre of the topohub sizes (default 1, as the WAN lab)")
    a = ap.parse_args()
    from pce.highs import quiet_banner

    quiet_banner()
    repeat = a.repeat or (3 if a.quick else 7)
    if a.sizes:
        try:
            sizes = [(s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])) for s in a.sizes]
        except (ValueError, IndexError):
            print("--sizes takes TOPOLOGY:FLOWS, e.g. sndlib/germany50:1000", file=sys.stderr)
            return 2
    else:
        sizes = list(QUICK_SIZES if a.quick else SIZES)
    import pce.circuits  # noqa: F401  (the solver stack's import, paid at the TE app's start)

    rows = []
    for topology, n in sizes:
        inst = build_instance(topology, n, seed=a.seed, wavelengths=a.wavelengths)
        row: dict[str, Any] = {"instance": inst.name, "topology": topology, "pops": inst.pops,
                               "flows": len(inst.flows), "elephants": len(inst.event.flows),
                               "backbone_circuits": len(inst.backbone), "congested": inst.event.circuit,
                               "congested_util": inst.event.detail["util"],
                               "view_graph_s": round(inst.view_graph_s, 4), "policies": {}}
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        prev = earlier(inst)
        row["new_pairs_flows"] = len(inst.flows) - len(prev.flows)
        for _ in range(repeat):  # interleaved, so the policies share the machine's load
            for policy in a.policies:
                for state in ("cold", "warm", "new-pairs"):
                    if state == "new-pairs" and policy == "joint":
                        continue  # it reads no cache
                    runs.setdefault((policy, state), []).append(
                        decide(policy, inst, cold=state != "warm", before=prev if state == "new-pairs" else None,
                               scope=a.scope))
        for (policy, state), rs in runs.items():
            row["policies"].setdefault(policy, {})[state] = summarise(rs)
        rows.append(row)
        brief = {p: {s: v["seconds"]["median"] for s, v in d.items()} for p, d in row["policies"].items()}
        print(json.dumps({"instance": inst.name, "median_s": brief}), flush=True)
    g50 = next((r for r in rows if r["topology"] == "sndlib/germany50" and r["flows"] >= 1000), None)
    verdict = None
    if g50 is not None:
        verdict = {p: {"cold_median_s": d["cold"]["seconds"]["median"], "warm_median_s": d["warm"]["seconds"]["median"],
                       **({"new_pairs_median_s": d["new-pairs"]["seconds"]["median"]} if "new-pairs" in d else {}),
                       "met_cold": d["cold"]["seconds"]["median"] <= TARGET_S} for p, d in g50["policies"].items()}
    base = next((r for r in rows if r["topology"] == "fig2"), None)
    ratios = None
    if base is not None and g50 is not None:
        ratios = {p: round(g50["policies"][p]["cold"]["seconds"]["median"] /
                           max(base["policies"][p]["cold"]["seconds"]["median"], 1e-9), 1) for p in g50["policies"]}
    out = {"bench": "te_decision", "quick": a.quick, "repeat": repeat, "seed": a.seed, "wavelengths": a.wavelengths,
           "scope": a.scope,
           "target_s": TARGET_S,
           "rows": rows, "germany50_1000": verdict, "ratio_to_fig2_cold": ratios}
    Path(a.json).write_text(json.dumps(out, indent=2))
    print(json.dumps({"germany50_1000": verdict, "ratio_to_fig2_cold": ratios}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
