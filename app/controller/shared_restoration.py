"""A shared circuit is one failure unit (grooming, issue 28): when a circuit several reservations ride
goes dark, they are restored together.

Plain code (no os-ken). Restoring each rider on its own would run N plans that compete: each takes
its rules down, the circuit's XCONs stay until the last one leaves (the others still "use" it), and
each lights a replacement circuit of its own around ports the others just took — N circuits where
one did, or a late rider left with no path at all. Instead:

- :func:`failure_units` groups the broken reservations by the circuits they share (transitively: two
  reservations sharing a circuit with a third are one unit); a reservation sharing nothing is a unit
  of one and keeps the one-reservation restoration (:meth:`ReservationManager.restore`).
- :func:`restore_together` takes the unit down by **one** release plan (every rider's rules, then the
  XCONs no reservation outside the unit uses), places the riders again one after the other, the
  widest first, with the grooming PCE (``PathRequest(groom=True)``) over the bookings of the riders
  already placed — so a later rider rides the replacement circuit when its capacity minus what is
  placed on it leaves room, and lights another one only when it does not (the unit is split) — and
  lights everything by **one** ordered plan (each new XCON once, every rider's transit and ingress
  rules, data-plane verification with every rider's probe frames). A rider with no path left is
  DEGRADED on its own (retried as any DEGRADED reservation); the others go on.

A unit's riders are not revertive: they are restored onto a circuit they share again, and moving them
back one by one would split them; a 1+1 reservation is never part of a unit (its own restoration
re-protects it).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.controller import groomed_circuits, protected_circuits
from app.controller.failures import Failures, broken_by
from app.controller.reservation_circuits import (
    ReservationCircuit,
    ReservationPathError,
    circuit_for,
    held_oports,
    without_circuit_links,
)
from app.controller.reservation_manager import (
    OWNER,
    Outcome,
    ReservationManager,
    _vlan,
    circuit_records,
    failed_step,
    metered,
    rule_record,
)
from app.update import planner
from app.update.model import FlowRule, Port, XconSpec
from app.update.plan import Plan, PlanError
from topology import rule_plan


@dataclass(frozen=True)
class FailureUnit:
    """Reservations a failure broke that share a circuit: restored together (``ids`` ascending)."""

    ids: tuple[int, ...]
    cause: str  # the first rider's cause (the same failure for all of them)

    @property
    def shared(self) -> bool:
        return len(self.ids) > 1


def _components(keys: Mapping[int, Iterable[Hashable]]) -> list[tuple[int, ...]]:
    """The ids grouped so that two sharing a key are in one group (connected components), ascending."""
    parent = {i: i for i in keys}

    def root(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    first_of: dict[Hashable, int] = {}
    for i in sorted(keys):
        for k in keys[i]:
            a, b = root(i), root(first_of.setdefault(k, i))
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in sorted(keys):
        groups.setdefault(root(i), []).append(i)
    return [tuple(ids) for _r, ids in sorted(groups.items())]


def failure_units(active: Mapping[int, ReservationCircuit], f: Failures,
                  skip: Iterable[int] = ()) -> list[FailureUnit]:
    """The lit reservations ``f`` broke (but those in ``skip``: being restored already, or 1+1 ones
    running unprotected), grouped by the circuits they share (connected components)."""
    skip = set(skip)
    causes = {rid: why for rid, c in sorted(active.items())
              if rid not in skip and (why := broken_by(c.xcons, c.packet_ports, f)) is not None}
    comps = _components({rid: [s for s in groomed_circuits.segment_ids(active[rid]) if s] for rid in causes})
    return [FailureUnit(ids, causes[ids[0]]) for ids in comps]


def retry_units(orders: Sequence[Any]) -> list[list[Any]]:
    """Reservations to retry (DEGRADED: nothing lit), grouped by the circuits of their stored paths:
    riders of one circuit that a failure left with no path come back together — one by one, the
    first would take the circuit ports the others need (Fig. 2: A has two). 1+1 ones alone."""
    by_id = {o.id: o for o in orders}
    keys = {o.id: ([] if protected_circuits.is_protected(o) else
                   [frozenset(map(str, x)) for x in (o.path or {}).get("xcons") or []]) for o in orders}
    return [[by_id[i] for i in ids] for ids in _components(keys)]


# ---- the plans (values) --------------------------------------------------------------------------------
def _unique_xcons(xs: Iterable[XconSpec]) -> list[XconSpec]:
    out: dict[groomed_circuits.XconId, XconSpec] = {}
    for x in xs:
        out.setdefault(groomed_circuits.xcon_id(x), x)
    return list(out.values())


def _unique_rules(rs: Iterable[FlowRule]) -> list[FlowRule]:
    return list(dict.fromkeys(rs))


def combined(ident: int, circuits: Sequence[ReservationCircuit]) -> ReservationCircuit:
    """The riders' circuits as one (each XCON and segment once, every rider's rules): what one plan
    lights or takes down, and whose ingress rules the verification's probe frames enter at."""
    segs: dict[frozenset[Port], tuple[tuple[Port, Port], tuple[XconSpec, ...]]] = {}
    for c in circuits:
        for seg, xs in zip(c.segments, c.segment_xcons, strict=True):
            segs.setdefault(frozenset(seg), (seg, xs))
    return ReservationCircuit(ident, tuple(_unique_xcons(x for c in circuits for x in c.xcons)),
                              tuple(s for s, _ in segs.values()), tuple(xs for _, xs in segs.values()),
                              tuple(_unique_rules(r for c in circuits for r in c.transit)),
                              tuple(_unique_rules(r for c in circuits for r in c.ingress)),
                              min((c.capacity for c in circuits), default=0.0))


def release_plan(broken: Mapping[int, ReservationCircuit], others: Iterable[ReservationCircuit],
                 installed_elsewhere: Iterable[groomed_circuits.XconId] = (), *, plan_id: str | None = None
                 ) -> Plan:
    """One plan that takes a unit down: every rider's ingress rules, then their other rules, then the
    XCONs of theirs that no reservation outside the unit (lit now, ``others``, or recorded as
    installed, ``installed_elsewhere``) uses."""
    c = combined(min(broken), list(broken.values()))
    xcons = groomed_circuits.to_release(c, others, installed_elsewhere)
    return planner.release(xcons, list(c.transit), list(c.ingress), drain=False, plan_id=plan_id)


def provision_plan(circuits: Sequence[ReservationCircuit], lit: Iterable[ReservationCircuit],
                   **opts: Any) -> Plan:
    """One plan that lights the unit again: the XCONs and circuits of the new paths no lit reservation
    has lit (each once) → circuit up → every rider's transit rules → ingress rules → verification."""
    c = combined(min(x.ident for x in circuits), circuits)
    xcons, segs = groomed_circuits.to_light(c, lit)
    return planner.provision(xcons, [p for seg in segs for p in seg], list(segs), list(c.transit), list(c.ingress),
                             **opts)


@dataclass
class Placement:
    """Where one rider goes: its circuit and the path to store, or why it has none."""

    order: Any
    circuit: ReservationCircuit | None = None
    path: dict[str, Any] | None = None
    why: str = ""


def place(graph: Any, orders: Sequence[Any], avoid: Sequence[str], taken: Iterable[str],
          vlan_of: Any) -> list[Placement]:
    """Paths for the riders, the widest first: each one over the grooming PCE with the bookings of the
    riders placed before it, so it rides their new circuits when there is room and lights another
    circuit when there is not. ``taken``: optical ports other circuits hold; ``avoid``: failed ones."""
    from pce.errors import PceError
    from pce.reservation import PathRequest, compute_path

    routing = without_circuit_links(graph)
    exclude = tuple(sorted(set(taken) | set(avoid)))
    books: list[Any] = []
    out = []
    for o in sorted(orders, key=lambda o: (-float(o.bandwidth), o.id)):
        try:
            vlan = vlan_of(o)
            res = compute_path(routing, PathRequest(o.src, o.dst, float(o.bandwidth), o.start, o.end, exclude=exclude,
                                                    groom=vlan is not None, tag=vlan), books)
            c = circuit_for(graph, o.id, o.src, o.dst, res.edges, vlan)
        except (PceError, ReservationPathError, ValueError) as exc:
            out.append(Placement(o, why=str(exc)))
            continue
        books.append(res.booking(str(o.id), o.start, o.end, float(o.bandwidth), tag=vlan))
        out.append(Placement(o, c, res.to_dict()))
    return out


def circuits_of(placed: Sequence[Placement]) -> int:
    """How many circuits the placed riders use (a split unit: more than one)."""
    return len({s for p in placed if p.circuit is not None
                for s in groomed_circuits.segment_ids(p.circuit) if s})


# ---- running it (the manager's store, runner and southbound) -----------------------------------------
def restore_together(m: ReservationManager, orders: Sequence[Any], cause: str, detected: float,
                     avoid: Sequence[str], attempt: int = 1) -> list[Outcome]:
    """Restore the riders of a shared circuit as one unit (module docstring): one release plan, one
    placement, one provision plan; an Outcome per rider."""
    singles = [o for o in orders if protected_circuits.is_protected(o)]
    if singles:  # 1+1 ones (never shared): their own restoration (re-protection)
        rest = [o for o in orders if o not in singles]
        return [m.restore(o, cause, detected, avoid, attempt) for o in singles] + \
            (restore_together(m, rest, cause, detected, avoid, attempt) if rest else [])
    started = m.clock()
    outs: list[Outcome] = []
    riders = []
    for o in orders:
        if m.run_db("mark_restoring", o.id, cause, started):
            riders.append(o)
        else:
            outs.append(Outcome(o.id, "restore", False, "NOT_LIT", "the reservation is not lit any more"))
    if not riders:
        return outs
    ids = [o.id for o in riders]
    for o in riders:
        m.on_event("reservation_restoring", {"reservation_id": o.id, "cause": cause, "attempt": attempt, "unit": ids})
    tries = {o.id: {"cause": cause, "detected_ts": detected, "started_ts": started, "attempt": attempt,
                    "old_path": list((o.path or {}).get("edges") or [])} for o in riders}
    broken = {o.id: m.active[o.id] for o in riders if o.id in m.active}  # (a DEGRADED one has nothing lit)
    elastic = {o.id: m.elastic.get(o.id) for o in riders}
    metered_ids = {rid for rid, c in broken.items() if any(r.meter is not None for r in c.ingress)}
    if m.meter_static:
        metered_ids |= set(ids)
    # 1. the unit down, by one plan
    if broken:
        first = min(broken)
        others = [c for k, c in m.active.items() if k not in broken]
        down_c = combined(first, list(broken.values()))
        elsewhere = map(groomed_circuits.xcon_id, m.run_db("xcons_in_use", groomed_circuits.xcon_tuples(down_c), first, *ids))
        with m.sharing.holding(down_c):
            down = m._run(release_plan(broken, others, elsewhere,
                                       plan_id=f"res{first}-unit-release-{int(m.clock() * 1000)}"),
                          first, down_c, opens=False)
        for rid, c in broken.items():
            m.active.pop(rid, None)  # (what could not be removed stays reserved: the new paths avoid its ports)
            if down.state == "done":
                m.runner.reserve(f"{OWNER}{rid}", ())
                if any(r.meter is not None for r in c.ingress):
                    m._remove_meters(c)
    # 2. the riders placed again, sharing the new circuit while it has room
    g = m.graph()
    placed = place(g, riders, avoid, held_oports(g, m.busy_ports), _vlan)
    ready: list[ReservationCircuit] = []
    for p in placed:
        o = p.order
        if p.circuit is None:
            outs.append(m._degraded(o.id, f"no path around the failure: {p.why}", tries[o.id]))
            continue
        if o.id in metered_ids or getattr(o, "mode", "static") == "elastic":
            state = elastic[o.id] or (m._elastic_state(o) if getattr(o, "mode", "static") == "elastic" else None)
            p.circuit = metered(p.circuit, rule_plan.reservation_meter(o.id))
            if refused := m._set_meters(p.circuit, state.provisioned_mbps if state else float(o.bandwidth)):
                m._remove_meters(p.circuit)
                outs.append(m._degraded(o.id, f"meter: {refused}", tries[o.id]))
                p.circuit = None
                continue
            elastic[o.id] = state
        ready.append(p.circuit)
    live = [p for p in placed if p.circuit is not None]
    if not live:
        return outs
    # 3. everything lit again, by one plan
    up_c = combined(min(c.ident for c in ready), ready)
    try:
        with m.sharing.holding(up_c):
            plan = provision_plan(ready, [c for k, c in m.active.items() if k not in broken],
                                  **m._plan_options(up_c.ident, "unit-restore"))
            record = m._run(plan, up_c.ident, up_c, opens=True)
    except (PlanError, ValueError) as exc:  # (riders' rules that collide: not expected of VLAN sharers)
        record = None
        why = f"no joint plan: {exc}"
    if record is None or record.state != "done":
        why = why if record is None else f"lighting the new paths failed at {failed_step(record)}; rolled back"
        for p in live:
            if p.order.id in metered_ids or elastic.get(p.order.id) is not None:
                m._remove_meters(p.circuit)  # type: ignore[arg-type]
            outs.append(m._degraded(p.order.id, why, tries[p.order.id], record.to_json() if record else None))
        return outs
    n = circuits_of(live)
    for p in live:
        o, new = p.order, p.circuit
        assert new is not None and p.path is not None
        m.active[o.id] = new
        m.runner.reserve(f"{OWNER}{o.id}", new.packet_ports)
        state = elastic.get(o.id)
        if state is not None and getattr(o, "mode", "static") == "elastic":
            m.elastic[o.id] = state
        ok = m.run_db("mark_restored", o.id, circuit_records(new), [rule_record(r) for r in new.rules], p.path,
                      {**tries[o.id], "new_path": list(p.path.get("edges") or [])}, m.clock())
        if not ok:  # cancelled or ended while we were restoring it: take it down again (its share only)
            rel = m.release_circuit(o.id, new)
            outs.append(Outcome(o.id, "restore", False, "RELEASED" if rel.ok else "LEFT",
                                "the reservation ended while it was being restored; released", record.to_json()))
            continue
        out = Outcome(o.id, "restore", True, "ACTIVE", plan=record.to_json())
        m.on_event("reservation_restored", out.to_json() | {"cause": cause, "circuit": new.to_json(), "unit": ids,
                                                             "circuits": n, "took_s": round(m.clock() - detected, 3)})
        outs.append(out)
    return sorted(outs, key=lambda x: x.reservation_id)

