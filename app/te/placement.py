"""Placement policies for the TE app: ``placement = otter | joint | cspf``.

Why here and not in :mod:`app.te.decisions`: the offload decider reacts to one event (an elephant
on a congested circuit); a placement policy places *every* known flow — monitored 5-tuples and
active reservations — at once, OTTER-style, and is re-run periodically (PER) with PATHPIN so a
placed flow only moves for a real gain. The PCE side is :mod:`pce.otter.graph`; this module adds
what the controller needs around it:

* flows from the monitor's fine data (5-tuple, measured rate, VLAN) and from reservations
  (bandwidth, window), each classified by :class:`~pce.otter.graph_flows.ClassRules`;
* :class:`PlacementPolicy`: remembers where each flow was placed and re-solves every
  ``period_s`` (PER) with those paths as PATHPIN state;
* :func:`placement_plan`: the ordered update plan of a placement — XCONs of the circuits to light,
  circuit-up barrier, then ``steer``-band 5-tuple rules along each moved flow's path (transit and
  egress first, ingress last, both directions), built with the decider's own helpers
  (:func:`~app.te.decisions.five_tuple_match`, :func:`~app.te.decisions.host_ports`).

* :class:`PlacementDecider`: the TE loop's decider for ``[te] placement = otter | cspf`` — the
  :class:`~app.te.decisions.OffloadDecider` interface (``on_event``, ``done``, ``offloads``), so the
  TE app's executor path, port reservation, journal and elephant-gone release are the same ones.

Wiring (the TE app): an unconstrained imbalance, and every ``period_s`` (PER, :meth:`PlacementDecider.tick`),
places the monitored flows (the fine data's rates; a flow not yet moved is at its default-forwarding
path, :func:`forwarding_path`) plus the reservations (held on their circuits). Each group of moved
flows (one new circuit or none, one ingress switch) becomes an :class:`~app.te.decisions.Offload`
with its own plan; the new paths become PATHPIN state only once that plan succeeded.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.config import PLACEMENT_SCOPES
from app.te.damping import Damper
from app.te.decisions import (
    OFFLOAD,
    SKIP,
    Decision,
    HostNotFound,
    Offload,
    OffloadDecider,
    five_tuple_match,
    host_in,
    host_ports,
    link_capacity,
)
from app.te.gain import offload_gain
from app.update import planner
from app.update.model import FlowRule, IngressChange, Port, XconSpec
from app.update.plan import Plan
from monitor.events import UNCONSTRAINED_IMBALANCE, Event, FlowLike
from pce.otter.graph import (
    POLICIES,
    CandidatePath,
    FlowPlacement,
    GraphPlacement,
    hop_id,
    packet_edges,
    place,
)
from pce.otter.graph_flows import ClassRules, GraphFlow, resolve_endpoint
from topology import rule_plan
from topology.flow import FiveTuple

DEFAULT_PERIOD_S = 30.0
EVENT_SCOPES = PLACEMENT_SCOPES  # ``[te] placement_scope``: one list, checked by the config and here


def flows_from_monitor(graph: Any, rates: Iterable[FlowLike], rules: ClassRules
                       ) -> tuple[list[GraphFlow], list[str]]:
    """Monitored flows (``key`` 5-tuple, ``mbps``, optional ``vlan``) between learnt hosts; returns
    (flows, why each other one was left out)."""
    out, skipped = [], []
    hosts = host_ports(graph)
    for fl in rates:
        key: FiveTuple = fl.key
        if not fl.mbps > 0:
            continue
        try:
            (ssw, sport), (dsw, dport) = host_in(hosts, key.src), host_in(hosts, key.dst)
        except HostNotFound as exc:
            skipped.append(f"{key}: {exc}")
            continue
        match = (key.src, key.dst, key.proto, key.sport, key.dport)
        vlan = getattr(fl, "vlan", None)
        out.append(GraphFlow(str(key), ssw, dsw, float(fl.mbps), rules.classify(vlan=vlan, match=match),
                             sport, dport, match, vlan))
    return out, skipped


def _field(r: Any, name: str) -> Any:
    return r[name] if isinstance(r, Mapping) else getattr(r, name)


def flows_from_reservations(graph: Any, reservations: Iterable[Any], now: float, rules: ClassRules
                            ) -> list[GraphFlow]:
    """Reservations active at ``now`` (objects or dicts with id, src, dst, bandwidth, start_ts, end_ts,
    optional src_vlan and path — the hop ids of its circuits) as flows of their reserved bandwidth."""
    out = []
    g = getattr(graph, "g", graph)
    for r in reservations:
        if not _field(r, "start_ts") <= now < _field(r, "end_ts"):
            continue
        rid = str(_field(r, "id"))
        (ssw, sport), (dsw, dport) = resolve_endpoint(g, _field(r, "src")), resolve_endpoint(g, _field(r, "dst"))
        vlan = r.get("src_vlan") if isinstance(r, Mapping) else getattr(r, "src_vlan", None)
        path = r.get("path") if isinstance(r, Mapping) else getattr(r, "path", None)
        out.append(GraphFlow(f"resv:{rid}", ssw, dsw, float(_field(r, "bandwidth")),
                             rules.classify(reservation=rid, vlan=vlan), sport, dport, None, vlan, rid,
                             path=None if path is None else tuple(path)))
    return out


@dataclass
class PlacementPolicy:
    """One placement policy and its PER/PATHPIN state (flow id → hop ids of its installed path)."""

    name: str = "otter"
    rules: ClassRules = field(default_factory=ClassRules)
    period_s: float = DEFAULT_PERIOD_S
    options: dict[str, Any] = field(default_factory=dict)
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    last_run: float | None = None

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"unknown placement policy {self.name!r} (choose from {', '.join(POLICIES)})")

    def due(self, now: float) -> bool:
        """PER: time for the periodic re-solve."""
        return self.last_run is None or now - self.last_run >= self.period_s

    def place(self, graph: Any, flows: Sequence[GraphFlow], now: float,
              background: Mapping[str, float] | None = None) -> GraphPlacement:
        """Place ``flows``; a flow without a ``path`` of its own is pinned to the one it was installed on.
        ``background``: hop id → Mbit/s of measured traffic that is not among ``flows``."""
        known = [f if f.path is not None or f.id not in self.paths else _with_path(f, self.paths[f.id])
                 for f in flows]
        self.last_run = now
        return place(graph, known, self.rules, self.name, background=background, **self.options)

    def done(self, placement: GraphPlacement) -> None:
        """The plan of ``placement`` was executed: its paths are the flows' current ones."""
        for p in placement.flows:
            if p.path is not None and p.allocated > 0:
                self.paths[p.flow.id] = p.path.key
            else:
                self.paths.pop(p.flow.id, None)

    def forget(self, flow_ids: Iterable[str]) -> None:
        for fid in flow_ids:
            self.paths.pop(fid, None)


def _with_path(f: GraphFlow, path: tuple[str, ...]) -> GraphFlow:
    return replace(f, path=path)


def circuit_xcons(xcons: Iterable[tuple[str, str]]) -> tuple[XconSpec, ...]:
    """``(("X:1", "X:3"), ...)`` oport pairs of a circuit as XCON specs."""
    out = []
    for a, b in xcons:
        ots, a_port = a.rsplit(":", 1)
        out.append(XconSpec(ots, int(a_port), int(b.rsplit(":", 1)[1])))
    return tuple(out)


def path_rules(path: CandidatePath, flow: FiveTuple, src: Port, dst: Port, ident: int
               ) -> tuple[list[FlowRule], list[FlowRule]]:
    """(ingress, transit+egress) steer rules for both directions of ``flow`` along ``path``;
    ``src``/``dst`` are the host ports at its ends. Forward rules come first in each list."""
    band = rule_plan.STEER
    prio = band.priority()
    sw, hops = path.switches, path.hops
    ingress: list[FlowRule] = []
    transit: list[FlowRule] = []
    for reverse in (False, True):
        seq = list(zip(sw, [src[1], *(h.port_at(s) for h, s in zip(hops, sw[1:], strict=True))],
                       [*(h.port_at(s) for h, s in zip(hops, sw, strict=False)), dst[1]], strict=True))
        if reverse:  # the same switches backwards, in and out ports swapped
            seq = [(s, out, inp) for s, inp, out in reversed(seq)]
        for i, (s, in_port, out_port) in enumerate(seq):
            rule = FlowRule(s, band.name, ident, prio, five_tuple_match(flow, in_port, reverse), out_port)
            (ingress if i == 0 else transit).append(rule)
    return ingress, transit


def placement_plan(placement: GraphPlacement, ident: int, *, installed: Mapping[str, FlowRule] | None = None,
                   verify: bool = True, stable_ms: float = planner.DEFAULT_STABLE_MS,
                   verify_timeout_s: float = planner.DEFAULT_VERIFY_TIMEOUT_S) -> Plan | None:
    """The update plan of a placement: XCONs of its circuits → circuit up → transit/egress rules →
    ingress rules → verification. Only flows with a 5-tuple, both host ports and a path that is new
    or moved get rules (pinned ones keep theirs); ``installed`` (flow id → its current forward
    ingress rule) turns a moved flow's ingress into an overwrite of the old one. None: nothing to do."""
    installed = installed or {}
    ingress: list[FlowRule | IngressChange] = []
    transit: list[FlowRule] = []
    verify_rules: list[FlowRule] = []
    for p in placement.flows:
        f = p.flow
        if (p.path is None or not p.path.hops or p.allocated <= 0 or f.match is None or f.src_port is None
                or f.dst_port is None or (f.path is not None and not p.moved)):
            continue
        ing, tra = path_rules(p.path, FiveTuple(*f.match), (f.src, f.src_port), (f.dst, f.dst_port), ident)
        old = installed.get(f.id)
        ingress += [IngressChange(ing[0], old) if old is not None else ing[0], *ing[1:]]
        transit += tra
        if not verify_rules:
            verify_rules = [ing[0], tra[0]]
    if not ingress and not placement.circuits:
        return None
    xcons = [x for c in placement.circuits for x in circuit_xcons(c.xcons)]
    ports = [e for c in placement.circuits for e in ((c.a, c.a_port), (c.b, c.b_port))]
    return planner.provision(xcons, ports, [], transit, ingress, verify=verify and bool(verify_rules),
                             verify_rules=verify_rules or None, stable_ms=stable_ms,
                             verify_timeout_s=verify_timeout_s, plan_id=f"placement{ident}")


def edge_hops(graph: Any) -> dict[str, str]:
    """Edge key → hop id of every packet edge of the graph."""
    return {k: hop_id(a, pa, b, pb) for k, a, pa, b, pb, _d in packet_edges(getattr(graph, "g", graph))}


def edge_hop(graph: Any, key: str) -> str | None:
    """The hop id of the packet edge ``key`` of the graph (e.g. the congested circuit of an event)."""
    return edge_hops(graph).get(key)


def forwarding_path(graph: Any, out_ports: Mapping[str, int], src: str, dst: str,
                    links: Mapping[tuple[str, int], tuple[str, str]] | None = None) -> tuple[str, ...] | None:
    """Hop ids from switch ``src`` to ``dst`` following ``out_ports`` (switch → the port default
    forwarding sends the destination host's traffic out of); None when the rules do not get there.
    ``links``: :func:`packet_ports` of the graph, when many paths are followed on it."""
    if links is None:
        links = packet_ports(graph)
    hops: list[str] = []
    at, seen = src, {src}
    while at != dst:
        port = out_ports.get(at)
        nxt, hop = links.get((at, port), (None, "")) if port is not None else (None, "")
        if nxt is None or nxt in seen:
            return None
        hops.append(hop)
        seen.add(nxt)
        at = nxt
    return tuple(hops)


def packet_ports(graph: Any) -> dict[tuple[str, int], tuple[str, str]]:
    """(switch, port) -> (the switch at the other end, hop id) of the packet links (the first link at
    a port, in the graph's order): what :func:`forwarding_path` follows, one pass over the graph."""
    g = getattr(graph, "g", graph)
    out: dict[tuple[str, int], tuple[str, str]] = {}
    for at in g.nodes:
        for _u, v, d in g.edges(at, data=True):
            ports = d.get("ports", {})
            if d.get("kind") == "packet" and at in ports:
                a, b = sorted((at, v))
                out.setdefault((at, int(ports[at])), (v, hop_id(a, int(ports[a]), b, int(ports[b]))))
    return out


def unmonitored_load(graph: Any, link_loads: Mapping[str, float], flows: Iterable[GraphFlow],
                     rates: Mapping[str, float], floor_mbps: float = 0.1) -> dict[str, float]:
    """Hop id → Mbit/s the port counters measure on a lit link beyond what the known flows on their
    current paths account for (at their measured ``rates``, by flow id).

    Why: the monitor takes per-flow data only at hot spots, so the placement knows the flows of the
    congested circuit and nothing of the rest; a lit detour that looks empty may carry another
    site's traffic (mesh6's B–D circuit: 16 transfers and an interactive flow). That traffic stays
    where it is; the placement must leave its room. Below ``floor_mbps``: counter noise, ignored."""
    known: dict[str, float] = {}
    for f in flows:
        for hop in f.path or ():
            known[_ends_of(hop)] = known.get(_ends_of(hop), 0.0) + float(rates.get(f.id, f.bw))
    hops = edge_hops(graph)
    out: dict[str, float] = {}
    for key, mbps in link_loads.items():
        measured = hops.get(key)
        if measured is None:
            continue
        extra = float(mbps) - known.get(measured, 0.0)
        if extra > floor_mbps:
            out[measured] = extra
    return out


def _placed(p: FlowPlacement) -> CandidatePath:
    """The path of a flow the placement moved (an offload is built from placed flows only)."""
    assert p.path is not None
    return p.path


def _ends_of(hop: str) -> str:
    """A hop id without a candidate circuit's optical chain: the id its lit link will have."""
    return hop.split("[", 1)[0]


def hop_loads(placement: GraphPlacement) -> dict[str, float]:
    """Mbit/s the placement puts on each hop (by the id of its lit link, both directions summed,
    as a link's two directions share its capacity in the placement)."""
    load: dict[str, float] = {}
    for p in placement.flows:
        if p.path is not None and p.allocated > 0:
            for h in p.path.hops:
                load[_ends_of(h.id)] = load.get(_ends_of(h.id), 0.0) + p.allocated
    return load


def scope_to_hop(flows: Sequence[GraphFlow], hop: str | None, named: set[str]
                 ) -> tuple[list[GraphFlow], list[GraphFlow]]:
    """(flows an event re-places, flows it leaves where they are). Why: an unconstrained imbalance is
    about one link, and placing every monitored flow to relieve it cost ~1 s on germany50 with 1,000
    flows; the periodic re-solve (PER) still places them all. Re-placed: the named elephants, the
    flows whose path crosses ``hop`` (the congested link's hop id), the held ones (reservations:
    they only take room) and flows with no known path (nothing to hold them to); the rest are
    returned apart, to be counted as background load on their paths."""
    free: list[GraphFlow] = []
    fixed: list[GraphFlow] = []
    for f in flows:
        crosses = f.path is None or (hop is not None and any(_ends_of(h) == hop for h in f.path))
        (free if crosses or f.hold or f.id in named else fixed).append(f)
    return free, fixed


@dataclass
class _Rate:
    key: FiveTuple
    mbps: float


class PlacementDecider(OffloadDecider):
    """``[te] placement = otter | cspf``: every monitored flow is placed at once by the policy, and
    what moves is executed as offloads (so the TE app runs, reserves and releases them unchanged).

    Why the congested circuit is avoided: an unconstrained imbalance means drops at low average
    utilisation (bursts), which the LP's mean rates cannot see; as in the joint decider, the named
    elephants must leave that circuit — everything else is the policy's choice (PATHPIN keeps a flow
    on its path unless moving gains ``pin_gain``; damped and already offloaded flows are held).

    Every move the policy makes is then checked by the offload gain, as the joint decider's are
    (:mod:`app.te.gain`, :meth:`judge_move`): a flow whose predicted remainder would not finish
    sooner by enough to pay for the switch-over stays where it is, as a SKIP with the numbers."""

    def __init__(self, policy: PlacementPolicy, damper: Damper | None = None, *,
                 monitored: Callable[[], Mapping[FiveTuple, Any]] = dict,
                 forwarding: Callable[[], Mapping[str, Mapping[str, int]]] = dict,
                 reservations: Callable[[float], Iterable[Any]] = lambda _now: (),
                 link_loads: Callable[[], Mapping[str, float]] = dict,
                 stable_ms: float = planner.DEFAULT_STABLE_MS, verify_timeout_s: float = 3.0,
                 first_ident: int = 1, event_scope: str = "congested", **gain: Any) -> None:
        """``gain``: the offload gain's ``overhead_s``, ``min_gain_s`` and ``alpha`` (as the joint decider).
        ``event_scope``: what an imbalance event re-places — ``congested`` (the flows crossing the
        congested link, the rest held as background on their paths), ``named`` (the named elephants
        alone) or ``all`` (every known flow, as the periodic re-solve always does)."""
        if event_scope not in EVENT_SCOPES:
            raise ValueError(f"unknown event scope {event_scope!r} (choose from {', '.join(EVENT_SCOPES)})")
        super().__init__(damper, stable_ms=stable_ms, verify_timeout_s=verify_timeout_s, first_ident=first_ident,
                         **gain)
        self.policy = policy
        self.monitored = monitored  # 5-tuple -> object with .mbps (NetworkView.fine_flows)
        self.forwarding = forwarding  # switch -> {host MAC: out port} of default forwarding
        self.reservations = reservations  # now -> reservation records (flows_from_reservations)
        self.link_loads = link_loads  # edge key -> Mbit/s the monitor's port counters measure (every link)
        self.threshold_mbps = 0.0  # the monitor's elephant threshold, from its last event
        self.event_scope = event_scope
        self.last: GraphPlacement | None = None

    # ---- triggers ------------------------------------------------------------------------------
    def on_event(self, ev: Event, graph: Any, now: float, **kw: Any) -> list[Decision]:
        """``flow_bytes`` (5-tuple → bytes sent, None when not counted) feeds the offload gain;
        without it the monitored flows' own byte counts (``.bytes``) are used."""
        if ev.kind != UNCONSTRAINED_IMBALANCE:
            return super().on_event(ev, graph, now, **kw)  # elephant gone: the offload's release
        self.threshold_mbps = float(ev.detail.get("threshold_mbps", self.threshold_mbps))
        named = dict(zip(ev.flows, ev.detail.get("elephant_mbps") or [], strict=False))
        return self.run(graph, now, named, edge_hop(graph, ev.circuit), ev.circuit, kw.get("flow_bytes"),
                        wants_mbps=link_capacity(graph, ev.circuit))

    def tick(self, graph: Any, now: float) -> list[Decision]:
        """PER: the periodic re-solve (nothing when it is not due or nothing is monitored). Of its
        skips only the offload-gain ones are returned: a move the policy wanted and the gain refused."""
        if not self.policy.due(now) or not self.monitored():
            return []
        return [d for d in self.run(graph, now, {}, None, None) if d.kind != SKIP or d.detail.get("gain")]

    def _bytes_sent(self, key: FiveTuple) -> float | None:
        """Bytes ``key`` sent as the monitor counted them (None: no count, e.g. sFlow sampling)."""
        got = getattr(self.monitored().get(key), "bytes", None)
        return None if got is None else float(got)

    def judge_move(self, p: FlowPlacement, load: Mapping[str, float], sent: float | None,
                   current_mbps: float) -> dict[str, Any]:
        """The offload gain of moving ``p``'s flow onto its new path (the rule of :mod:`app.te.gain`):
        it sends at its measured rate where it is; moved it can reach its own share plus the room the
        placement leaves on the new path's bottleneck; the switch-over is the slowest new circuit's
        setup plus the controller's ``overhead_s``. No byte count: it pays (the monitor named it).
        ``current_mbps``: its measured rate (the placement may have been given a larger demand)."""
        assert p.path is not None
        if sent is None:
            return {"pays": True, "reason": "no byte count: the placement's move is taken"}
        room = min((h.capacity - load.get(_ends_of(h.id), 0.0) for h in p.path.hops), default=0.0)
        new = max(room + p.allocated, 1e-3)
        switch = max((c.setup_time for c in p.path.circuits), default=0.0) + self.overhead_s
        g = offload_gain(sent, max(current_mbps, 1e-3), new, switch, alpha=self.alpha, min_gain_s=self.min_gain_s)
        return {**g.as_dict(), "current_mbps": round(current_mbps, 3), "new_mbps": round(new, 3),
                "switch_s": round(switch, 3)}

    # ---- one placement -------------------------------------------------------------------------
    def run(self, graph: Any, now: float, named: Mapping[FiveTuple, float], avoid: str | None,
            congested: str | None, flow_bytes: Callable[[FiveTuple], float | None] | None = None,
            wants_mbps: float = 0.0) -> list[Decision]:
        """Place every known flow; one offload decision per group of moved flows whose move pays,
        one skip per flow whose move the offload gain refused, skips with reasons.

        ``wants_mbps``: what a named elephant asks of the placement. An unconstrained imbalance means
        its rate is held down by the congestion it was named on, so its measured rate understates what
        it will take once moved (the window-based elephant of the labs goes from ~3 to ~9 Mbit/s):
        placed at its measured rate, it lands on a lit path with that much room, then fills it and the
        queue that latency-sensitive flows share there. It asks for the capacity of the link it was
        named on (at least its measured rate); the offload gain still judges it at its measured rate."""
        rates = {k: float(getattr(c, "mbps", 0.0) or 0.0) for k, c in self.monitored().items()}
        for five, mbps in named.items():
            rates[five] = max(rates.get(five, 0.0), float(mbps))
        demand = {**rates, **{f: max(rates[f], wants_mbps) for f in named}}
        flows, skipped = flows_from_monitor(graph, [_Rate(k, v) for k, v in demand.items()], self.policy.rules)
        out = [Decision(SKIP, why) for why in skipped if any(str(f) in why for f in named)]
        keys = {str(k): k for k in rates}
        offloaded = {str(f) for o in self.offloads.values() for f in o.flows}
        macs = {d.get("ip"): d.get("mac") for _n, d in getattr(graph, "g", graph).nodes(data=True)
                if d.get("kind") == "host"}
        fwd = self.forwarding()
        links = packet_ports(graph)
        towards: dict[Any, dict[str, int]] = {}  # host MAC -> switch -> out port of default forwarding
        ready: list[GraphFlow] = []
        for f in flows:
            key = keys[f.id]
            held = f.id in offloaded or self.damper.why_not(key, now) is not None
            path = self.policy.paths.get(f.id)
            if path is None:  # never moved: where default forwarding has it
                mac = macs.get(key.dst)
                if mac not in towards:
                    towards[mac] = {s: r[mac] for s, r in fwd.items() if mac is not None and mac in r}
                path = forwarding_path(graph, towards[mac], f.src, f.dst, links)
            ready.append(replace(f, path=path, hold=held and path is not None,
                                 avoid=frozenset({avoid}) if avoid and key in named and not held else frozenset()))
        ready += [replace(r, hold=True) for r in flows_from_reservations(graph, self.reservations(now), now,
                                                                          self.policy.rules)]
        background = unmonitored_load(graph, self.link_loads(), ready, {f.id: rates[keys[f.id]] for f in flows})
        fixed = 0
        if self.event_scope != "all" and avoid is not None:
            ready, held_back = scope_to_hop(ready, None if self.event_scope == "named" else avoid,
                                            {str(k) for k in named})
            fixed = len(held_back)
            for f in held_back:
                for hop in map(_ends_of, f.path or ()):
                    background[hop] = background.get(hop, 0.0) + rates[keys[f.id]]
        try:
            placement = self.policy.place(graph, ready, now, background)
        except Exception as exc:  # noqa: BLE001 - a PCE error is a skip with its reason, the loop goes on
            return out + [Decision(SKIP, f"{self.policy.name} placement failed: {exc}", tuple(named))]
        self.last = placement
        sent_of = flow_bytes or self._bytes_sent
        load = hop_loads(placement)
        for hop, mbps in background.items():
            load[hop] = load.get(hop, 0.0) + mbps
        groups: dict[tuple[str, str], list[FlowPlacement]] = {}
        refused: list[tuple[FlowPlacement, dict[str, Any]]] = []
        gains: dict[str, dict[str, Any]] = {}
        for p in placement.flows:
            if p.flow.match is None or p.path is None or not p.path.hops or p.allocated <= 0:
                continue
            if p.flow.path is not None and not p.moved:
                continue
            if p.flow.path is not None:  # a move (a flow without a known path is placed, not moved)
                gains[p.flow.id] = gain = self.judge_move(p, load, sent_of(keys[p.flow.id]), rates[keys[p.flow.id]])
                if not gain["pays"]:
                    refused.append((p, gain))
                    continue
            circuit = ",".join(c.id for c in p.path.circuits)
            groups.setdefault((circuit, p.flow.src), []).append(p)
        kept = {p.flow.id: p.flow.cls for p in placement.flows if p.flow.match is not None
                and p.flow.path is not None and not p.moved}
        summary = {"policy": self.policy.name, "kept": kept, "congested": congested, "fixed": fixed,
                   "background": {h: round(v, 3) for h, v in sorted(background.items())},
                   "placed_mbps": round(sum(p.allocated for p in placement.flows), 3),
                   "seconds": round(float(placement.stats.get("total_seconds", 0.0)), 4)}
        for group in groups.values():
            d = self._offload_of(group, placement, now, summary, keys)
            d.detail["gain"] = {p.flow.id: gains[p.flow.id] for p in group if p.flow.id in gains}
            out.append(d)
        for p, gain in refused:
            onto = ", ".join(c.id for c in p.path.circuits) if p.path and p.path.circuits else "lit links"
            out.append(Decision(SKIP, f"{self.policy.name} placement: moving {p.flow.id} onto {onto} does not pay: "
                                      f"{gain['reason']}", (keys[p.flow.id],),
                                detail={**summary, "gain": {p.flow.id: gain},
                                        "refused": {"path": list(p.path.key) if p.path else None,
                                                    "mbps": round(p.allocated, 3), "class": p.flow.cls}}))
        if not groups and not refused:
            out.append(Decision(SKIP, f"{self.policy.name} placement moves no flow "
                                      f"({len(kept)} kept on their paths)", tuple(named), detail=summary))
        return out

    def _offload_of(self, group: list[FlowPlacement], placement: GraphPlacement, now: float,
                    summary: dict[str, Any], keys: Mapping[str, FiveTuple]) -> Decision:
        """The offload (rules, circuit, ends) of flows moved onto paths through one circuit (or none)."""
        ident = next(self._ids)
        circuits = {c.id: c for p in group for c in _placed(p).circuits} if group[0].path else {}
        xcons = tuple(x for c in circuits.values() for x in circuit_xcons(c.xcons))
        ends: tuple[Port, ...] = tuple(e for c in circuits.values() for e in ((c.a, c.a_port), (c.b, c.b_port)))
        fwd_in, rev_in, fwd_tr, rev_tr = [], [], [], []
        for p in group:
            f = p.flow
            assert p.path is not None and f.match is not None and f.src_port is not None and f.dst_port is not None
            ing, tra = path_rules(p.path, FiveTuple(*f.match), (f.src, f.src_port), (f.dst, f.dst_port), ident)
            fwd_in.append(ing[0])
            rev_in.append(ing[1])
            half = len(tra) // 2
            fwd_tr += tra[:half]
            rev_tr += tra[half:]
        ingress, egress = tuple(fwd_in + rev_in), tuple(fwd_tr + rev_tr)
        c = next(iter(circuits.values()), None)
        off = Offload(ident, tuple(keys[p.flow.id] for p in group), c.id if c else "", xcons,
                      ends, egress, ingress,  # type: ignore[arg-type]  # ends: 0 or 2 ports here
                      float(c.capacity) if c else 0.0, float(c.setup_time) if c else 0.0, now)
        links = [(ends[0], ends[1])] if c else []
        plan = planner.provision(xcons, list(ends), links, list(egress), list(ingress),
                                 verify_rules=[ingress[0], egress[0]], stable_ms=self.stable_ms,
                                 verify_timeout_s=self.verify_timeout_s, plan_id=f"place{ident}")
        onto = f"onto new circuit {c.id} ({c.capacity:g} Mbit/s, setup {c.setup_time:.3f} s)" if c else \
            "onto lit links"
        path = " ".join(_placed(group[0]).switches)
        why = (f"{self.policy.name} placement: {len(group)} flow(s) {group[0].flow.src} -> {path.split()[-1]} "
               f"{onto} via {path}")
        detail = {**summary, "circuit": c.id if c else None,
                  "moved": {p.flow.id: {"path": list(_placed(p).key), "mbps": round(p.allocated, 3),
                                        "class": p.flow.cls} for p in group}}
        return Decision(OFFLOAD, why, off.flows, plan, off, detail)

    # ---- what the executor did -----------------------------------------------------------------
    def done(self, d: Decision, ok: bool, now: float) -> None:
        """As the joint decider, plus PATHPIN state: a moved flow's path once its plan succeeded; a
        released flow is back on default forwarding (forgotten)."""
        super().done(d, ok, now)
        if d.offload is None or not ok:
            return
        if d.kind == OFFLOAD:
            for fid, m in (d.detail.get("moved") or {}).items():
                self.policy.paths[fid] = tuple(m["path"])
        else:
            self.policy.forget(str(f) for f in d.offload.flows)
