"""Balanced growth: a link whose many flows grow together gets a parallel circuit, and loses it when calm.

The monitor reports *balanced demand growth* on a packet link (utilization above the growth
threshold, no flow with more than half of the traffic): no elephant to move, the link itself is too
small. OSCARS-TE's answer is more capacity between the same two packet switches. Plain code, time
passed in as ``now`` (the TE app wires it to the bus, the executor and the counters):

- *grow in place?* An OTS port carries exactly one ODU container of fixed size (docs/graph-model.md:
  a virtual port is taken whole), so a lit circuit cannot take a bigger one; the decision records
  the ends' containers and grows by one more unit: a *parallel circuit*.
- *which circuit*: the joint circuit-lighting model (``pce.circuits.plan_circuits``: candidate XCON
  chains between the two switches, their setup times and port granularity) for the load divided by
  ``target_util``, on a graph where the congested link keeps its capacity and every other packet link
  offers nothing (the split only ever uses the link and the new circuit);
- *the split*: ``split`` band rules (``topology/rule_plan.py``) at both ends send the flows
  whose TCP/UDP source port falls in a share of the ``2**bits`` residues — the share proportional to
  the new circuit's capacity — onto it, per destination host behind the far end. A flow stays on one
  circuit (no reordering); many flows spread like a hash. Why not an OF1.3 select group: OVS 3.1
  userspace supports weighted select groups too, but masked port rules are ordinary flow rules the
  ordered planner, the counters, the cookie-based release and the fake network already handle; a
  group table would need its own steps, undo and reconciliation for the same ``2**bits``-granular
  weights (OVS approximates bucket weights over hash slots as well);
- *shrink*: the link's whole load (old link + parallel circuit, from rule counters) below
  ``off`` × the link's capacity (:class:`~app.te.damping.Damper` hysteresis: ``on`` is the growth
  trigger) for ``calm_intervals`` polls, and the circuit held at least ``min_hold_s`` → a release
  plan (split rules first: the flows fall back; then the egress rules; then the XCONs).

Every decision, taken or skipped, is a :class:`GrowthDecision` with its reason.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from app.te.damping import Damper
from app.te.decisions import ETH_IPV4, L4, residual_graph
from app.update import planner
from app.update.model import FlowRule, Port, XconSpec
from app.update.plan import Plan
from monitor.events import BALANCED_GROWTH, Event
from topology import rule_plan

GROW, SHRINK, SKIP = "grow", "shrink", "skip"
DEFAULT_BITS = 3  # the split's granularity: shares of 1/8


@dataclass(frozen=True)
class HostRoute:
    """A host behind one end of a link and how that end reaches it."""

    ip: str
    switch: str  # the switch the host hangs off
    out_port: int  # the port the link's end switch sends it out of


@dataclass
class Growth:
    """A parallel circuit next to a packet link and the split rules that use it."""

    ident: int
    link: str  # the grown packet link's edge key
    ends: tuple[Port, Port]  # the link's own ports (a, b)
    circuit_id: str
    xcons: tuple[XconSpec, ...]
    new_ends: tuple[Port, Port]  # the parallel circuit's packet ports (at a, at b)
    base_mbps: float  # the link's own capacity
    capacity_mbps: float  # the parallel circuit's
    share: float  # fraction of the port residues (flows) sent onto the parallel circuit
    ingress: tuple[FlowRule, ...]
    egress: tuple[FlowRule, ...]
    setup_s: float
    since: float = 0.0
    calm: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"id": self.ident, "link": self.link, "ends": [list(e) for e in self.ends], "circuit": self.circuit_id,
                "xcons": [x.to_json() for x in self.xcons], "new_ends": [list(e) for e in self.new_ends],
                "base_mbps": self.base_mbps, "capacity_mbps": self.capacity_mbps, "share": self.share,
                "setup_s": self.setup_s, "since": self.since, "calm": self.calm,
                "rules": [r.to_json() for r in self.egress + self.ingress]}


@dataclass
class GrowthDecision:
    kind: str  # grow | shrink | skip
    reason: str
    link: str
    plan: Plan | None = None
    growth: Growth | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"decision": self.kind, "reason": self.reason, "link": self.link,
                "plan": self.plan.id if self.plan else None,
                "growth": self.growth.ident if self.growth else None, **self.detail}


def split_values(share: float, bits: int = DEFAULT_BITS) -> list[tuple[int, int]]:
    """``(value, mask)`` port matches covering ``round(share * 2**bits)`` of the ``2**bits`` residues.

    The residues ``0 .. n-1`` of the low ``bits`` bits, as at most ``bits`` prefix matches (one per
    set bit of ``n``); ``n`` is kept in ``1 .. 2**bits - 1`` so both circuits carry something."""
    if not 1 <= bits <= 8:
        raise ValueError(f"split bits must be in 1..8, got {bits}")
    if not 0 < share < 1:
        raise ValueError(f"a split share must lie strictly between 0 and 1, got {share}")
    full = (1 << bits) - 1
    n = min(max(round(share * (1 << bits)), 1), full)
    out, acc = [], 0
    for j in range(bits - 1, -1, -1):
        if n >> j & 1:
            out.append((acc, (full >> j) << j))
            acc |= 1 << j
    return out


def covered(values: Iterable[tuple[int, int]], bits: int = DEFAULT_BITS) -> float:
    """The fraction of the ``2**bits`` residues the (disjoint) ``(value, mask)`` matches cover."""
    return sum(1 << (bits - bin(m).count("1")) for _v, m in values) / (1 << bits)


def link_ends(graph: Any, key: str) -> tuple[Port, Port, float]:
    """The two packet ports of link ``key`` (sorted by switch name) and its capacity; LookupError if none."""
    try:
        d = graph.edge(key)
    except Exception as exc:  # noqa: BLE001 - the graph's own lookup error: the link is gone
        raise LookupError(f"link {key} is not in the graph ({exc})") from None
    if d.get("kind") != "packet":
        raise LookupError(f"{key} is a {d.get('kind')} edge, not a packet link")
    (a, pa), (b, pb) = sorted((str(n), int(p)) for n, p in d["ports"].items())
    return (a, pa), (b, pb), float(d.get("capacity") or 0.0)


def containers(graph: Any, ends: Iterable[Port]) -> dict[str, str | None]:
    """The ODU container of the optical port each packet port is adapted to (None: not adapted)."""
    out: dict[str, str | None] = {}
    for sw, port in ends:
        out[f"{sw}:{port}"] = None
        for _u, v, e in graph.g.edges(sw, data=True):
            if e.get("kind") == "adaptation" and int(e.get("ports", {}).get(sw, -1)) == port:
                out[f"{sw}:{port}"] = graph.g.nodes[v].get("granularity")
    return out


def hosts_behind(graph: Any, near: str, far: Port, link: str) -> list[HostRoute]:
    """Hosts reached from ``far`` without going back through ``near``, with ``far``'s port towards each.

    Walks the packet layer (packet links other than ``link``) from the far switch; a host hanging off
    a switch found there is behind the link, and the far switch sends it out of the first port of its
    shortest packet path (or its access port)."""
    g = nx.Graph()
    for u, v, k, d in graph.g.edges(keys=True, data=True):
        if d.get("kind") == "packet" and k != link and near not in (u, v):
            p = d["ports"]
            if not g.has_edge(u, v):
                g.add_edge(u, v, ports={u: int(p[u]), v: int(p[v])})
    g.add_node(far[0])
    paths = nx.single_source_shortest_path(g, far[0])
    out = []
    for node, d in sorted(graph.g.nodes(data=True)):
        if d.get("kind") != "host" or not d.get("ip"):
            continue
        for _h, sw, e in graph.g.edges(node, data=True):
            if e.get("kind") != "access" or sw not in paths:
                continue
            path = paths[sw]
            port = int(e["ports"][sw]) if len(path) == 1 else g.edges[path[0], path[1]]["ports"][path[0]]
            out.append(HostRoute(str(d["ip"]), str(sw), port))
    return out


class GrowthDecider:
    """Turns balanced-growth events into parallel circuits and calm links back into single ones."""

    def __init__(self, damper: Damper | None = None, *, target_util: float = 0.5, calm_intervals: int = 3,
                 bits: int = DEFAULT_BITS, solver: str = "highs", stable_ms: float = planner.DEFAULT_STABLE_MS,
                 first_ident: int = 1) -> None:
        if not 0 < target_util <= 1:
            raise ValueError(f"target_util must lie in (0, 1], got {target_util}")
        if calm_intervals < 1:
            raise ValueError(f"calm_intervals must be >= 1, got {calm_intervals}")
        self.damper = damper or Damper(min_hold_s=30.0, on=0.7, off=0.4)
        self.target_util = target_util
        self.calm_intervals = calm_intervals
        self.bits = bits
        self.solver = solver
        self.stable_ms = stable_ms
        self.growths: dict[str, Growth] = {}  # link key -> its parallel circuit
        self._ids = itertools.count(first_ident)

    # ---- grow ---------------------------------------------------------------------------------------
    def on_event(self, ev: Event, graph: Any, now: float, *, load_mbps: float | None = None) -> list[GrowthDecision]:
        """A monitor event; only balanced growth concerns this decider. ``load_mbps``: the link's load
        (default: the event's utilization × the link's capacity)."""
        if ev.kind != BALANCED_GROWTH:
            return []
        return [self._grow(ev, graph, now, load_mbps)]

    def _grow(self, ev: Event, graph: Any, now: float, load_mbps: float | None) -> GrowthDecision:
        from pce.circuits import Demand, candidate_circuits, plan_circuits
        from pce.errors import PceError

        link = ev.circuit
        if link in self.growths:
            g = self.growths[link]
            return GrowthDecision(SKIP, f"already grown: parallel circuit {g.circuit_id} next to {link} "
                                        "(one parallel circuit per link)", link)
        why = self.damper.why_not(link, now)
        if why is not None:
            return GrowthDecision(SKIP, why, link)
        try:
            a, b, cap = link_ends(graph, link)
        except LookupError as exc:
            return GrowthDecision(SKIP, str(exc), link)
        if cap <= 0:
            return GrowthDecision(SKIP, f"link {link} has no known capacity", link)
        load = float(ev.detail.get("util", 0.0)) * cap if load_mbps is None else load_mbps
        want = load / self.target_util
        in_place = containers(graph, (a, b))
        held_by = ", ".join(f"{p} carries {c or 'no container (copper)'}" for p, c in in_place.items())
        detail: dict[str, Any] = {"load_mbps": round(load, 3), "want_mbps": round(want, 3), "link_mbps": cap,
                                  "in_place": f"no: {held_by}; one fixed container per port, so a parallel unit"}
        if want <= cap:
            return GrowthDecision(SKIP, f"{load:.2f} Mbit/s fits {link} ({cap:g} Mbit/s) at {self.target_util:g} "
                                        "utilization: no circuit needed", link, detail=detail)
        others = [k for _u, _v, k, d in graph.g.edges(keys=True, data=True) if d.get("kind") == "packet" and k != link]
        try:
            cands = candidate_circuits(graph, pairs=[(a[0], b[0])])
            plan = plan_circuits(residual_graph(graph, {}, others), [Demand("growth", a[0], b[0], want)],
                                 circuits=cands, solver=self.solver)
        except PceError as exc:
            return GrowthDecision(SKIP, f"no circuit: {exc}", link, detail=detail)
        if not plan.lit:
            return GrowthDecision(SKIP, f"no free circuit between {a[0]} and {b[0]} "
                                        f"({len(cands)} candidate(s))", link, detail=detail)
        c = plan.lit[0]
        ident = next(self._ids)
        growth = self._build(ident, graph, link, a, b, cap, c, now)
        if not growth.ingress:
            return GrowthDecision(SKIP, f"no learnt host behind {link}: nothing to split", link, detail=detail)
        # a hash split can leave one share idle for a while: no data-plane verification (the circuit-up
        # barrier still waits for the ports and LLDP); the poll reads the split rules' counters
        plan_out = planner.provision(growth.xcons, list(growth.new_ends), [growth.new_ends], list(growth.egress),
                                     list(growth.ingress), verify=False, stable_ms=self.stable_ms,
                                     plan_id=f"grow{ident}")
        detail |= {"circuit": c.id, "share": growth.share, "capacity_mbps": c.capacity}
        why = (f"balanced growth on {link} ({load:.2f} of {cap:g} Mbit/s): parallel circuit {c.id} "
               f"({c.capacity:g} Mbit/s, setup {c.setup_time:.3f} s) takes {growth.share:.3g} of the flows")
        return GrowthDecision(GROW, why, link, plan_out, growth, detail)

    def _build(self, ident: int, graph: Any, link: str, a: Port, b: Port, cap: float, c: Any, now: float) -> Growth:
        xcons = tuple(XconSpec(x.split(":")[0], int(x.split(":")[1]), int(y.split(":")[1])) for x, y in c.xcons)
        new_a, new_b = (c.a, c.a_port), (c.b, c.b_port)
        if new_a[0] != a[0]:
            new_a, new_b = new_b, new_a
        share = c.capacity / (cap + c.capacity)
        values = split_values(share, self.bits)
        band = rule_plan.SPLIT
        ingress: list[FlowRule] = []
        egress: list[FlowRule] = []
        for near, far, out_near, in_far in ((a, b, new_a, new_b), (b, a, new_b, new_a)):
            for h in hosts_behind(graph, near[0], far, link):
                for proto, (src_field, _dst) in sorted(L4.items()):
                    for v, m in values:
                        ingress.append(FlowRule(near[0], band.name, ident, band.priority(),
                                                (("eth_type", ETH_IPV4), ("ipv4_dst", h.ip), ("ip_proto", proto),
                                                 (src_field, (v, m))), out_near[1]))
                egress.append(FlowRule(far[0], band.name, ident, band.priority(),
                                       (("in_port", in_far[1]), ("eth_type", ETH_IPV4), ("ipv4_dst", h.ip)),
                                       h.out_port))
        return Growth(ident, link, (a, b), c.id, xcons, (new_a, new_b), cap, float(c.capacity),
                      covered(values, self.bits),
                      tuple(ingress), tuple(egress), float(c.setup_time), now)

    # ---- shrink -------------------------------------------------------------------------------------
    def observe(self, link: str, total_mbps: float, now: float) -> GrowthDecision | None:
        """One poll of a grown link's whole load (old link + parallel circuit, the busier direction).

        None while nothing changes; a shrink decision (release plan) after ``calm_intervals`` calm polls
        once the hold time has passed; a skip when calm but still held."""
        g = self.growths.get(link)
        if g is None:
            return None
        level = total_mbps / g.base_mbps
        if not self.damper.triggers(level, moved=True):
            g.calm = 0
            return None
        g.calm += 1
        if g.calm < self.calm_intervals:
            return None
        detail = {"total_mbps": round(total_mbps, 3), "level": round(level, 4), "calm": g.calm}
        held = now - g.since
        if held < self.damper.min_hold_s:
            return GrowthDecision(SKIP, f"calm ({total_mbps:.2f} Mbit/s fits {link}) but held: grown {held:.1f} s ago "
                                        f"(hold {self.damper.min_hold_s:g} s)", link, growth=g, detail=detail)
        plan = planner.release(g.xcons, list(g.egress), list(g.ingress), drain=False, plan_id=f"shrink{g.ident}")
        why = (f"calm for {g.calm} polls: {total_mbps:.2f} Mbit/s < {self.damper.off:g} x {g.base_mbps:g} Mbit/s "
               f"of {link}: release parallel circuit {g.circuit_id}")
        return GrowthDecision(SHRINK, why, link, plan, g, detail)

    # ---- restart and takeover (app/te/takeover.py) --------------------------------------------------
    def adopt(self, g: Growth, grown_at: float) -> None:
        """Take over a parallel circuit a previous controller grew: shrunk as if this decider had grown it."""
        g.since, g.calm = grown_at, 0
        self.growths[g.link] = g
        self.damper.moved(g.link, grown_at)
        self.skip_ids(g.ident)

    def skip_ids(self, highest: int) -> None:
        """New growths get ids above ``highest``."""
        nxt = next(self._ids)
        self._ids = itertools.count(max(nxt, highest + 1))

    # ---- what the executor did ----------------------------------------------------------------------
    def done(self, d: GrowthDecision, ok: bool, now: float) -> None:
        """Record an executed decision; a grow or shrink holds the link for ``min_hold_s`` (no flapping)."""
        if d.growth is None or not ok or d.kind == SKIP:
            return
        if d.kind == GROW:
            d.growth.since = now
            self.growths[d.link] = d.growth
        elif d.kind == SHRINK:
            self.growths.pop(d.link, None)
        self.damper.moved(d.link, now)
