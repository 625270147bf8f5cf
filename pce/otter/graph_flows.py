"""Flows for graph mode: tolerance classes, classification rules and the flow-list file.

Why classes: the monitor sees 5-tuples and rates, reservations see bandwidth and windows; neither
says how a flow tolerates latency, jitter or loss. OTTER needs that as demand functions (paper §4),
so each flow gets a *class* — a named set of tolerance functions — from an explicit ``class``, its
reservation, its VLAN or its transport port, else the default. Two classes always exist:

* ``interactive``: RTT linear from 20 ms (worthless at 40 ms), jitter linear from 5 ms, loss step at
  1e-3 — ssh, DNS, NTP, SIP/RTP, STUN (ports 22, 53, 123, 3478, 5004, 5060) by default;
* ``bulk``: RTT rational from 200 ms, loss rational from 1e-2 — everything else.

A flow's breakpoints are in ms (RTT, jitter) and as a rate (loss, 1e-3 = 0.1%), as in
``pce.otter.instance``; a path's loss is in percent.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pce.errors import InvalidInputError
from pce.otter.demand import METRICS, SHAPE_NAMES
from pce.otter.instance import Fields

Tolerance = tuple[str, float]  # (shape name, breakpoint)
FiveTupleKey = tuple[str, str, int, int, int]  # src IP, dst IP, IP protocol, src port, dst port


@dataclass(frozen=True)
class FlowClass:
    """Named tolerance functions for RTT (ms), jitter (ms) and loss (rate); None = not cared about."""

    name: str
    rtt: Tolerance | None = None
    jitter: Tolerance | None = None
    loss: Tolerance | None = None

    def tolerances(self) -> tuple[Tolerance | None, Tolerance | None, Tolerance | None]:
        return self.rtt, self.jitter, self.loss

    def as_dict(self) -> dict[str, Any]:
        return {m: (None if t is None else {"shape": t[0], "at": t[1]})
                for m, t in zip(METRICS, self.tolerances(), strict=True)}


INTERACTIVE = FlowClass("interactive", ("linear", 20.0), ("linear", 5.0), ("step", 1e-3))
BULK = FlowClass("bulk", ("rational", 200.0), None, ("rational", 1e-2))
#: Transport ports whose flows are interactive unless a rule says otherwise.
DEFAULT_PORT_CLASSES: dict[int, str] = {22: "interactive", 53: "interactive", 123: "interactive",
                                        3478: "interactive", 5004: "interactive", 5060: "interactive"}


@dataclass
class ClassRules:
    """Which class a flow gets: explicit > reservation > VLAN > destination port > source port > default."""

    classes: dict[str, FlowClass] = field(default_factory=lambda: {"interactive": INTERACTIVE, "bulk": BULK})
    ports: dict[int, str] = field(default_factory=lambda: dict(DEFAULT_PORT_CLASSES))
    vlans: dict[int, str] = field(default_factory=dict)
    reservations: dict[str, str] = field(default_factory=dict)
    default: str = "bulk"

    def classify(self, *, explicit: str | None = None, reservation: str | None = None, vlan: int | None = None,
                 match: FiveTupleKey | None = None) -> str:
        if explicit is not None:
            if explicit not in self.classes:
                raise InvalidInputError(f"unknown flow class {explicit!r} (known: {', '.join(sorted(self.classes))})")
            return explicit
        if reservation is not None and reservation in self.reservations:
            return self.reservations[reservation]
        if vlan is not None and vlan in self.vlans:
            return self.vlans[vlan]
        if match is not None:
            for port in (match[4], match[3]):
                if port in self.ports:
                    return self.ports[port]
        return self.default


@dataclass(frozen=True)
class GraphFlow:
    """One flow (a monitored 5-tuple or a reservation) between two packet switches.

    ``src_port``/``dst_port``: the host-facing ports (needed for 5-tuple rules); ``path``: the hop ids
    of the path it is on now (PATHPIN); ``deadline``: seconds within which it must be served (a
    circuit that takes longer to set up is no candidate for it). ``avoid``: hop ids it must not use
    (the TE loop: the congested circuit an elephant was named on); ``hold``: keep it on ``path``
    whatever the gain (damped, or owned by a reservation)."""

    id: str
    src: str
    dst: str
    bw: float
    cls: str
    src_port: int | None = None
    dst_port: int | None = None
    match: FiveTupleKey | None = None
    vlan: int | None = None
    reservation: str | None = None
    deadline: float | None = None
    path: tuple[str, ...] | None = None
    avoid: frozenset[str] = frozenset()
    hold: bool = False


def resolve_endpoint(g: Any, name: str) -> tuple[str, int | None]:
    """(packet switch, host-facing port or None) of a host, a switch or ``switch:port``."""
    node, port = name, None
    if node not in g and ":" in name:
        node, _, p = name.rpartition(":")
        if not p.isdigit():
            raise InvalidInputError(f"endpoint {name!r}: port {p!r} is not a number")
        port = int(p)
    if node not in g:
        raise InvalidInputError(f"unknown endpoint {name!r}")
    kind = g.nodes[node].get("kind")
    if kind == "packet":
        return node, port
    if kind == "host":
        for _, _, d in g.edges(node, data=True):
            if d.get("kind") == "access":
                (sw, p), = ((n, pp) for n, pp in d["ports"].items() if n != node)
                return sw, int(p)
        raise InvalidInputError(f"host {name!r} is not attached to a switch")
    raise InvalidInputError(f"endpoint {name!r} is an {kind} node, not a switch or host")


CLASS_FIELDS = METRICS
FLOW_FIELDS = ("id", "src", "dst", "rate_mbps", "bandwidth_mbps", "class", "five_tuple", "vlan", "reservation",
               "deadline_s", "start_s", "end_s", "path")
TOP_FIELDS = ("version", "description", "classes", "rules", "default_class", "flows")


def _match(f: Fields, value: Any, path: str) -> FiveTupleKey:
    t = f.obj(value, path, ("src", "dst", "proto", "sport", "dport"))
    proto = t.get("proto")
    if isinstance(proto, bool) or not isinstance(proto, int) or not 0 <= proto <= 255:
        raise f.fail(f"{path}.proto", f"expected an IP protocol number 0..255, got {proto!r}")
    ports = []
    for k in ("sport", "dport"):
        v = t.get(k, 0)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 65535:
            raise f.fail(f"{path}.{k}", f"expected a port 0..65535, got {v!r}")
        ports.append(v)
    return f.name(t.get("src"), f"{path}.src"), f.name(t.get("dst"), f"{path}.dst"), proto, ports[0], ports[1]


def _int_keys(f: Fields, value: Any, path: str, classes: Mapping[str, FlowClass], high: int) -> dict[int, str]:
    out = {}
    for k, v in f.obj(value, path).items():
        if not str(k).isdigit() or not 0 <= int(k) <= high:
            raise f.fail(f"{path}.{k}", f"expected a number 0..{high} as key")
        if v not in classes:
            raise f.fail(f"{path}.{k}", f"unknown class {v!r}")
        out[int(k)] = v
    return out


def rules_from_doc(f: Fields, top: Mapping[str, Any]) -> ClassRules:
    """Classes (the defaults plus the file's, which may redefine them) and the classification rules."""
    rules = ClassRules()
    for name, spec in f.obj(top.get("classes", {}), "classes").items():
        spec = f.obj(spec, f"classes.{name}", CLASS_FIELDS)
        tol = []
        for m in METRICS:
            code, a = f.tolerance(spec.get(m), f"classes.{name}.{m}")
            tol.append(None if spec.get(m) is None else (SHAPE_NAMES[code], a))
        rules.classes[name] = FlowClass(name, *tol)
    r = f.obj(top.get("rules", {}), "rules", ("ports", "vlans", "reservations"))
    rules.ports.update(_int_keys(f, r.get("ports", {}), "rules.ports", rules.classes, 65535))
    rules.vlans.update(_int_keys(f, r.get("vlans", {}), "rules.vlans", rules.classes, 4095))
    for k, v in f.obj(r.get("reservations", {}), "rules.reservations").items():
        if v not in rules.classes:
            raise f.fail(f"rules.reservations.{k}", f"unknown class {v!r}")
        rules.reservations[str(k)] = v
    default = top.get("default_class", rules.default)
    if default not in rules.classes:
        raise f.fail("default_class", f"unknown class {default!r}")
    rules.default = default
    return rules


def flows_from_doc(doc: Any, graph: Any, where: str = "flows", now: float | None = None
                   ) -> tuple[list[GraphFlow], ClassRules]:
    """Validate a flow-list document against ``graph`` (schema: docs/otter.md, "Graph mode").

    Entries with a window (``start_s``/``end_s``) outside ``now`` are left out (``now`` None: all)."""
    g = getattr(graph, "g", graph)
    f = Fields(where)
    top = f.obj(doc, "", TOP_FIELDS)
    rules = rules_from_doc(f, top)
    out: list[GraphFlow] = []
    seen: set[str] = set()
    for i, fl in enumerate(f.array(top.get("flows"), "flows")):
        at = f"flows[{i}]"
        fl = f.obj(fl, at, FLOW_FIELDS)
        fid = f.name(fl.get("id", f"f{i}"), f"{at}.id")
        if fid in seen:
            raise f.fail(f"{at}.id", f"duplicate id {fid!r}")
        seen.add(fid)
        ends = []
        for k in ("src", "dst"):
            try:
                ends.append(resolve_endpoint(g, f.name(fl.get(k), f"{at}.{k}")))
            except InvalidInputError as exc:
                raise f.fail(f"{at}.{k}", str(exc)) from None
        if ("rate_mbps" in fl) == ("bandwidth_mbps" in fl):
            raise f.fail(at, "give exactly one of rate_mbps (measured flow) or bandwidth_mbps (reservation)")
        bw_key = "rate_mbps" if "rate_mbps" in fl else "bandwidth_mbps"
        bw = f.number(fl[bw_key], f"{at}.{bw_key}", positive=True)
        match = _match(f, fl["five_tuple"], f"{at}.five_tuple") if fl.get("five_tuple") is not None else None
        vlan = fl.get("vlan")
        if vlan is not None and (isinstance(vlan, bool) or not isinstance(vlan, int) or not 0 <= vlan <= 4095):
            raise f.fail(f"{at}.vlan", f"expected a VLAN id 0..4095, got {vlan!r}")
        resv = f.name(fl["reservation"], f"{at}.reservation") if fl.get("reservation") is not None else None
        start = f.number(fl.get("start_s"), f"{at}.start_s", null_is=-math.inf)
        end = f.number(fl.get("end_s"), f"{at}.end_s", null_is=math.inf)
        if end <= start:
            raise f.fail(f"{at}.end_s", "must be after start_s")
        if now is not None and not start <= now < end:
            continue
        explicit = fl.get("class")
        if explicit is not None and explicit not in rules.classes:
            raise f.fail(f"{at}.class", f"unknown class {explicit!r} (known: {', '.join(sorted(rules.classes))})")
        deadline = fl.get("deadline_s")
        path = fl.get("path")
        if path is not None:
            path = tuple(f.name(h, f"{at}.path[{j}]") for j, h in enumerate(f.array(path, f"{at}.path")))
        out.append(GraphFlow(
            fid, ends[0][0], ends[1][0], bw, rules.classify(explicit=explicit, reservation=resv, vlan=vlan, match=match),
            ends[0][1], ends[1][1], match, vlan, resv,
            None if deadline is None else f.number(deadline, f"{at}.deadline_s"), path))
    return out, rules
