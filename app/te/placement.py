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
  (:func:`~app.te.decisions.five_tuple_match`, :func:`~app.te.decisions.host_port`).

Wiring (for the TE app): on each monitor tick, ``if policy.due(now)``: ``flows = flows_from_monitor(...)
+ flows_from_reservations(...)``; ``placement = policy.place(graph, flows, now)``; ``plan =
placement_plan(placement, ident)``; hand the plan to the executor and call ``policy.done(placement)``
when it succeeded (only then do the new paths become PATHPIN state).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.controller import rule_plan
from app.te.decisions import HostNotFound, five_tuple_match, host_port
from app.update import planner
from app.update.model import FlowRule, IngressChange, Port, XconSpec
from app.update.plan import Plan
from monitor.events import FlowLike
from monitor.sflow.records import FiveTuple
from pce.otter.graph import POLICIES, CandidatePath, GraphPlacement, place
from pce.otter.graph_flows import ClassRules, GraphFlow, resolve_endpoint

DEFAULT_PERIOD_S = 30.0


def flows_from_monitor(graph: Any, rates: Iterable[FlowLike], rules: ClassRules
                       ) -> tuple[list[GraphFlow], list[str]]:
    """Monitored flows (``key`` 5-tuple, ``mbps``, optional ``vlan``) between learnt hosts; returns
    (flows, why each other one was left out)."""
    out, skipped = [], []
    for fl in rates:
        key: FiveTuple = fl.key
        if not fl.mbps > 0:
            continue
        try:
            (ssw, sport), (dsw, dport) = host_port(graph, key.src), host_port(graph, key.dst)
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
    optional src_vlan) as flows of their reserved bandwidth."""
    out = []
    g = getattr(graph, "g", graph)
    for r in reservations:
        if not _field(r, "start_ts") <= now < _field(r, "end_ts"):
            continue
        rid = str(_field(r, "id"))
        (ssw, sport), (dsw, dport) = resolve_endpoint(g, _field(r, "src")), resolve_endpoint(g, _field(r, "dst"))
        vlan = r.get("src_vlan") if isinstance(r, Mapping) else getattr(r, "src_vlan", None)
        out.append(GraphFlow(f"resv:{rid}", ssw, dsw, float(_field(r, "bandwidth")),
                             rules.classify(reservation=rid, vlan=vlan), sport, dport, None, vlan, rid))
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

    def place(self, graph: Any, flows: Sequence[GraphFlow], now: float) -> GraphPlacement:
        """Place ``flows``; a flow without a ``path`` of its own is pinned to the one it was installed on."""
        known = [f if f.path is not None or f.id not in self.paths else _with_path(f, self.paths[f.id])
                 for f in flows]
        self.last_run = now
        return place(graph, known, self.rules, self.name, **self.options)

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
    from dataclasses import replace

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
