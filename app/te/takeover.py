"""Restart and takeover of the TE loop: its offloads and grown circuits as records, and what a new
controller does with them (plain code, no os-ken; docs/te-loop.md "Restart and takeover").

A TE circuit lives on the switches (XCONs on the OTSes, ``steer``/``split`` rules on the packet
switches, both kept while no controller is connected) but its *owner* — the decider that releases it
once its elephant has gone or its link is calm — lives in one controller process. A restarted
controller (or the next leader) that does not know it leaves it lit for ever, and every later offload
between the same switches is skipped for want of a free circuit (issue 24). So:

- every offload and grown circuit is a :class:`TeRecord` in a store (:mod:`app.te.store`), written
  *before* its plan runs (state ``opening``), marked ``lit`` once the plan is done, ``releasing`` before
  its release plan runs and removed once that is done; the controller's epoch is on it;
- a new controller reads the switches back (:class:`SwitchState`: the TE bands' rules, the applied
  XCONs, the lit circuits) and :func:`adopt` decides, per record: **keep** (``lit`` and every XCON
  direction and rule of it is on the switches: it goes back to its decider, whose counters decide
  the release as before) or **release** what of it is there (a record ``opening``/``releasing``, or
  one the switches contradict: XCONs without rules, rules without XCONs); and TE rules no record
  explains (a lost store, another controller's) are **orphans**: released with the lit circuit they
  steer into. A record none of whose parts is left is **forgotten**. Each release is one plan, built
  once by this pass: nothing is released twice, nothing lit is left without an owner.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.te.decisions import OFFLOAD, Offload
from app.te.growth import Growth
from app.update import planner
from app.update.model import FlowRule, Port, XconSpec
from app.update.plan import Plan
from topology import rule_plan
from topology.flow import FiveTuple

GROWTH = "growth"  # record kinds: OFFLOAD (app.te.decisions) and this
OPENING, LIT, RELEASING = "opening", "lit", "releasing"  # record states
STATES = (OPENING, LIT, RELEASING)
BAND_OF_KIND = {OFFLOAD: rule_plan.STEER, GROWTH: rule_plan.SPLIT}
TE_BANDS = tuple(BAND_OF_KIND.values())


class RecordError(ValueError):
    """A stored record that cannot be read back (another format, a missing or bad field)."""


@dataclass(frozen=True)
class TeRecord:
    """One offload or grown circuit as the store keeps it (``since``: wall-clock seconds)."""

    kind: str  # OFFLOAD | GROWTH
    body: Offload | Growth
    state: str = OPENING
    since: float = 0.0
    threshold_mbps: float = 0.0  # offloads: the elephant rate below which its flows count as gone
    epoch: int | None = None  # the leader's epoch that wrote it (None: a controller without election)

    @property
    def ident(self) -> int:
        return self.body.ident

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.body.ident)

    @property
    def owner(self) -> str:
        """The plan runner's owner of the circuit's ports (as the TE app names it)."""
        return f"te:{self.ident}" if self.kind == OFFLOAD else f"grow:{self.ident}"

    @property
    def ends(self) -> tuple[Port, Port]:
        return self.body.ends if isinstance(self.body, Offload) else self.body.new_ends

    @property
    def xcons(self) -> tuple[XconSpec, ...]:
        return self.body.xcons

    @property
    def ingress(self) -> tuple[FlowRule, ...]:
        return self.body.ingress

    @property
    def egress(self) -> tuple[FlowRule, ...]:
        return self.body.egress

    def nodes(self) -> set[str]:
        """Every switch and OTS the record has something on."""
        return {r.switch for r in self.ingress + self.egress} | {x.ots for x in self.xcons}

    def to_json(self) -> dict[str, Any]:
        b = self.body
        body: dict[str, Any] = {"ident": b.ident, "circuit": b.circuit_id, "xcons": [x.to_json() for x in b.xcons],
                                "ingress": [r.to_json() for r in b.ingress],
                                "egress": [r.to_json() for r in b.egress], "capacity_mbps": b.capacity_mbps,
                                "setup_s": b.setup_s}
        if isinstance(b, Offload):
            body |= {"flows": [f.as_dict() for f in b.flows], "ends": [list(e) for e in b.ends]}
        else:
            body |= {"link": b.link, "ends": [list(e) for e in b.ends], "new_ends": [list(e) for e in b.new_ends],
                     "base_mbps": b.base_mbps, "share": b.share}
        return {"kind": self.kind, "state": self.state, "since": self.since, "threshold_mbps": self.threshold_mbps,
                "epoch": self.epoch, "body": body}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TeRecord:
        try:
            kind, state, b = d["kind"], d.get("state", LIT), d["body"]
            if kind not in BAND_OF_KIND:
                raise RecordError(f"unknown record kind {kind!r}")
            if state not in STATES:
                raise RecordError(f"unknown record state {state!r}")
            xcons = tuple(XconSpec.from_json(x) for x in b["xcons"])
            ingress = tuple(FlowRule.from_json(r) for r in b["ingress"])
            egress = tuple(FlowRule.from_json(r) for r in b["egress"])
            ends = _ends(b["ends"])
            body: Offload | Growth
            if kind == OFFLOAD:
                body = Offload(int(b["ident"]), tuple(FiveTuple.from_dict(f) for f in b["flows"]), str(b["circuit"]),
                               xcons, ends, egress, ingress, float(b["capacity_mbps"]), float(b["setup_s"]))
            else:
                body = Growth(int(b["ident"]), str(b["link"]), ends, str(b["circuit"]), xcons, _ends(b["new_ends"]),
                              float(b["base_mbps"]), float(b["capacity_mbps"]), float(b["share"]), ingress, egress,
                              float(b["setup_s"]))
            epoch = d.get("epoch")
            return cls(kind, body, state, float(d.get("since", 0.0)), float(d.get("threshold_mbps", 0.0)),
                       None if epoch is None else int(epoch))
        except RecordError:
            raise
        except (KeyError, TypeError, ValueError) as exc:  # ModelError is a ValueError
            raise RecordError(f"not a TE record: {exc!r}") from None


def _ends(v: Any) -> tuple[Port, Port]:
    (a, ap), (b, bp) = v
    return (str(a), int(ap)), (str(b), int(bp))


def offload_record(off: Offload, *, state: str = OPENING, since: float = 0.0, threshold_mbps: float = 0.0,
                   epoch: int | None = None) -> TeRecord:
    return TeRecord(OFFLOAD, off, state, since, threshold_mbps, epoch)


def growth_record(g: Growth, *, state: str = OPENING, since: float = 0.0, epoch: int | None = None) -> TeRecord:
    return TeRecord(GROWTH, g, state, since, 0.0, epoch)


# ---- what the switches hold ----------------------------------------------------------------------
@dataclass(frozen=True)
class SwitchState:
    """The network as the new controller read it back.

    ``rules``: packet switch name -> its rules of the TE bands (``steer``, ``split``) as FlowRules (band
    and id from the cookie); a switch missing here did not answer (not connected). ``xcons``: OTS name ->
    its applied XCON directions ``in_port -> out_port``; missing = not connected / not read back.
    ``circuits``: lit circuits (their XCON hops) by each of their two packet end ports, those held by a
    reservation left out (an orphan rule must never take a reservation's circuit down with it)."""

    rules: Mapping[str, Iterable[FlowRule]]
    xcons: Mapping[str, Mapping[int, int]]
    circuits: Mapping[Port, tuple[XconSpec, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Release:
    """A release plan the adoption decided, with why (``record`` None: orphans no record explains)."""

    reason: str
    plan: Plan
    record: TeRecord | None = None
    owner: str = ""


@dataclass
class Adoption:
    """:func:`adopt`'s answer."""

    keep: list[TeRecord] = field(default_factory=list)  # back to their deciders, state lit
    release: list[Release] = field(default_factory=list)  # run once, through the normal release path
    forget: list[TeRecord] = field(default_factory=list)  # nothing of it left: remove from the store
    deferred: list[TeRecord] = field(default_factory=list)  # a node of it did not answer: left as stored
    max_ident: dict[str, int] = field(default_factory=dict)  # kind -> highest id seen (new ids go above)


def _xcon_dirs(x: XconSpec) -> tuple[tuple[int, int], tuple[int, int]]:
    return (x.in_port, x.out_port), (x.out_port, x.in_port)


def _present_xcons(xs: Iterable[XconSpec], held: Mapping[str, Mapping[int, int]]) -> tuple[list[XconSpec], bool]:
    """The XCONs of which at least one direction is applied, and whether every direction of all is."""
    some, whole = [], True
    for x in xs:
        dirs = [held.get(x.ots, {}).get(a) == b for a, b in _xcon_dirs(x)]
        if any(dirs):
            some.append(x)
        whole = whole and all(dirs)
    return some, whole


def _rule_index(rules: Mapping[str, Iterable[FlowRule]]) -> dict[tuple[Any, ...], FlowRule]:
    return {(*r.key(), r.cookie): r for rs in rules.values() for r in rs}


def _release_plan(xcons: list[XconSpec], egress: list[FlowRule], ingress: list[FlowRule], plan_id: str) -> Plan:
    return planner.release(xcons, egress, ingress, drain=False, plan_id=plan_id)


def adopt(records: Iterable[TeRecord], state: SwitchState, live: Iterable[TeRecord] = ()) -> Adoption:
    """Decide, once, what a new controller does with the stored records and what the switches hold.

    Per record: ``lit`` with every rule (same key, cookie and output) and both directions of every
    XCON on the switches → keep; otherwise the parts that are there are released (ingress rules, then
    egress rules, then XCONs: :func:`app.update.planner.release`); nothing there → forget. A record on
    a node that did not answer is deferred (left in the store for a later pass). TE rules no record
    explains are released per (band, id), with the lit circuit they steer into or out of. ``live``: records
    of the deciding controller itself (written since it started): not decided here, but their rules are
    explained and their circuits never an orphan's."""
    out = Adoption()
    records, live = list(records), list(live)
    index = _rule_index(state.rules)
    explained: set[tuple[Any, ...]] = {(*r.key(), r.cookie) for rec in live for r in rec.ingress + rec.egress}
    for rec in sorted(records, key=lambda r: r.key):
        out.max_ident[rec.kind] = max(out.max_ident.get(rec.kind, 0), rec.ident)
        missing = {n for n in rec.nodes() if n not in state.rules and n not in state.xcons}
        if missing:
            out.deferred.append(rec)
            explained |= {(*r.key(), r.cookie) for r in rec.ingress + rec.egress}
            continue
        def there(rs: tuple[FlowRule, ...]) -> list[FlowRule]:
            return [r for r in rs if (got := index.get((*r.key(), r.cookie))) is not None and got.out_port == r.out_port]

        ingress, egress = there(rec.ingress), there(rec.egress)
        explained |= {(*r.key(), r.cookie) for r in ingress + egress}
        xcons, whole = _present_xcons(rec.xcons, state.xcons)
        if rec.state == LIT and whole and len(ingress) == len(rec.ingress) and len(egress) == len(rec.egress):
            out.keep.append(rec)
            continue
        if not (ingress or egress or xcons):
            out.forget.append(rec)
            continue
        if rec.state != LIT:
            why = f"its {'provisioning' if rec.state == OPENING else 'release'} did not finish before the restart"
        else:
            lost = [f"{len(rec.ingress) - len(ingress)} ingress rule(s)" if len(ingress) < len(rec.ingress) else "",
                    f"{len(rec.egress) - len(egress)} egress rule(s)" if len(egress) < len(rec.egress) else "",
                    "XCON direction(s)" if not whole else ""]
            why = "the switches no longer hold " + ", ".join(x for x in lost if x)
        plan = _release_plan(xcons, egress, ingress, f"takeover-release-{rec.kind}{rec.ident}")
        out.release.append(Release(f"{rec.kind} {rec.ident} on circuit {rec.body.circuit_id}: {why}", plan, rec,
                                   rec.owner))
    owned = {(x.ots, p) for rec in records + live for x in rec.xcons for p in x.ports}  # a record's circuit is its own
    circuits = {end: xs for end, xs in state.circuits.items() if not {(x.ots, p) for x in xs for p in x.ports} & owned}
    out.release += _orphans([r for k, r in index.items() if k not in explained], circuits, out.max_ident)
    return out


def _orphans(rules: list[FlowRule], circuits: Mapping[Port, tuple[XconSpec, ...]],
             max_ident: dict[str, int]) -> list[Release]:
    """TE rules no record explains, per (band, id): rules that output into a lit circuit's end are its
    ingress (removed first), the rest egress; the circuits they lead into or come out of go too."""
    groups: dict[tuple[str, int], list[FlowRule]] = {}
    for r in rules:
        groups.setdefault((r.band, r.ident), []).append(r)
    kind_of = {b.name: k for k, b in BAND_OF_KIND.items()}
    out = []
    for (band, ident), rs in sorted(groups.items()):
        kind = kind_of[band]
        max_ident[kind] = max(max_ident.get(kind, 0), ident)
        ingress = [r for r in rs if (r.switch, r.out_port) in circuits]
        egress = [r for r in rs if r not in ingress]
        ends = {(r.switch, r.out_port) for r in ingress} | {
            (r.switch, int(dict(r.match)["in_port"])) for r in egress if "in_port" in dict(r.match)}
        xcons: dict[XconSpec, None] = {}
        for end in sorted(ends):
            for x in circuits.get(end, ()):
                xcons[x] = None
        plan = _release_plan(list(xcons), egress, ingress, f"takeover-orphan-{band}{ident}")
        why = (f"orphan {band} rules of id {ident} ({len(rs)} rule(s) on {', '.join(sorted({r.switch for r in rs}))})"
               f" and {len(xcons)} XCON(s): no stored record owns them")
        out.append(Release(why, plan, None, f"te-orphan:{band}:{ident}"))
    return out


def rule_from_stat(switch: str, cookie: int, priority: int, match: Mapping[str, Any] | Iterable[tuple[str, Any]],
                   out_ports: Iterable[int], table: int = 0) -> FlowRule | None:
    """A read-back rule of a TE band as a FlowRule (None: not a TE band, or not one output)."""
    band = rule_plan.band_of(cookie)
    ports = list(out_ports)
    if band not in TE_BANDS or band is None or len(ports) != 1:
        return None
    pairs = match.items() if isinstance(match, Mapping) else match
    return FlowRule(switch, band.name, rule_plan.cookie_id(cookie), priority,
                    tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in pairs), ports[0], table)


def circuits_by_end(circuits: Iterable[tuple[Port, Port, Iterable[tuple[str, int, int]]]],
                    held: Iterable[Port] = ()) -> dict[Port, tuple[XconSpec, ...]]:
    """``(a end, z end, XCON hops)`` of lit circuits -> by end port, those with an end in ``held``
    (a reservation's) left out."""
    held = set(held)
    out: dict[Port, tuple[XconSpec, ...]] = {}
    for a, z, hops in circuits:
        if a in held or z in held:
            continue
        xs = tuple(XconSpec(o, int(i), int(j)) for o, i, j in hops)
        out[a] = out[z] = xs
    return out


def with_state(rec: TeRecord, state: str, **kw: Any) -> TeRecord:
    return replace(rec, state=state, **kw)
