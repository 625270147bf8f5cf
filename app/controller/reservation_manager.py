"""Reservations become network state: light at the start, release at the end (plain logic, no os-ken).

The web service moves a committed reservation to PROVISIONING when its window starts; the
controller follows the shared database (:class:`app.db.provisioning.ProvisioningStore`):

- *provision*: the stored path (or, when one of its optical ports is no longer free, a new path from
  ``pce`` over the live graph) becomes a :class:`~app.controller.reservation_circuits.ReservationCircuit`,
  the update planner orders it (XCONs → circuit up and LLDP link seen → transit rules → ingress rules
  → data-plane verification by probe frames crossing the path), the plan runner
  (:class:`app.controller.plan_runner.PlanRunner`, injected) runs it and rolls it back on any
  failure. ACTIVE with what was installed, or FAILED with the step and the reason — nothing left
  behind.
- *release*: a reservation that ended (FINISHED, CANCELLED, FAILED) with something still installed
  is taken down in reverse order (ingress rules first, then the rest, then the XCONs).
- *elastic* (``mode: elastic``): the ingress rules pass a meter set to one unit before the plan runs;
  :meth:`ReservationManager.elastic_tick` reads the ingress rules' byte counters, asks
  :class:`app.te.elastic.ElasticState` whether to grow or shrink by a unit (never beyond the grant),
  re-sets the meters and records the provisioned bandwidth (``set_provisioned``).

Every plan is recorded (``plans`` table) with per-step times. The runner keeps the circuit's packet
ports reserved (owner ``reservation:ID``) from before the provisioning plan until the release plan,
and writes the plan log and journal. The app (``reservations_app``) only wires this to the hub:
``run_db`` runs a store call off the hub, ``run_parallel`` sets meters as greenthreads.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, Protocol

from app.controller import groomed_circuits, protected_circuits
from app.controller.failures import Failures, path_fault
from app.controller.probed_southbound import ProbedSouthbound
from app.controller.reservation_circuits import (
    ReservationCircuit,
    ReservationPathError,
    check_vlan,
    circuit_for,
    held_oports,
    without_circuit_links,
)
from app.te.elastic import HOLD, ElasticDecision, ElasticState, kbps, rate_mbps
from app.update import model, planner
from app.update.executor import PlanRecord
from app.update.model import FlowRule, IngressChange, Port, XconSpec
from app.update.plan import Plan, PlanError
from app.update.southbound import Southbound
from topology import rule_plan
from topology.graph import MultiLayerGraph

Runner = Callable[[list[Callable[[], Any]]], list[Any]]
OWNER = "reservation:"  # + the reservation id: who holds the circuit's packet ports


class Meters(Southbound, Protocol):
    """The southbound calls the manager makes itself: meters and byte counters of elastic reservations."""

    def set_meter(self, switch: str, meter_id: int, kbps: float) -> model.Outcome: ...

    def remove_meter(self, switch: str, meter_id: int) -> model.Outcome: ...

    def flow_bytes(self, r: FlowRule) -> int | None: ...


class PlanRunning(Protocol):
    """What the manager needs of :class:`app.controller.plan_runner.PlanRunner`."""

    #: the switches' southbound (None until bound): a reservation's probes wrap it per plan
    southbound: Southbound | None

    def run(self, plan: Plan, owner: str, kind: str, *, ports: Sequence[Port] | None = None,
            releases: bool = False, context: Mapping[str, Any] | None = None,
            southbound: Southbound | None = None) -> PlanRecord: ...

    def reserve(self, owner: str, ports: Iterable[Port]) -> bool: ...


#: what the plans table keeps of each step (the executor's ``detail`` stays in the journal)
STEP_FIELDS = ("id", "kind", "target", "deps", "started_at", "finished_at", "ok", "error")
#: a step's target as the plans table keeps it (the store refuses longer): a verify step of a long path
#: names every rule, 9 hops of a WAN reservation ~500 characters; the journal keeps it whole
TARGET_MAX = 256


def step_record(step: dict[str, Any]) -> dict[str, Any]:
    """A step as the plans table keeps it: :data:`STEP_FIELDS`, the target cut to :data:`TARGET_MAX`."""
    out = {k: step.get(k) for k in STEP_FIELDS}
    target = out["target"]
    if isinstance(target, str) and len(target) > TARGET_MAX:
        out["target"] = target[:TARGET_MAX - 1] + "…"
    return out


@dataclass
class Outcome:
    """What one provision or release did (also an event)."""

    reservation_id: int
    action: str  # provision | release | restore | revert
    ok: bool
    state: str  # the reservation's state afterwards as far as we know
    reason: str = ""
    plan: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"reservation_id": self.reservation_id, "action": self.action, "ok": self.ok, "state": self.state,
                "reason": self.reason, "plan_state": self.plan.get("state"), "plan_id": self.plan.get("id")}


def _vlan(order: Any) -> int | None:
    if order.src_vlan != order.dst_vlan:
        raise ReservationPathError(f"VLAN translation ({order.src_vlan} → {order.dst_vlan}) is not supported")
    return check_vlan(order.src_vlan)


def rule_record(r: FlowRule) -> dict[str, Any]:
    """A rule as the provisioning store keeps it (a metered rule: its meter first, as on the wire)."""
    meter = [{"meter": r.meter}] if r.meter is not None else []
    group = {"group": r.group} if r.group is not None else {}  # a failover group; output: its working port
    return {"switch": r.switch, "table": r.table, "priority": r.priority, "cookie": r.cookie,
            "match": r.match_dict(), "actions": [*meter, {**group, "output": r.out_port}]}


def rule_from_record(d: Any) -> FlowRule:
    """Back from :func:`rule_record` (a stored rule of an earlier run or of a controller before a restart)."""
    band = rule_plan.band_of(int(d.cookie))
    if band is None:
        raise ReservationPathError(f"stored rule on {d.switch} has a foreign cookie {int(d.cookie):#x}")
    out = next(int(a["output"]) for a in d.actions if isinstance(a, dict) and "output" in a)
    meter = next((int(a["meter"]) for a in d.actions if isinstance(a, dict) and "meter" in a), None)
    group = next((int(a["group"]) for a in d.actions if isinstance(a, dict) and "group" in a), None)
    return FlowRule(d.switch, band.name, rule_plan.cookie_id(int(d.cookie)), int(d.priority),
                    tuple(d.match.items()), out, int(d.table), meter, group)


def circuit_records(c: ReservationCircuit) -> list[dict[str, Any]]:
    """One stored circuit per lit segment, with its XCONs."""
    return [{"a_end": f"{a[0]}:{a[1]}", "z_end": f"{z[0]}:{z[1]}", "capacity": c.capacity,
             "xcons": [(x.ots, x.in_port, x.out_port) for x in xs]}
            for (a, z), xs in zip(c.segments, c.segment_xcons, strict=True)]


class Original(NamedTuple):
    """A restored reservation's original (admitted) path and its endpoints."""

    src: str
    dst: str
    path: dict[str, Any]


def original_path(order: Any) -> dict[str, Any] | None:
    """The path ``order`` was admitted on: the stored one's ``original`` once it was restored, else the
    stored path itself (None: no stored path)."""
    path = order.path or {}
    if path.get("original"):
        return dict(path["original"])
    return {k: v for k, v in path.items() if k != "original"} if path.get("edges") else None


class ReservationManager:
    """Provision and release reservations through the update planner and the plan runner."""

    def __init__(self, store: Any, southbound: Meters, graph: Callable[[], MultiLayerGraph], runner: PlanRunning, *,
                 run_parallel: Runner, run_db: Callable[..., Any] | None = None,
                 busy_ports: Callable[[str], set[int]] | None = None,
                 on_event: Callable[[str, dict[str, Any]], None] | None = None,
                 probes: Callable[[ReservationCircuit], Callable[[], None]] | None = None,
                 clock: Callable[[], float] = time.time, verify: bool = True,
                 stable_ms: float = planner.DEFAULT_STABLE_MS, circuit_timeout_s: float = 10.0,
                 verify_timeout_s: float = 3.0, elastic: Mapping[str, float] | None = None,
                 active: dict[int, ReservationCircuit] | None = None, revertive: bool = False,
                 meter_static: bool = False, provision_retries: int = 0, provision_retry_s: float = 1.0) -> None:
        self.store = store
        self.southbound = southbound
        self.graph = graph
        self.runner = runner
        self.run_parallel = run_parallel
        # a store call by method name (the app runs it in the DB writer thread)
        self.run_db = run_db or (lambda name, *a: getattr(self.store, name)(*a))
        self.busy_ports = busy_ports or (lambda _ots: set())
        self.on_event = on_event or (lambda _kind, _data: None)
        self.probes = probes
        self.clock = clock
        self.verify = verify
        self.timing = {"stable_ms": stable_ms, "circuit_timeout_s": circuit_timeout_s,
                       "verify_timeout_s": verify_timeout_s}
        # a lighting that failed and rolled back cleanly (a barrier or a verify step timed out on a busy
        # network) is tried again, up to provision_retries times, after provision_retry_s doubling
        self.provision_retries, self.provision_retry_s = provision_retries, provision_retry_s
        self.tries: dict[int, tuple[float, int]] = {}  # reservation -> (not before, retries used)
        # lit by us (or re-adopted after a restart); the app passes the shared LitReservations context
        self.active: dict[int, ReservationCircuit] = {} if active is None else active
        # elastic reservations: settings (ElasticState's fields; unit_mbps 0 = ODU0 at the lab scale),
        # state, and each ingress rule's last byte-counter reading
        self.elastic_cfg: dict[str, float] = dict(elastic or {})
        self.elastic: dict[int, ElasticState] = {}
        self._bytes: dict[tuple[int, int], tuple[float, int]] = {}
        # 1+1 reservations running on their surviving path with no new protection found (why), retried
        self.unprotected: dict[int, str] = {}
        # revert (docs/failures.md, "Revert"): a restoration first looks for a path that keeps off the
        # original one, so that going back can be made before break; the original path (a PathResult
        # dict) of each unprotected reservation lit on a restoration path
        self.revertive = revertive
        self.originals: dict[int, Original] = {}
        # grooming: static reservations are metered at their bandwidth too (sharers of a circuit must not
        # starve each other), and the decide-then-run of sharers is serialised per circuit
        self.meter_static = meter_static
        self.sharing = groomed_circuits.SegmentLocks()
        # riders: reservations whose every circuit is lit already, running their plan (packet rules and
        # verification) outside the circuits' locks; counted as users of those circuits meanwhile
        self.riding: dict[int, ReservationCircuit] = {}

    # ---- the path ---------------------------------------------------------------------------------
    def circuit(self, order: Any) -> ReservationCircuit:
        """The stored path, unless it no longer fits the network (an edge gone, e.g. a packet link that
        was another circuit, or one of its XCON ports taken now): then a new path from ``pce``."""
        return self.lit_path(order)[0]

    def lit_path(self, order: Any) -> tuple[ReservationCircuit, dict[str, Any] | None]:
        """:meth:`circuit`, and the new path to store when it is not the stored one (else None), so the
        database says what is lit (a restoration starts from it)."""
        g = self.graph()
        vlan = _vlan(order)
        edges = list((order.path or {}).get("edges") or [])
        if edges:
            try:
                c = circuit_for(g, order.id, order.src, order.dst, edges, vlan)
            except ReservationPathError:  # the VLAN was checked above: the path does not walk on today's graph
                c = None  # compute a new one
            # (grooming: the ports of a circuit it shares with a lit reservation are its own, not taken)
            own = groomed_circuits.shared_ports(c, groomed_circuits.others_of(self.active, order.id)) if c else {}
            if c is not None and not any(x.ports & (self.busy_ports(x.ots) - own.get(x.ots, set())) for x in c.xcons):
                return c, None
        try:
            return self.circuit_around(order, ())
        except ReservationPathError as exc:
            raise ReservationPathError(f"the stored path is taken and no other is free: {exc}") from None

    def lit_pair(self, order: Any) -> tuple[protected_circuits.ProtectedCircuit, dict[str, Any] | None]:
        """A 1+1 order's stored pair, unless it no longer fits the network: then a new pair (and its path
        to store)."""
        path = order.path or {}
        work, prot = list(path.get("edges") or []), list((path.get("protection") or {}).get("edges") or [])
        if work and prot:
            try:
                pc = protected_circuits.protected_circuit(self.graph(), order.id, order.src, order.dst, work, prot,
                                                          _vlan(order))
            except ReservationPathError:
                pc = None
            if pc is not None and not any(x.ports & self.busy_ports(x.ots) for x in pc.circuit.xcons):
                return pc, None
        try:
            return self.pair_around(order, ())
        except ReservationPathError as exc:
            raise ReservationPathError(f"the stored protected paths are taken and no other pair is free: {exc}") from None

    def circuit_around(self, order: Any, avoid: Sequence[str]) -> tuple[ReservationCircuit, dict[str, Any]]:
        """A new path from ``pce`` over the live graph, around every optical port another circuit holds
        and the optical ports ``avoid`` (failed ones): the circuit and the path (``PathResult.to_dict``)."""
        from pce.errors import PceError
        from pce.reservation import PathRequest, compute_path

        g = self.graph()
        vlan = _vlan(order)
        taken = held_oports(g, self.busy_ports)
        try:
            res = compute_path(without_circuit_links(g), PathRequest(order.src, order.dst, order.bandwidth, order.start, order.end,
                                              exclude=tuple(sorted(taken | set(avoid)))))
        except PceError as exc:
            raise ReservationPathError(str(exc)) from None
        return circuit_for(g, order.id, order.src, order.dst, res.edges, vlan), res.to_dict()

    def pair_around(self, order: Any, avoid: Sequence[str]) -> tuple[protected_circuits.ProtectedCircuit, dict[str, Any]]:
        """A new 1+1 pair around the optical ports ``avoid`` and those other circuits hold: the circuit
        and the path to store (the working path, the protection path under ``"protection"``)."""
        from pce.errors import PceError
        from pce.protection import protected_paths
        from pce.reservation import PathRequest

        g = self.graph()
        taken = held_oports(g, self.busy_ports)
        try:
            pair = protected_paths(without_circuit_links(g), PathRequest(order.src, order.dst, order.bandwidth, order.start, order.end,
                                                  exclude=tuple(sorted(taken | set(avoid)))))
        except PceError as exc:
            raise ReservationPathError(str(exc)) from None
        pc = protected_circuits.protected_circuit(g, order.id, order.src, order.dst, pair.working.edges,
                                                  pair.protection.edges, _vlan(order))
        return pc, pair.to_dict()

    # ---- provision -------------------------------------------------------------------------------
    def provision(self, order: Any) -> Outcome:
        pc = None
        try:
            if protected_circuits.is_protected(order):  # 1+1: both paths lit, fast-failover groups at the ends
                pc, new_path = self.lit_pair(order)
                c = pc.circuit
            else:
                c, new_path = self.lit_path(order)
        except (ReservationPathError, ValueError) as exc:
            return self._failed(order.id, f"no path: {exc}", {})
        state = None
        if getattr(order, "mode", "static") == "elastic":
            state = self._elastic_state(order)
            c = metered(c, rule_plan.reservation_meter(order.id))
            refused = self._set_meters(c, state.provisioned_mbps)
            if refused:
                self._remove_meters(c)
                return self._failed(order.id, f"elastic: {refused}", {})
        elif self.meter_static:  # grooming: metered at its bandwidth, like an elastic one
            c = metered(c, rule_plan.reservation_meter(order.id))
            if refused := self._set_meters(c, float(order.bandwidth)):
                self._remove_meters(c)
                return self._failed(order.id, f"meter: {refused}", {})
        record = self._light(order.id, c, "provision", pc)
        if record.state != "done":
            where = failed_step(record)
            if any(r.meter is not None for r in c.ingress):
                self._remove_meters(c)
            _at, used = self.tries.get(order.id, (0.0, 0))
            if record.state == "rolled_back" and used < self.provision_retries:
                return self._retry_later(order.id, used + 1, f"provisioning failed at {where}; rolled back",
                                         record.to_json())
            self.tries.pop(order.id, None)
            tried = f" (after {used} retr{'y' if used == 1 else 'ies'})" if used else ""
            return self._failed(order.id, f"provisioning failed at {where}; rolled back{tried}", record.to_json())
        self.tries.pop(order.id, None)
        lit = self.run_db("mark_active", order.id, circuit_records(c), [rule_record(r) for r in c.rules],
                          self.clock(), new_path)
        self.active[order.id] = c
        if state is not None:
            self.elastic[order.id] = state
            self.run_db("set_provisioned", order.id, state.provisioned_mbps, self.clock())
        if not lit:  # cancelled or ended while we were lighting it: take it down again
            out = self.release_circuit(order.id, c)
            return Outcome(order.id, "provision", False, "RELEASED" if out.ok else "LEFT",
                           "the reservation ended while it was being lit; released", record.to_json())
        out = Outcome(order.id, "provision", True, "ACTIVE", plan=record.to_json())
        self.on_event("reservation_active", out.to_json() | {"circuit": c.to_json()})
        return out

    def _light(self, res_id: int, c: ReservationCircuit, kind: str,
               pc: protected_circuits.ProtectedCircuit | None = None) -> PlanRecord:
        """Light ``c`` by an ordered plan (XCONs → circuit up → transit → ingress → verification);
        ``pc``: ``c`` is a 1+1 pair, whose failover groups go in before the ingress rules.

        Default forwarding must never put other traffic on the circuit, not even while it comes up:
        its ports are reserved before the plan runs (and given back if it fails)."""
        opts = self._plan_options(res_id, kind)
        if pc is not None:
            plan = protected_circuits.provision_plan(dataclasses.replace(pc, circuit=c), **opts)
            return self._run(plan, res_id, c, opens=True)
        with self.sharing.holding(c):  # grooming: light only the circuits no lit reservation has lit
            xcons, segs = groomed_circuits.to_light(c, self._sharers(res_id))
            if xcons or not c.segment_xcons:
                plan = planner.provision(xcons, [p for seg in segs for p in seg], list(segs), list(c.transit),
                                         list(c.ingress), **opts)
                record = self._run(plan, res_id, c, opens=True)
                if record.state == "done":
                    self.active.setdefault(res_id, c)  # lit now: a sharer's release must keep the circuit
                return record
            self.riding[res_id] = c  # every circuit lit: ride it, without holding up the other riders
        return self._ride(res_id, c, opts)

    def _ride(self, res_id: int, c: ReservationCircuit, opts: dict[str, Any]) -> PlanRecord:
        """Install a rider's packet rules (and verify them) on circuits lit already, outside their locks:
        riders starting together run side by side (they were one at a time, ~0.35 s each). While it
        runs, its claim in :attr:`riding` keeps a sharer's release from taking the circuits down; if it
        fails and nobody else uses them any more, they are taken down here."""
        record: PlanRecord | None = None
        try:
            plan = planner.provision((), [], [], list(c.transit), list(c.ingress), **opts)
            record = self._run(plan, res_id, c, opens=True)
            return record
        finally:
            with self.sharing.holding(c):
                self.riding.pop(res_id, None)
                if record is not None and record.state == "done":
                    self.active.setdefault(res_id, c)
                else:
                    self._drop_unused(res_id, c)

    def _drop_unused(self, res_id: int, c: ReservationCircuit) -> None:
        """Take down the XCONs of ``c`` nobody uses any more (a rider failed after the circuit's last
        other user left); called with the circuit's locks held."""
        orphans = groomed_circuits.to_release(c, self._sharers(res_id),
                                              map(groomed_circuits.xcon_id, self.run_db("xcons_in_use", groomed_circuits.xcon_tuples(c), res_id)))
        if orphans:
            self._run(planner.release(orphans, [], [], drain=False,
                                      plan_id=f"res{res_id}-orphans-{int(self.clock() * 1000)}"), res_id, c,
                      opens=False)

    def _sharers(self, res_id: int) -> list[ReservationCircuit]:
        """The circuits of every other reservation lit or riding now: the users of a shared circuit."""
        return groomed_circuits.others_of({**self.active, **self.riding}, res_id)

    def _plan_options(self, res_id: int, kind: str) -> dict[str, Any]:
        return {"verify": self.verify, "stable_ms": self.timing["stable_ms"],
                "circuit_timeout_s": self.timing["circuit_timeout_s"],
                "verify_timeout_s": self.timing["verify_timeout_s"],
                "plan_id": f"res{res_id}-{kind}-{int(self.clock() * 1000)}"}

    def _run(self, plan: Plan, res_id: int, c: ReservationCircuit, opens: bool,
             ports: Sequence[Port] | None = None) -> PlanRecord:
        """Run and record a plan that lights ``c`` (``opens``: its ports — ``ports`` if given — are
        reserved from before the plan, probe frames cross the new path while it runs, for verification)
        or takes it down (its ports are given back once it is done)."""
        base, probes = self.runner.southbound, self.probes if opens else None
        # the probes start at the verify step's first counter read (app/controller/probed_southbound.py)
        probed = ProbedSouthbound(base, lambda: probes(c)) if probes is not None and base is not None else None
        held = (c.packet_ports if ports is None else tuple(ports)) if opens else ()
        try:
            record = self.runner.run(plan, f"{OWNER}{res_id}", "reservations", ports=held,
                                     releases=not opens, context={"reservation_id": res_id}, southbound=probed)
        finally:
            if probed is not None:
                probed.stop()
        data = record.to_json()
        self.run_db("record_plan", {"kind": data["kind"], "mode": data["mode"], "reservation_id": res_id,
                                    "state": data["state"], "error": data.get("error") or None,
                                    "started_at": data["started_at"], "finished_at": data["finished_at"],
                                    "steps": [step_record(st) for st in data["steps"]]})
        return record

    def _retry_later(self, res_id: int, attempt: int, reason: str, plan: dict[str, Any]) -> Outcome:
        """Leave the reservation PROVISIONING, to be lit again once the back-off is over (:meth:`may_try`):
        nothing of it is installed (the plan rolled back), and what failed is most often a switch that
        answered late (germany50's backbone: 7 of 49 barriers unanswered in 5 s while 49 circuits lit)."""
        wait = self.provision_retry_s * 2 ** (attempt - 1)
        self.tries[res_id] = (self.clock() + wait, attempt)
        why = f"{reason}; retry {attempt} of {self.provision_retries} in {wait:g} s"
        out = Outcome(res_id, "provision", False, "PROVISIONING", why, plan)
        self.on_event("reservation_retry", out.to_json())
        return out

    def may_try(self, res_id: int, now: float) -> bool:
        """Whether a due reservation may be lit now (not within the back-off of a failed try)."""
        return self.tries.get(res_id, (0.0, 0))[0] <= now

    def forget_tries(self, keep: Iterable[int]) -> None:
        """Drop the retry state of reservations no longer due (ended or cancelled while backing off)."""
        keep = set(keep)
        for res_id in [r for r in self.tries if r not in keep]:
            del self.tries[res_id]

    def _failed(self, res_id: int, reason: str, plan: dict[str, Any]) -> Outcome:
        self.run_db("mark_failed", res_id, reason, self.clock())
        out = Outcome(res_id, "provision", False, "FAILED", reason, plan)
        self.on_event("reservation_failed", out.to_json())
        return out

    # ---- release ---------------------------------------------------------------------------------
    def release(self, inst: Any) -> Outcome:
        """Take down what the store lists as installed for a finished reservation."""
        c = self.active.get(inst.reservation_id)
        if c is None:
            c = installed_circuit(inst)
        return self.release_circuit(inst.reservation_id, c, mark=True)

    def release_circuit(self, res_id: int, c: ReservationCircuit, mark: bool = False) -> Outcome:
        with self.sharing.holding(c):  # grooming: a circuit another reservation still uses stays lit
            xcons = groomed_circuits.to_release(c, self._sharers(res_id),
                                                map(groomed_circuits.xcon_id, self.run_db("xcons_in_use", groomed_circuits.xcon_tuples(c), res_id)))
            plan = planner.release(xcons, list(c.transit), list(c.ingress), drain=False,
                                   groups=protected_circuits.groups_of(c),
                                   plan_id=f"res{res_id}-release-{int(self.clock() * 1000)}")
            record = self._run(plan, res_id, c, opens=False)
            if record.state == "done":
                self.active.pop(res_id, None)
        data = record.to_json()
        ok = record.state == "done"
        if ok:
            self.active.pop(res_id, None)
            if any(r.meter is not None for r in c.ingress):  # the rules are gone: now their meters can go
                self._remove_meters(c)
            self.elastic.pop(res_id, None)
            self.unprotected.pop(res_id, None)
            self.originals.pop(res_id, None)
            for key in [k for k in self._bytes if k[0] == res_id]:
                del self._bytes[key]
            if mark:
                self.run_db("mark_released", res_id, self.clock())
        out = Outcome(res_id, "release", ok, "RELEASED" if ok else "RELEASE_FAILED", record.error or "", data)
        self.on_event("reservation_released" if ok else "reservation_release_failed", out.to_json())
        return out

    # ---- restoration (docs/failures.md) -------------------------------------------------------------
    def restore(self, order: Any, cause: str, detected: float, avoid: Sequence[str], attempt: int = 1) -> Outcome:
        """Re-light a reservation a failure broke: ACTIVE (or DEGRADED) → RESTORING, the broken circuit
        taken down (best effort: a switch that cannot answer keeps its part, which stays reserved until
        it is reconciled), a new path around the failed optical ports ``avoid`` lit by an ordered plan
        with data-plane verification → ACTIVE on it; DEGRADED with the reason when there is no path or
        lighting it failed (nothing of it left installed; the caller retries with back-off)."""
        started = self.clock()
        broken = self.active.get(order.id)
        reprotect = None
        if broken is not None and protected_circuits.is_protected(order):
            try:  # the data plane already switched to the surviving path: protect it again
                reprotect = protected_circuits.reprotection(self.graph(), order, broken, avoid, self.busy_ports,
                                                            **self._plan_options(order.id, "reprotect"))
            except ReservationPathError as exc:
                if not str(exc).startswith("both paths"):  # the survivor carries on, unprotected for now
                    self.unprotected[order.id] = str(exc)
                    out = Outcome(order.id, "restore", False, "ACTIVE", f"running unprotected: {exc}")
                    self.on_event("reservation_unprotected", out.to_json() | {"cause": cause})
                    return out
        if not self.run_db("mark_restoring", order.id, cause, started):
            return Outcome(order.id, "restore", False, "NOT_LIT", "the reservation is not lit any more")
        old_path = list((order.path or {}).get("edges") or [])
        self.on_event("reservation_restoring", {"reservation_id": order.id, "cause": cause, "attempt": attempt})
        if reprotect is not None and broken is not None:
            return self._reprotect(order, broken, reprotect, cause, {
                "cause": cause, "detected_ts": detected, "started_ts": started, "attempt": attempt,
                "old_path": old_path})
        elastic = self.elastic.get(order.id)
        if broken is not None:
            out = self.release_circuit(order.id, broken)  # (its meters go with it)
            if not out.ok:  # what could not be removed stays reserved; the new path avoids its ports
                self.active.pop(order.id, None)
        try_ = {"cause": cause, "detected_ts": detected, "started_ts": started, "attempt": attempt,
                "old_path": old_path}
        pc = None
        original = None if protected_circuits.is_protected(order) else original_path(order)
        try:
            if protected_circuits.is_protected(order):  # both paths broke: a new pair, else one path
                try:
                    pc, path = self.pair_around(order, avoid)
                except ReservationPathError:
                    pc = None
            if pc is None:
                c, path = self._restoration_path(order, avoid, original)
            else:
                c = pc.circuit
        except (ReservationPathError, ValueError) as exc:
            return self._degraded(order.id, f"no path around the failure: {exc}", try_)
        if original is not None and path.get("edges") == original.get("edges"):
            original = None  # lit on its admitted path again (a retry after the repair): nothing to revert
        if original is not None:  # the reservation keeps knowing its admitted path (a revert goes back to it)
            path = {**path, "original": original}
        if getattr(order, "mode", "static") == "elastic":  # metered again at what it had
            elastic = elastic or self._elastic_state(order)
            c = metered(c, rule_plan.reservation_meter(order.id))
            if refused := self._set_meters(c, elastic.provisioned_mbps):
                self._remove_meters(c)
                return self._degraded(order.id, f"elastic: {refused}", try_)
        record = self._light(order.id, c, "restore", pc)
        if record.state != "done":
            if elastic is not None:
                self._remove_meters(c)
            return self._degraded(order.id, f"lighting the new path failed at {failed_step(record)}; rolled back",
                                  try_, record.to_json())
        ok = self.run_db("mark_restored", order.id, circuit_records(c), [rule_record(r) for r in c.rules], path,
                         {**try_, "new_path": list(path.get("edges") or [])}, self.clock())
        self.active[order.id] = c
        if elastic is not None:
            self.elastic[order.id] = elastic
        if original is not None:
            self.originals[order.id] = Original(order.src, order.dst, original)
        if not ok:  # cancelled or ended while we were restoring it: take it down again
            out = self.release_circuit(order.id, c)
            return Outcome(order.id, "restore", False, "RELEASED" if out.ok else "LEFT",
                           "the reservation ended while it was being restored; released", record.to_json())
        out = Outcome(order.id, "restore", True, "ACTIVE", plan=record.to_json())
        self.on_event("reservation_restored", out.to_json() | {"cause": cause, "circuit": c.to_json(),
                                                               "took_s": round(self.clock() - detected, 3)})
        return out

    def _reprotect(self, order: Any, lit: ReservationCircuit, r: protected_circuits.Reprotection, cause: str,
                   try_: dict[str, Any]) -> Outcome:
        """A 1+1 reservation whose one path failed: take that path down, light a new protection path
        and re-set the failover groups, the survivor first (it carried the traffic all along)."""
        down = self._run(r.down, order.id, lit, opens=False)
        up = self._run(r.up, order.id, r.new.circuit, opens=True) if down.state == "done" else down
        if up.state != "done":
            return self._degraded(order.id, f"re-protecting failed at {failed_step(up)}", try_, up.to_json())
        c = r.new.circuit
        self.active[order.id] = c
        self.unprotected.pop(order.id, None)
        ok = self.run_db("mark_restored", order.id, circuit_records(c), [rule_record(x) for x in c.rules], r.path,
                         {**try_, "new_path": list(r.path.get("edges") or [])
                          + list((r.path.get("protection") or {}).get("edges") or [])}, self.clock())
        if not ok:
            out = self.release_circuit(order.id, c)
            return Outcome(order.id, "restore", False, "RELEASED" if out.ok else "LEFT",
                           "the reservation ended while it was being re-protected; released", up.to_json())
        out = Outcome(order.id, "restore", True, "ACTIVE", plan=up.to_json())
        self.on_event("reservation_restored", out.to_json() | {"cause": cause, "circuit": c.to_json(),
                                                               "reprotected": True,
                                                               "took_s": round(self.clock() - try_["detected_ts"], 3)})
        return out

    def held(self, res_id: int, reason: str) -> Outcome:
        """No restoration after all (the failure cleared during the hold-off, or the reservation is gone)."""
        out = Outcome(res_id, "restore", True, "UNCHANGED", reason)
        self.on_event("reservation_restore_skipped", out.to_json())
        return out

    def _degraded(self, res_id: int, reason: str, try_: dict[str, Any], plan: dict[str, Any] | None = None) -> Outcome:
        self.run_db("mark_degraded", res_id, reason, try_, self.clock())
        out = Outcome(res_id, "restore", False, "DEGRADED", reason, plan or {})
        self.on_event("reservation_degraded", out.to_json())
        return out

    def adopt(self, inst: Any) -> None:
        """After a restart: what the store lists as installed for an ACTIVE reservation is ours again."""
        c = self.active[inst.reservation_id] = installed_circuit(inst)
        self.runner.reserve(f"{OWNER}{c.ident}", c.packet_ports)

    # ---- revert to the original path (docs/failures.md, "Revert") ------------------------------------
    def _restoration_path(self, order: Any, avoid: Sequence[str], original: dict[str, Any] | None
                          ) -> tuple[ReservationCircuit, dict[str, Any]]:
        """A path around the failure; when reverts are on, first one that also keeps off the original
        path's optical ports (RFC 4872 keeps the working LSP's resources for its reversion), so going
        back can be made before break. There may be none: then any path (a revert will say why not)."""
        keep_off = set((original or {}).get("oports") or ()) if self.revertive else set()
        if keep_off & set(avoid) and keep_off - set(avoid):  # the original crosses the failure: keep off it
            try:
                return self.circuit_around(order, tuple(sorted(set(avoid) | keep_off)))
            except ReservationPathError:
                pass
        return self.circuit_around(order, avoid)

    def note_original(self, order: Any) -> None:
        """After a restart: an adopted reservation lit on a restoration path still knows its original one."""
        if order.id in self.active and not protected_circuits.is_protected(order) \
                and (order.path or {}).get("original"):
            self.originals[order.id] = Original(order.src, order.dst, dict(order.path["original"]))

    def original_fault(self, res_id: int, f: Failures) -> str | None:
        """Why the original path of ``res_id`` is not clear now (None: it is); a path that no longer walks
        on the live graph is not clear either."""
        original = self.originals.get(res_id)
        if original is None:
            return "no original path"
        g = self.graph()
        try:
            c = circuit_for(g, res_id, original.src, original.dst, list(original.path.get("edges") or []))
        except (ReservationPathError, ValueError) as exc:
            return f"the original path is not in the network: {exc}"
        return path_fault(c.xcons, c.packet_ports, f, g)

    def revert(self, order: Any, clear_since: float) -> Outcome:
        """Move a restored reservation back to its original path, make-before-break
        (:func:`app.update.planner.move`): the original's XCONs → circuit up → its transit rules → the
        ingress rules overwritten in place (the traffic moves) → data-plane verification → the
        restoration path drained and taken down. Only when the original's optical ports are neither
        held by another circuit nor booked by another reservation, and share no port with the
        restoration path (that could not be made before break). A plan that fails before the traffic
        moved is rolled back: the reservation stays ACTIVE on its restoration path, and says why.
        ``clear_since``: when the original path was last seen repaired (the restorations row's start)."""
        started = self.clock()
        known = self.originals.get(order.id)
        cur = self.active.get(order.id)
        if known is None or cur is None:
            return Outcome(order.id, "revert", False, "UNCHANGED", "not on a restoration path")
        if protected_circuits.is_protected(order):
            self.originals.pop(order.id, None)
            return Outcome(order.id, "revert", False, "UNCHANGED", "1+1 reservations are not revertive")
        original = known.path
        edges = list(original.get("edges") or [])
        row = {"cause": "revert", "detected_ts": clear_since, "started_ts": started,
               "old_path": list((order.path or {}).get("edges") or []), "new_path": edges}
        try:
            back = circuit_for(self.graph(), order.id, order.src, order.dst, edges, _vlan(order))
        except (ReservationPathError, ValueError) as exc:
            return self._revert_refused(order.id, f"the original path is not in the network: {exc}", row)
        mine = {(x.ots, p) for x in cur.xcons for p in x.ports}
        taken = sorted(f"{x.ots}:{p}" for x in back.xcons for p in x.ports & self.busy_ports(x.ots)
                       if (x.ots, p) not in mine)
        if taken:
            return self._revert_refused(order.id, f"the original path's optical port(s) {', '.join(taken)} are "
                                                  "held by another circuit", row)
        oports = sorted({f"{x.ots}:{p}" for x in back.xcons for p in x.ports})
        if booked := self.run_db("booked_elsewhere", order.id, oports, started):
            return self._revert_refused(order.id, "the original path's optical port(s) are booked by "
                                        + ", ".join(f"{p} (reservation {r})" for p, r in sorted(booked.items())), row)
        if any(r.meter is not None for r in cur.ingress):  # an elastic one: the same meter, already set
            back = metered(back, next(r.meter for r in cur.ingress if r.meter is not None))
        try:
            plan = planner.move(cur.xcons, list(cur.transit), back.xcons, back.packet_ports, list(back.segments),
                                list(back.transit), [IngressChange(n, o) for n, o in zip(back.ingress, cur.ingress,
                                                                                          strict=True)],
                                **self._plan_options(order.id, "revert"))
        except (PlanError, ValueError) as exc:
            return self._revert_refused(order.id, f"no make-before-break revert: {exc}", row)
        owner = f"{OWNER}{order.id}"
        record = self._run(plan, order.id, back, opens=True, ports=(*cur.packet_ports, *back.packet_ports))
        moved = record.state == "done" or bool(plan.commit) and all(s.ok for s in record.steps if s.id in plan.commit)
        if not moved:  # rolled back: the restoration path carries on (the runner gave its ports back)
            self.runner.reserve(owner, cur.packet_ports)
            undone = "rolled back" if record.state == "rolled_back" else f"roll-back incomplete: {record.error}"
            return self._revert_refused(order.id, f"the revert plan failed at {failed_step(record)}; {undone}",
                                        row, record.to_json())
        self.active[order.id] = back
        self.originals.pop(order.id, None)
        self.runner.reserve(owner, back.packet_ports)
        reason = "" if record.state == "done" else \
            f"back on the original path, but taking the restoration path down failed at {failed_step(record)}"
        ok = self.run_db("mark_reverted", order.id, circuit_records(back), [rule_record(r) for r in back.rules],
                         original, {**row, "reason": reason}, self.clock())
        if not ok:  # cancelled or ended meanwhile: take it down the normal way
            out = self.release_circuit(order.id, back)
            return Outcome(order.id, "revert", False, "RELEASED" if out.ok else "LEFT",
                           "the reservation ended while it was being reverted; released", record.to_json())
        out = Outcome(order.id, "revert", True, "ACTIVE", reason, record.to_json())
        self.on_event("reservation_reverted", out.to_json() | {"circuit": back.to_json(),
                                                               "took_s": round(self.clock() - clear_since, 3)})
        return out

    def _revert_refused(self, res_id: int, reason: str, row: dict[str, Any],
                        plan: dict[str, Any] | None = None) -> Outcome:
        self.run_db("revert_refused", res_id, reason, row, self.clock())
        out = Outcome(res_id, "revert", False, "ACTIVE", reason, plan or {})
        self.on_event("reservation_revert_failed", out.to_json())
        return out


    # ---- elastic reservations ------------------------------------------------------------------------
    def _elastic_state(self, order: Any) -> ElasticState:
        """One unit to start with: ``[te] elastic_unit_mbps``, else the smallest ODU container (ODU0) at
        the lab's scale (the optical nodes' ``unit_mbps``)."""
        from topology.granularity import capacity_mbps

        cfg: dict[str, Any] = dict(self.elastic_cfg)  # ElasticState's keyword fields, some of them int
        unit = float(cfg.pop("unit_mbps", 0) or 0)
        if unit <= 0:
            scale = next((float(d["unit_mbps"]) for _n, d in self.graph().g.nodes(data=True) if d.get("unit_mbps")), 1.0)
            unit = capacity_mbps("ODU0", scale)
        return ElasticState(float(order.bandwidth), unit, **cfg)

    def _set_meters(self, c: ReservationCircuit, mbps: float) -> str:
        """Set every ingress switch's meter to ``mbps``; the first refusal ("" if none)."""
        outs = self.run_parallel([partial(self.southbound.set_meter, r.switch, r.meter, kbps(mbps))
                                  for r in c.ingress if r.meter is not None])
        return next((o.error for o in outs if not o.ok), "")

    def _remove_meters(self, c: ReservationCircuit) -> None:
        self.run_parallel([partial(self.southbound.remove_meter, r.switch, r.meter)
                           for r in c.ingress if r.meter is not None])

    def elastic_tick(self) -> list[tuple[int, ElasticDecision]]:
        """One poll of every lit elastic reservation: measure, decide, re-set the meters, record.

        The rate is the busier direction's ingress rule (bytes since the last poll). A grow or shrink
        whose meter change is refused leaves the provisioned bandwidth as it was (and says so)."""
        out = []
        for res_id, state in list(self.elastic.items()):
            c = self.active.get(res_id)
            if c is None:
                continue
            now = self.clock()
            rates = []
            for i, r in enumerate(c.ingress):
                total = self.southbound.flow_bytes(r)
                if total is None:  # the rule is not (yet, or any more) in its table
                    continue
                rate = rate_mbps(self._bytes.get((res_id, i)), now, total)
                self._bytes[(res_id, i)] = (now, total)
                if rate is not None:
                    rates.append(rate)
            if not rates:
                continue
            d = state.observe(max(rates), now)
            if d.action != HOLD:
                refused = self._set_meters(c, d.after_mbps)
                if refused:
                    d = ElasticDecision(HOLD, f"{d.action} to {d.after_mbps:g} Mbit/s refused: {refused}",
                                        d.rate_mbps, d.before_mbps, d.before_mbps)
                else:
                    state.applied(d, now)
                    self.run_db("set_provisioned", res_id, state.provisioned_mbps, now)
                self.on_event("reservation_elastic", {"reservation_id": res_id, **d.as_dict()})
            state.last = d.as_dict()
            out.append((res_id, d))
        return out


def failed_step(record: PlanRecord) -> str:
    """Where a plan failed: its first failed step and why (else the plan's own error)."""
    failed = next((s for s in record.steps if s.ok is False), None)
    return f"step {failed.id} ({failed.target}): {failed.error}" if failed is not None else str(record.error)


def metered(c: ReservationCircuit, meter: int) -> ReservationCircuit:
    """``c`` with its ingress rules passing ``meter`` (the transit rules need none: the ingress limits)."""
    return dataclasses.replace(c, ingress=tuple(dataclasses.replace(r, meter=meter) for r in c.ingress))


def installed_circuit(inst: Any) -> ReservationCircuit:
    """A :class:`ReservationCircuit` from the store's record of an installation."""
    rules = [rule_from_record(r) for r in inst.rules]
    seg_xcons = tuple(tuple(XconSpec(o, i, p) for o, i, p in c.xcons) for c in inst.circuits)
    xcons = tuple(x for xs in seg_xcons for x in xs)
    segs = tuple((_port(c.a_end), _port(c.z_end)) for c in inst.circuits)
    caps = [c.capacity for c in inst.circuits] or [0.0]
    ends = {p for seg in segs for p in seg}
    # the ingress rules take traffic in at the endpoint ports: their in_port is on no circuit
    ingress = tuple(r for r in rules if (r.switch, r.match_dict().get("in_port")) not in ends
                    and (r.switch, r.out_port) in ends)
    transit = tuple(r for r in rules if r not in ingress)
    return ReservationCircuit(inst.reservation_id, xcons, segs, seg_xcons, transit, ingress, min(caps))


def _port(name: str) -> tuple[str, int]:
    sw, _, port = name.rpartition(":")
    return sw, int(port)
