"""A 1+1 protected reservation in the network: both paths lit, the ingress switches failing over alone.

Plain code (no os-ken). A reservation with ``protection: "1+1"`` stores two fibre-disjoint paths
(``path`` and ``path["protection"]``, :mod:`pce.protection`). Both are lit for the whole window:
XCONs and transit rules on both, and at the far end a rule for each arrival port. At each endpoint
switch the ingress rule outputs to an OpenFlow 1.3 fast-failover group (:func:`topology.rule_plan.reservation_group`)
whose buckets are the working port, then the protection port: when the working port loses light the
switch sends on the protection port by itself, with no controller message (SONET-style protection
switching, tens of milliseconds instead of a restoration's provisioning delay).

The result is one :class:`~app.controller.reservation_circuits.ReservationCircuit` (both paths'
XCONs, segments and rules; ingress rules naming the group) plus its groups, so the reservation
manager records, adopts and releases it like any other; :func:`provision_plan` puts the groups in
before the ingress rules and verifies on the working path only (the protection path carries no
traffic while the working one is up); :func:`groups_of` reads the groups back from a lit circuit
(a release removes them after the ingress rules). After a failure the switches already carry the
traffic on the survivor; :func:`reprotect_plans` then takes the failed path down and lights a new
protection path (:func:`pce.protection.reprotect`), re-setting the groups survivor first;
:func:`reprotection` is the whole decision for the restoration code (which path survived, the new
path, the path to store, the plans).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.controller.reservation_circuits import (
    ReservationCircuit,
    ReservationPathError,
    circuit_for,
    held_oports,
)
from app.update import planner
from app.update.model import FlowRule, GroupSpec, IngressChange
from app.update.plan import ADD, GroupStep, Plan
from topology import rule_plan
from topology.graph import MultiLayerGraph

PROTECTED = "1+1"


def is_protected(order: Any) -> bool:
    """Whether a reservation (or order) asks for 1+1 protection."""
    return getattr(order, "protection", "none") == PROTECTED


@dataclass(frozen=True)
class ProtectedCircuit:
    """What a 1+1 reservation installs: ``circuit`` (both paths, ingress rules pointing at the groups),
    the fast-failover ``groups``, and the two paths alone (``working``, ``protection``)."""

    circuit: ReservationCircuit
    groups: tuple[GroupSpec, ...]
    working: ReservationCircuit
    protection: ReservationCircuit

    def to_json(self) -> dict[str, Any]:
        return {**self.circuit.to_json(), "groups": [g.to_json() for g in self.groups],
                "working": self.working.to_json(), "protection": self.protection.to_json()}


def protected_circuit(g: MultiLayerGraph, ident: int, src: str, dst: str, working_edges: list[str],
                      protection_edges: list[str], vlan: int | None = None) -> ProtectedCircuit:
    """Walk both stored paths and join them: at each endpoint switch one ingress rule to a group whose
    buckets are the working path's port, then the protection path's. ReservationPathError if either
    path does not walk on ``g`` or the two leave an endpoint by the same port (not disjoint)."""
    work = circuit_for(g, ident, src, dst, working_edges, vlan)
    prot = circuit_for(g, ident, src, dst, protection_edges, vlan)
    gid = rule_plan.reservation_group(ident)
    groups: list[GroupSpec] = []
    ingress: list[FlowRule] = []
    for w, p in zip(work.ingress, prot.ingress, strict=True):  # the same endpoint, the same match
        if w.out_port == p.out_port:
            raise ReservationPathError(f"the working and protection paths both leave {w.switch} by port "
                                       f"{w.out_port}: not disjoint")
        groups.append(GroupSpec(w.switch, gid, (w.out_port, p.out_port)))
        ingress.append(dataclasses.replace(w, group=gid))
    both = ReservationCircuit(ident, work.xcons + prot.xcons, work.segments + prot.segments,
                              work.segment_xcons + prot.segment_xcons, work.transit + prot.transit,
                              tuple(ingress), min(work.capacity, prot.capacity))
    return ProtectedCircuit(both, tuple(groups), work, prot)


def provision_plan(pc: ProtectedCircuit, **kw: Any) -> Plan:
    """The provisioning plan of both paths (``kw``: :func:`app.update.planner.provision`'s options):
    XCONs of both → circuit-up of both → transit rules of both and the groups → ingress rules → verify
    on the working path (the ingress rules and the working path's transit rules)."""
    c = pc.circuit
    return planner.provision(c.xcons, c.packet_ports, list(c.segments), list(c.transit), list(c.ingress),
                             groups=pc.groups, verify_rules=[*c.ingress, *pc.working.transit], **kw)


def groups_of(c: ReservationCircuit) -> tuple[GroupSpec, ...]:
    """The groups of a lit circuit (none unless 1+1), read back from its ingress rules: the rule's port
    first, then the endpoint switch's other circuit port (the release removes them after the ingress
    rules; a re-protection restores them on a roll-back)."""
    out = []
    for r in c.ingress:
        if r.group is not None:
            others = sorted(p for sw, p in c.packet_ports if sw == r.switch and p != r.out_port)
            out.append(GroupSpec(r.switch, r.group, (r.out_port, *others)))
    return tuple(out)


def reprotect_plans(old: ReservationCircuit, new: ProtectedCircuit, **kw: Any) -> tuple[Plan, Plan]:
    """After the working (or protection) path failed, the two plans that protect the reservation again:

    1. take down what ``old`` (the lit pair) has and ``new`` does not keep: the failed path's XCONs and
       rules. It carries no traffic (the ingress switches already send on the survivor), and its
       ports may be what the new path needs, so this goes first (break before make);
    2. light ``new.protection`` (XCONs → circuit up → its rules), re-set the groups with the
       survivor first (``old``'s groups restored on a roll-back), re-write the ingress rules to name
       the survivor as their first port, and verify on the survivor (``kw``: the planner's options).

    ``new`` is :func:`protected_circuit` with the surviving path's edges as the working path and
    :func:`pce.protection.reprotect`'s path as the protection path."""
    keep_x, keep_r = set(new.circuit.xcons), set(new.circuit.rules)
    down = planner.release([x for x in old.xcons if x not in keep_x], [r for r in old.transit if r not in keep_r],
                           [], drain=False, plan_id=f"{kw.get('plan_id') or f'res{old.ident}-reprotect'}-down")
    down = _pinned(down, new.groups, groups_of(old))
    olds = {r.key(): r for r in old.ingress}
    ingress = [IngressChange(r, olds.get(r.key())) for r in new.circuit.ingress]
    lit = set(old.xcons)
    up = planner.provision([x for x in new.protection.xcons if x not in lit], new.protection.packet_ports,
                           list(new.protection.segments), [r for r in new.circuit.transit if r not in set(old.transit)],
                           ingress, groups=new.groups, old_groups=groups_of(old),
                           verify_rules=[*new.circuit.ingress, *new.working.transit], **kw)
    return down, up


def _pinned(plan: Plan, groups: Sequence[GroupSpec], old: Sequence[GroupSpec]) -> Plan:
    """``plan`` after the groups are first pinned to the survivor alone (their first port): otherwise
    the new protection path's end port, lit again by its new XCON before its rules are in, would
    come back up as the groups' first live bucket and the switch would send traffic into it."""
    was = {(g.switch, g.group_id): g for g in old}
    pins = [GroupStep(id=f"pin{g.switch}.{g.group_id}", op=ADD, group=GroupSpec(g.switch, g.group_id, g.ports[:1]),
                      restore=was.get((g.switch, g.group_id))) for g in groups]
    ids = frozenset(p.id for p in pins)
    steps = [*pins, *(s if s.deps else dataclasses.replace(s, deps=ids) for s in plan.steps)]
    return dataclasses.replace(plan, steps=tuple(steps))


@dataclass(frozen=True)
class Reprotection:
    """What re-protecting a 1+1 reservation after a failure takes: the new pair, the path to store
    (the survivor, the new protection path under ``"protection"``) and the two plans, in order."""

    new: ProtectedCircuit
    path: dict[str, Any]
    down: Plan
    up: Plan


def reprotection(g: MultiLayerGraph, order: Any, lit: ReservationCircuit, avoid: Sequence[str],
                 busy_ports: Callable[[str], set[int]] = lambda _ots: set(), **plan_kw: Any) -> Reprotection:
    """Protect a lit 1+1 reservation again after the optical ports ``avoid`` failed (the restoration's
    entry point): the stored path that crosses none of them survives (and becomes the working path),
    :func:`pce.protection.reprotect` finds a new protection path around it, ``avoid`` and every port
    another circuit holds (the failed path's own ports may be reused: :func:`reprotect_plans` takes it
    down first). ReservationPathError when both paths are broken or no new protection path exists."""
    from pce.errors import PceError
    from pce.protection import reprotect
    from pce.reservation import PathRequest

    path = dict(order.path or {})
    prot = dict(path.pop("protection", None) or {})
    broken = set(avoid)
    alive = [p for p in (path, prot) if p.get("edges") and not broken & set(p.get("oports") or ())]
    if not alive:
        raise ReservationPathError(f"both paths of the 1+1 pair are broken (failed: {', '.join(sorted(broken))})")
    survivor = alive[0]
    failed = prot if survivor is path else path
    g = g.copy()  # the failed path's XCONs (and the packet link LLDP may still show over them) go first
    for a, b in failed.get("xcons") or []:  # (break before make): their ports are reusable
        if g.active_xcon_at(a) is not None:
            g.set_xcon_active(a, b, False)
    for e in failed.get("edges") or []:
        if e.startswith("adaptation:"):
            sw, port = e[len("adaptation:"):].split("-")[0].rsplit(":", 1)
            for key in g.edges_at_port(sw, int(port), kinds=("packet",)):
                g.remove_edge(key)
    taken = held_oports(g, busy_ports) - set(failed.get("oports") or ())
    req = PathRequest(order.src, order.dst, order.bandwidth, order.start, order.end, exclude=tuple(sorted(taken)))
    try:
        new_path = reprotect(g, req, survivor["edges"], failed=sorted(broken))
    except PceError as exc:
        raise ReservationPathError(str(exc)) from None
    vlan = getattr(order, "src_vlan", None)
    new = protected_circuit(g, order.id, order.src, order.dst, list(survivor["edges"]), new_path.edges, vlan)
    down, up = reprotect_plans(lit, new, **plan_kw)
    return Reprotection(new, {**survivor, "protection": new_path.to_dict()}, down, up)
