"""TE decisions: a monitor event and the network view's graph in, an update plan (or a skip) out.

Plain code, time passed in as ``now`` (the TE app only wires it to the bus and the executor):

- *unconstrained imbalance* on a circuit → for the named elephants between one pair of packet
  switches (every host pair from one to the other decided together; the pairs one after the other,
  none taking a chain that shares a port with a circuit decided before it and not lit yet):
  check damping and the offload gain (:mod:`app.te.gain`, :mod:`app.te.young`), let the joint circuit-lighting
  model (``pce.circuits.plan_circuits``, with setup times and the port granularity) pick a temporary
  circuit — the congested packet links enter it with only their spare capacity — and return a
  *provision* plan: its XCONs → circuit up → the egress 5-tuple rules → the ingress 5-tuple rules
  (both directions; ``steer`` band, so only the elephants move and the small flows stay) →
  verification on the forward rules' counters;
- *elephant gone* → a *release* plan for the offload that carried it: ingress rules first (the flow
  falls back onto its old path), then the egress rules, then the XCONs — nothing of it left.

Every decision, taken or skipped, is a :class:`Decision` with its reason (the app makes it an event).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from app.te.damping import Damper
from app.te.gain import GainEstimate, offload_gain
from app.te.young import YoungElephants
from app.update import planner
from app.update.model import FlowRule, Port, XconSpec
from app.update.plan import Plan
from monitor.events import ELEPHANT_GONE, UNCONSTRAINED_IMBALANCE, Event
from topology import rule_plan
from topology.errors import TopologyError
from topology.flow import FiveTuple
from topology.graph import oport_id

OFFLOAD, RELEASE, SKIP = "offload", "release", "skip"
#: seconds an offload decided but never reported done keeps its circuit's ports claimed (a plan takes a
#: few: XCONs, circuit up, rules, verification within ``verify_timeout_s``)
UNLIT_S = 30.0
ETH_IPV4 = 0x0800
L4 = {6: ("tcp_src", "tcp_dst"), 17: ("udp_src", "udp_dst")}


@dataclass
class Offload:
    """A temporary circuit and the 5-tuple rules that put elephants on it."""

    ident: int
    flows: tuple[FiveTuple, ...]
    circuit_id: str
    xcons: tuple[XconSpec, ...]
    ends: tuple[Port, Port]
    egress: tuple[FlowRule, ...]
    ingress: tuple[FlowRule, ...]
    capacity_mbps: float
    setup_s: float
    since: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"id": self.ident, "flows": [str(f) for f in self.flows], "circuit": self.circuit_id,
                "xcons": [x.to_json() for x in self.xcons], "ends": [list(e) for e in self.ends],
                "capacity_mbps": self.capacity_mbps, "setup_s": self.setup_s,
                "rules": [r.to_json() for r in self.egress + self.ingress]}


@dataclass
class Decision:
    kind: str  # offload | release | skip
    reason: str
    flows: tuple[FiveTuple, ...] = ()
    plan: Plan | None = None
    offload: Offload | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"decision": self.kind, "reason": self.reason, "flows": [str(f) for f in self.flows],
                "plan": self.plan.id if self.plan else None,
                "offload": self.offload.ident if self.offload else None, **self.detail}


class HostNotFound(LookupError):
    """A flow's address belongs to no host the controller has learnt."""


def host_port(graph: Any, ip: str) -> Port:
    """(switch, port) where the host with IPv4 ``ip`` is attached (its ``access`` edge)."""
    for node, d in graph.g.nodes(data=True):
        if d.get("kind") == "host" and d.get("ip") == ip:
            for _u, _v, e in graph.g.edges(node, data=True):
                if e.get("kind") == "access":
                    (sw, port), = ((n, p) for n, p in e["ports"].items() if n != node)
                    return str(sw), int(port)
    raise HostNotFound(f"no learnt host has the address {ip}")


def host_ports(graph: Any) -> dict[str, Port]:
    """IPv4 address -> (switch, port) of every attached host (the first host of an address, as
    :func:`host_port` finds it): one pass over the graph for a decision that looks up many flows."""
    out: dict[str, Port] = {}
    for node, d in graph.g.nodes(data=True):
        ip = d.get("ip")
        if d.get("kind") != "host" or ip in out:
            continue
        for _u, _v, e in graph.g.edges(node, data=True):
            if e.get("kind") == "access":
                (sw, port), = ((n, p) for n, p in e["ports"].items() if n != node)
                out[ip] = (str(sw), int(port))
                break
    return out


def host_in(ports: dict[str, Port], ip: str) -> Port:
    """The host port of ``ip`` in a :func:`host_ports` index (:class:`HostNotFound` if none)."""
    try:
        return ports[ip]
    except KeyError:
        raise HostNotFound(f"no learnt host has the address {ip}") from None


def five_tuple_match(f: FiveTuple, in_port: int, reverse: bool = False) -> tuple[tuple[str, Any], ...]:
    """An OF1.3 match for one direction of ``f`` arriving on ``in_port``."""
    src, dst, sport, dport = (f.dst, f.src, f.dport, f.sport) if reverse else (f.src, f.dst, f.sport, f.dport)
    m: list[tuple[str, Any]] = [("in_port", in_port), ("eth_type", ETH_IPV4), ("ipv4_src", src), ("ipv4_dst", dst),
                                ("ip_proto", f.proto)]
    if f.proto in L4:
        s_name, d_name = L4[f.proto]
        m += [(s_name, sport), (d_name, dport)]
    return tuple(m)


def link_capacity(graph: Any, edge_key: str) -> float:
    """Mbit/s of the graph's link ``edge_key`` (0 when it is gone from the graph or has none)."""
    try:
        return float(graph.edge(edge_key).get("capacity") or 0.0)
    except TopologyError:  # gone from the graph meanwhile
        return 0.0


def residual_graph(graph: Any, loads_mbps: dict[str, float], avoid: Iterable[str] = (),
                   packet_layer: bool = False) -> Any:
    """A copy of ``graph`` whose packet links offer only their spare capacity (``loads_mbps`` by edge key)
    and the ``avoid`` links (the congested circuit the elephants are to leave) none.

    ``packet_layer``: copy only the packet switches, hosts and their links — all the joint model reads
    when it is given its candidate circuits (the optical layer is most of a WAN graph: germany50's
    packet layer is 99 of its 2,066 links)."""
    g = graph.copy(("packet", "host"), ("packet", "access")) if packet_layer else graph.copy()
    avoid = set(avoid)
    for _u, _v, key, d in g.g.edges(keys=True, data=True):
        if d.get("kind") != "packet":
            continue
        if key in avoid:
            d["capacity"] = 1e-3  # the PCE reads 0 as "unknown"; this carries nothing worth routing
        elif key in loads_mbps:
            d["capacity"] = max(float(d.get("capacity") or 0.0) - loads_mbps[key], 1e-3)
    return g


class _Shared:
    """What every group of one imbalance event decides on: the residual graph (the congested circuit
    offers nothing, the other links their spare capacity), the candidate circuits of the groups'
    switch pairs, searched once (each pair's ids as a search of that pair alone gives them), and the
    ports the circuits of the decider's offloads claim — decided so far in the event, or earlier (a
    plan still running, a circuit the graph does not show yet) —: a later group's candidates that share
    one are out (each group's plan runs on its own, and two plans lighting one port fail)."""

    def __init__(self, graph: Any, residual: Any, congested: str, pairs: list[tuple[str, str]],
                 taken: Iterable[tuple[int, set[str]]] = ()) -> None:
        self.graph, self.residual, self.congested, self.pairs = graph, residual, congested, pairs
        self._by_pair: dict[tuple[str, str], list[Any]] | None = None
        self._claimed: dict[str, int] = {}  # port -> the offload whose circuit holds it
        for ident, ports in taken:  # the decider's offloads: their plans may still run, or the graph lag
            self._claimed.update(dict.fromkeys(ports, ident))

    def candidates(self, a: str, b: str) -> list[Any]:
        from pce.circuits import candidate_circuits, candidate_circuits_by_pair
        from pce.errors import PceError

        if self._by_pair is None:
            try:
                self._by_pair = candidate_circuits_by_pair(self.graph, self.pairs)
            except PceError:  # one pair's error: each group searches alone and reports its own
                self._by_pair = {}
        got = self._by_pair.get((min(a, b), max(a, b)))
        return got if got is not None else candidate_circuits(self.graph, pairs=[(a, b)])

    def claim(self, off: Offload) -> None:
        """Offload ``off`` is decided: its circuit's ports are no one else's in this event."""
        self._claimed.update(dict.fromkeys(_offload_ports(off), off.ident))

    def unclaimed(self, cands: list[Any]) -> list[Any]:
        """The candidates that share no port with a claimed circuit."""
        return [c for c in cands if not _ports_of(c) & self._claimed.keys()]

    def claimers(self, cands: list[Any]) -> str:
        """The offloads whose circuits took ``cands``' ports, for a skip's reason."""
        ids = sorted({self._claimed[p] for c in cands for p in _ports_of(c) if p in self._claimed})
        return ", ".join(f"offload {i}" for i in ids)


def _ports_of(c: Any) -> set[str]:
    """A candidate circuit's optical ports (its XCONs' ports, the OTS side of its uplinks among them) and
    its packet ends: two circuits that share one cannot both be lit."""
    return {*(f"oport {p}" for p in c.oports), f"packet {c.a}:{c.a_port}", f"packet {c.b}:{c.b_port}"}


def _offload_ports(off: Offload) -> set[str]:
    """The ports of an offload's circuit, named as :func:`_ports_of` names a candidate's."""
    return ({f"oport {oport_id(x.ots, p)}" for x in off.xcons for p in x.ports}
            | {f"packet {sw}:{port}" for sw, port in off.ends})


class OffloadDecider:
    """Turns monitor events into offload / release plans; remembers the offloads it made."""

    def __init__(self, damper: Damper | None = None, *, overhead_s: float = 0.1, min_gain_s: float = 1.0,
                 alpha: float = 2.0, solver: str = "highs", stable_ms: float = planner.DEFAULT_STABLE_MS,
                 verify_timeout_s: float = 3.0, first_ident: int = 1, young_horizon_s: float = 0.0) -> None:
        self.damper = damper or Damper()
        self.overhead_s = overhead_s  # the controller's share of a switch-over (ordered update), on top of setup
        self.min_gain_s = min_gain_s
        self.alpha = alpha
        self.solver = solver
        self.stable_ms = stable_ms
        self.verify_timeout_s = verify_timeout_s
        self.offloads: dict[int, Offload] = {}
        # offload id -> (when decided, the offload): decided, its plan not done yet; its circuit's ports are
        # claimed for later decisions until then, as those of the offloads in place (the graph shows an
        # offload's XCONs only once they are applied and read back)
        self.unlit: dict[int, tuple[float, Offload]] = {}
        self.young = YoungElephants(young_horizon_s)  # [te] young_horizon_s: 0 = off (app/te/young.py)
        self._ids = itertools.count(first_ident)

    # ---- decisions ---------------------------------------------------------------------------------
    def on_event(self, ev: Event, graph: Any, now: float, *,
                 flow_bytes: Callable[[FiveTuple], float | None] = lambda _f: None,
                 loads_mbps: dict[str, float] | None = None,
                 flow_count: Callable[[FiveTuple], Any] = lambda _f: None) -> list[Decision]:
        """``flow_count``: a flow's latest fine count (``.t``, ``.mbps``; None when not counted), the young
        elephants' evidence (``[te] young_horizon_s``)."""
        if ev.kind == UNCONSTRAINED_IMBALANCE:
            for f in ev.flows:
                count = flow_count(f)
                if count is not None:
                    self.young.note(f, float(count.t), float(count.mbps))
            return self._imbalance(ev, graph, now, flow_bytes, loads_mbps or {})
        if ev.kind == ELEPHANT_GONE:
            return self._gone(ev)
        return []

    def _imbalance(self, ev: Event, graph: Any, now: float, flow_bytes: Callable[[FiveTuple], float | None],
                   loads: dict[str, float]) -> list[Decision]:
        rates = dict(zip(ev.flows, ev.detail.get("elephant_mbps") or [], strict=False))
        skips: list[Decision] = []
        # one group per ordered pair of packet switches: every host pair from one to the other is decided
        # jointly, for one circuit — two groups decided apart from the same graph both took it (issue 25);
        # the other direction is a group of its own (the release counts an offload's elephants at one end)
        groups: dict[tuple[str, str], dict[FiveTuple, tuple[Port, Port]]] = {}
        hosts = host_ports(graph)
        for f in ev.flows:
            if any(f in o.flows for o in self.offloads.values()):
                skips.append(Decision(SKIP, "already offloaded", (f,)))
                continue
            why = self.damper.why_not(f, now)
            if why is not None:
                skips.append(Decision(SKIP, why, (f,)))
                continue
            try:
                src, dst = host_in(hosts, f.src), host_in(hosts, f.dst)
            except HostNotFound as exc:
                skips.append(Decision(SKIP, str(exc), (f,), detail={"host_unknown": True}))  # judged again
                continue
            groups.setdefault((src[0], dst[0]), {})[f] = (src, dst)
        out = list(skips)
        if groups:
            # one residual graph and one candidate search for every group of the event (the same graph and
            # loads): at germany50 size each costs a graph copy or a routing view
            shared = _Shared(graph, residual_graph(graph, loads, [ev.circuit], packet_layer=True), ev.circuit,
                             sorted({(min(p), max(p)) for p in groups if p[0] != p[1]}), self._taken(now))
            young = (float(ev.detail.get("threshold_mbps") or 0.0), float(ev.detail.get("drops") or 0.0))
            for flows in groups.values():
                decided = self._offload(shared, flows, rates, now, flow_bytes, young)
                out.append(decided)
                if decided.kind == OFFLOAD and len(decided.flows) < len(flows):
                    # the group's flows the gain turned down: a skip of their own, judged again like any
                    rest = tuple(f for f in flows if f not in decided.flows)
                    gains = decided.detail["gain"]
                    out.append(Decision(SKIP, "offload gain below the switch-over cost", rest,
                                        detail={"gain": {str(f): gains[str(f)] for f in rest}}))
        return out

    def _offload(self, shared: _Shared, ends: dict[FiveTuple, tuple[Port, Port]], rates: dict[FiveTuple, float],
                 now: float, flow_bytes: Callable[[FiveTuple], float | None],
                 young: tuple[float, float] = (0.0, 0.0)) -> Decision:
        """One ordered switch pair's elephants (``ends``: each flow's source and destination host ports) onto
        one new circuit, chosen among the candidates that share no port with a circuit decided and not lit
        yet. ``young``: the event's elephant threshold and drops (a young elephant's evidence)."""
        from pce.circuits import Demand, plan_circuits
        from pce.errors import PceError

        flows = list(ends)
        src, dst = ends[flows[0]]
        if src[0] == dst[0]:
            return Decision(SKIP, f"both ends on {src[0]}: no circuit can help", tuple(flows))
        want = sum(rates.get(f, 0.0) for f in flows)
        congested = shared.congested
        try:
            found = shared.candidates(src[0], dst[0])
            if not found:
                return Decision(SKIP, f"no free XCON chain between {src[0]} and {dst[0]}", tuple(flows))
            cands = shared.unclaimed(found)
            if not cands:
                return Decision(SKIP, f"no free XCON chain between {src[0]} and {dst[0]}: each of its "
                                      f"{len(found)} shares a port or an uplink with the circuit of "
                                      f"{shared.claimers(found)}, not in the network's graph yet", tuple(flows),
                                detail={"claimed": True})
            # the elephants leave the congested circuit: it offers them nothing, the rest its spare capacity
            plan = plan_circuits(shared.residual, [Demand("offload", src[0], dst[0], max(want, 1e-3))],
                                 circuits=cands, solver=self.solver)
        except PceError as exc:
            return Decision(SKIP, f"no circuit: {exc}", tuple(flows))
        if not plan.lit:
            return Decision(SKIP, f"the joint model routes {want:.2f} Mbit/s without a new circuit", tuple(flows))
        c = plan.lit[0]
        keep: list[FiveTuple] = []
        gains: dict[str, dict[str, Any]] = {}
        for f in flows:
            current = max(rates.get(f, 0.0), 1e-3)
            sent = flow_bytes(f)
            if sent is None:
                gains[str(f)] = {"pays": True, "reason": "no byte count: the monitor named it an elephant"}
                keep.append(f)
                continue
            g = offload_gain(sent, current, c.capacity / len(flows), c.setup_time + self.overhead_s,
                             alpha=self.alpha, min_gain_s=self.min_gain_s)
            gains[str(f)] = g.as_dict()
            if not g.pays and (y := self._young_gain(f, current, c.capacity / len(flows),
                                                      c.setup_time + self.overhead_s, *young)):
                gains[str(f)] = y
            if gains[str(f)]["pays"]:
                keep.append(f)
                self.young.forget(f)
        if not keep:
            return Decision(SKIP, "offload gain below the switch-over cost for every flow", tuple(flows),
                            detail={"gain": gains})
        ident = next(self._ids)
        off = self._build(ident, keep, src, dst, c, now, ends=ends)
        shared.claim(off)
        self.unlit[ident] = (now, off)
        plan_out = planner.provision(off.xcons, list(off.ends), [off.ends], list(off.egress), list(off.ingress),
                                     verify_rules=[off.ingress[0], off.egress[0]], stable_ms=self.stable_ms,
                                     verify_timeout_s=self.verify_timeout_s, plan_id=f"offload{ident}")
        why = (f"{len(keep)} elephant(s) {src[0]} -> {dst[0]} off {congested} onto circuit {c.id} "
               f"({c.capacity:g} Mbit/s, setup {c.setup_time:.3f} s)")
        return Decision(OFFLOAD, why, tuple(keep), plan_out, off, {"gain": gains, "circuit": c.id})

    def _young_gain(self, f: FiveTuple, current: float, new: float, switch_s: float, threshold_mbps: float,
                    drops: float) -> dict[str, Any] | None:
        """The gain of ``f`` judged as a young elephant (its rate over ``young_horizon_s``), or None
        without the evidence (:mod:`app.te.young`)."""
        p = self.young.predict(f, threshold_mbps, drops)
        if p is None:
            return None
        g: GainEstimate = offload_gain(0.0, current, new, switch_s, alpha=self.alpha, min_gain_s=self.min_gain_s,
                                       remaining_bytes=p.remaining_bytes)
        why = (f"young elephant ({len(p.samples)} counts at >= {p.mbps:.2f} Mbit/s, predicted to send "
               f"{p.horizon_s:g} s more): {g.reason}")
        return {**g.as_dict(), "reason": why, "young": True, **p.as_dict()}

    def _build(self, ident: int, flows: list[FiveTuple], src: Port, dst: Port, c: Any, now: float, *,
               ends: dict[FiveTuple, tuple[Port, Port]] | None = None) -> Offload:
        """The offload's XCONs and 5-tuple rules; ``ends``: each flow's own host ports (default: ``src`` →
        ``dst`` for all), so several host pairs between the same two switches share the circuit."""
        xcons = tuple(XconSpec(a.split(":")[0], int(a.split(":")[1]), int(b.split(":")[1])) for a, b in c.xcons)
        a_end, b_end = (c.a, c.a_port), (c.b, c.b_port)
        if a_end[0] != src[0]:
            a_end, b_end = b_end, a_end
        circuit_end = {a_end[0]: a_end[1], b_end[0]: b_end[1]}
        band = rule_plan.STEER
        prio = band.priority()
        egress, ingress = [], []
        where = [(f, *(ends or {}).get(f, (src, dst))) for f in flows]
        for f, s, d in where:  # forward rules first in each list (verification reads [0])
            ingress.append(FlowRule(s[0], band.name, ident, prio, five_tuple_match(f, s[1]), circuit_end[s[0]]))
            egress.append(FlowRule(d[0], band.name, ident, prio, five_tuple_match(f, circuit_end[d[0]]), d[1]))
        for f, s, d in where:  # the reverse direction (TCP acks), in at the destination host port
            ingress.append(FlowRule(d[0], band.name, ident, prio, five_tuple_match(f, d[1], True), circuit_end[d[0]]))
            egress.append(FlowRule(s[0], band.name, ident, prio, five_tuple_match(f, circuit_end[s[0]], True), s[1]))
        return Offload(ident, tuple(flows), c.id, xcons, (a_end, b_end), tuple(egress), tuple(ingress),
                       float(c.capacity), float(c.setup_time), now)

    def _gone(self, ev: Event) -> list[Decision]:
        out = []
        for off in list(self.offloads.values()):
            if not set(ev.flows) & set(off.flows):
                continue
            rest = tuple(f for f in off.flows if f not in ev.flows)
            if rest:  # others still use the circuit: keep it
                out.append(Decision(SKIP, f"{len(rest)} other elephant(s) still on circuit {off.circuit_id}",
                                    tuple(ev.flows)))
                continue
            out.append(self._release(off, "elephant gone"))
        return out

    def broken(self, off: Offload, cause: str) -> Decision:
        """A failure darkened the offload's circuit: release it. Its elephants go back to the default
        path (forwarding re-routes around the failure); the next imbalance places them again."""
        return self._release(off, f"failure ({cause})")

    @staticmethod
    def _release(off: Offload, why: str) -> Decision:
        plan = planner.release(off.xcons, list(off.egress), list(off.ingress), drain=False,
                               plan_id=f"release{off.ident}")
        return Decision(RELEASE, f"{why}: release circuit {off.circuit_id} and its rules", off.flows, plan, off)

    # ---- restart and takeover (app/te/takeover.py) ------------------------------------------------
    def adopt(self, off: Offload, moved_at: float) -> None:
        """Take over an offload a previous controller made (its record and the switches agree): it is
        released as if this decider had made it; ``moved_at``: when its flows moved, on this ``now``'s clock."""
        off.since = moved_at
        self.offloads[off.ident] = off
        for f in off.flows:
            self.damper.moved(f, moved_at)
        self.skip_ids(off.ident)

    def skip_ids(self, highest: int) -> None:
        """New offloads get ids above ``highest`` (ids of adopted or orphaned rules' cookies)."""
        nxt = next(self._ids)
        self._ids = itertools.count(max(nxt, highest + 1))

    # ---- what the executor did ------------------------------------------------------------------
    def _taken(self, now: float) -> list[tuple[int, set[str]]]:
        """The ports of every offload's circuit: in place, or decided and its plan not done (for at most
        ``UNLIT_S``: an outcome that never comes, a plan the app did not run, frees them)."""
        for ident, (t, _off) in list(self.unlit.items()):
            if now - t > UNLIT_S:
                del self.unlit[ident]
        offs = [*self.offloads.values(), *(off for _t, off in self.unlit.values())]
        return [(off.ident, _offload_ports(off)) for off in offs]

    def done(self, d: Decision, ok: bool, now: float) -> None:
        """Record the outcome of an executed decision (damping counts only moves that happened)."""
        if d.offload is not None:
            self.unlit.pop(d.offload.ident, None)
        if d.offload is None or not ok:
            return
        if d.kind == OFFLOAD:
            self.offloads[d.offload.ident] = d.offload
            for f in d.offload.flows:
                self.damper.moved(f, now)
        elif d.kind == RELEASE:
            self.offloads.pop(d.offload.ident, None)
