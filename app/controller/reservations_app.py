"""The controller follows the reservations in the shared database (thin os-ken app).

Loaded with a database (``[db] url``). Every ``[controller] reservation_poll`` seconds it asks the
provisioning store (through the controller's DB writer thread, so a locked database never stalls
the hub) which reservations are due (PROVISIONING) and which ended with something still installed,
and hands each to :class:`app.controller.reservation_manager.ReservationManager` in its own greenthread.
At start it first re-adopts what the store lists as installed for ACTIVE reservations, so a
restarted controller neither re-lights nor forgets them.

Plans run through the shared plan runner (:mod:`app.controller.plan_runner`). While a reservation
is lit its circuit's packet ports are in ``NetworkView.reserved_ports`` (the runner reserves them):
the forwarding app keeps other traffic off them. Events: ``reservation`` and ``plan`` in the journal
(``GET /events``) and :class:`app.controller.events.EventReservation` / ``EventPlan`` on the bus.
``GET /reservations`` and ``GET /plans`` on the control API show what it did (plans:
:data:`app.controller.plan_log.PLANS`). Each pass of the loop also polls the lit *elastic*
reservations (:meth:`ReservationManager.elastic_tick`: grow or shrink their meters by a unit);
``GET /reservations`` lists them under ``elastic`` with what is provisioned now.

Failures (docs/failures.md): every port change and switch disconnect is checked, in its own event,
against the lit reservations (:mod:`app.controller.failures`); each one a failure broke is restored
(:meth:`ReservationManager.restore`, after ``[controller] restore_holdoff``) on a path around the
failed ports; a DEGRADED one (no path left) is retried with back-off (``restore_retry`` doubling up
to :data:`RETRY_MAX`) while the failure lasts, as are RESTORING ones a restarted controller finds.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import event as osken_event
from os_ken.controller.handler import set_ev_cls
from os_ken.lib import hub

from app.controller import db_writer, events, guard, ofmsg
from app.controller.api_routes import CONTEXT as ROUTES
from app.controller.api_routes import ApiRoutes
from app.controller.failures import Failures, broken_by, failures_of
from app.controller.journal import JOURNAL
from app.controller.live_southbound import LiveSouthbound, green_parallel
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OFP_VERSIONS, OpenFlowSouthbound
from app.controller.plan_runner_live import RUNNER, RUNNER_EVENTS, PlanRunner, shared_runner
from app.controller.reservation_circuits import LIT_CONTEXT, LitReservations, ReservationCircuit
from app.controller.reservation_manager import ReservationManager
from app.controller.revert_hold import RevertHold
from app.controller.ridden_circuits import shared_circuits
from app.controller.runtime import SETTINGS
from app.controller.services import Scheduler, Service, app_scheduler
from app.controller.shared_restoration import FailureUnit, failure_units, restore_together, retry_units

LOG = logging.getLogger("mlte.controller.reservations")
STORE = "provisioning_store"  # the ProvisioningStore, a resource of the db_writer thread
PROBE_ETHERTYPE = 0x88B6  # IEEE local experimental 2 (the monitor's latency probes use 0x88b5)
PROBE_SRC = "03:4d:4c:54:45:50"  # group bit set: the forwarding app never learns it as a host
PROBE_INTERVAL = 0.02
#: the probes' gap doubles from one PROBE_INTERVAL up to this many (0.16 s): a verify step that the counters'
#: refresh (OVS: every 0.5 s) or a loaded path keeps waiting is not fed 100 frames a second for seconds
PROBE_MAX_GAP = 8
RETRY_MAX = 30.0  # s: the longest back-off between restoration tries of a DEGRADED reservation
#: ``[te]`` keys of elastic reservations -> :class:`app.te.elastic.ElasticState` fields
ELASTIC_KEYS = {"elastic_unit_mbps": "unit_mbps", "elastic_grow_at": "grow_at", "elastic_shrink_at": "shrink_at",
                "elastic_busy_intervals": "busy_intervals", "elastic_calm_intervals": "calm_intervals",
                "elastic_hold_s": "min_hold_s"}


class EventFollow(osken_event.EventBase):
    """Period of ``[controller] reservation_poll``: what is due and what ended, from the database."""


def probe_frame(vlan_vid: int | None = None) -> bytes:
    """A broadcast frame that follows the reservation's rules like its own traffic would (``vlan_vid``:
    the rule's VLAN match, OFPVID_PRESENT | VLAN: the frame carries that 802.1Q tag, or the rule never
    counts it)."""
    dst = b"\xff" * 6
    src = bytes(int(b, 16) for b in PROBE_SRC.split(":"))
    tag = b"" if vlan_vid is None else (0x8100).to_bytes(2, "big") + (int(vlan_vid) & 0x0FFF).to_bytes(2, "big")
    return dst + src + tag + PROBE_ETHERTYPE.to_bytes(2, "big") + b"mlte reservation probe".ljust(46, b"\0")


class ReservationsApp(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, ROUTES: ApiRoutes, RUNNER: PlanRunner,
                 LIT_CONTEXT: LitReservations, MASTERSHIP: Mastership}
    _EVENTS = [events.EventReservation, *RUNNER_EVENTS]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_reservations"
        # several controllers: only the leader lights, releases and restores; a new leader adopts first
        self.mastership: Mastership = kwargs.get(MASTERSHIP) or Mastership()
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.routes: ApiRoutes = r if (r := kwargs.get(ROUTES)) is not None else ApiRoutes()
        ctl = SETTINGS.controller
        self.poll = float(ctl.get("reservation_poll", 1.0))
        self.busy: set[int] = set()
        # when each reservation's last provision/release ended (a sequence number): a pass whose database
        # read began before that works from a stale row and must not start it again (on germany50 a
        # reservation lit at t was provisioned again from a read begun just before t, and ended FAILED)
        self._ended_seq = 0
        self._ended: dict[int, int] = {}
        self.outcomes: deque[dict[str, Any]] = deque(maxlen=200)
        self.writer: db_writer.DbWriter | None = None
        if SETTINGS.db_url:
            from app.db.provisioning import ProvisioningStore

            self.writer = db_writer.shared()
            self.writer.open(STORE, ProvisioningStore)
        self.manager = ReservationManager(
            None, LiveSouthbound(self.southbound, self.view), lambda: self.view.graph()[0],
            shared_runner(kwargs, self, self.view, self.southbound),
            run_parallel=green_parallel, run_db=self._db, busy_ports=self._busy_ports, on_event=self._event,
            probes=self._probes, stable_ms=float(ctl.get("circuit_stable_ms", 50.0)),
            circuit_timeout_s=float(ctl.get("circuit_timeout", 10.0)),
            verify_timeout_s=float(ctl.get("verify_timeout", 3.0)),
            elastic={field: float(v) for key, field in ELASTIC_KEYS.items()
                     if (v := SETTINGS.te.get(key)) is not None},
            active=kwargs.get(LIT_CONTEXT), revertive=bool(ctl.get("revert", False)),
            meter_static=bool(ctl.get("meter_reservations", False)),
            provision_retries=int(ctl.get("provision_retries", 2)),
            provision_retry_s=float(ctl.get("provision_retry", 1.0)))
        self.routes[("GET", "/reservations")] = self.r_reservations
        self.routes[("POST", "/restoration")] = self.r_restoration
        self.frozen = ""  # an operator froze restoration (why): failures are still read, nothing is re-routed
        self.restore_on = bool(ctl.get("restore", True))
        self.holdoff = float(ctl.get("restore_holdoff", 0.0))
        self.retry_s = float(ctl.get("restore_retry", 2.0))
        self.retry: dict[int, tuple[float, int]] = {}  # DEGRADED / RESTORING: (next try at, attempt)
        # revert to the original path after the repair (docs/failures.md, "Revert")
        self.revert_on = bool(ctl.get("revert", False))
        self.reverts = RevertHold(float(ctl.get("revert_hold_s", 30.0)))
        self.adopted = False  # the store's installed ACTIVE reservations were taken over (first pass)
        # the first pass at once: a restarted controller adopts what is lit before anything else
        self.services = app_scheduler(self, [Service("follow", EventFollow, self.poll, first=0.0)])
        self._spawn, self._sleep = hub.spawn, hub.sleep  # of the verification probes' schedulers

    def start(self):
        thread = super().start()
        if self.writer is not None:
            self.services.start()
        return thread

    def stop(self):
        self.services.stop()
        if self.writer is not None:
            self.writer = None
            db_writer.release()
        super().stop()

    # ---- plumbing ----------------------------------------------------------------------------------
    def _db(self, name: str, *args: Any) -> Any:
        """A provisioning-store call by method name, run in the writer thread."""
        assert self.writer is not None
        return self.writer.call(STORE, lambda store: getattr(store, name)(*args), sleep=hub.sleep)

    def _busy_ports(self, ots: str) -> set[int]:
        sw = self.view.by_name(ots)
        return self.view.busy_ots_ports(sw.dpid) if sw is not None else set()

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        JOURNAL.add("reservation", event=kind, **{k: v for k, v in data.items() if k != "circuit"})
        self.outcomes.append({"t": time.time(), "event": kind, **data})
        self.send_event_to_observers(events.EventReservation(kind, dict(data)))

    def _probes(self, c: ReservationCircuit):
        """Send probe frames in at both endpoint ports while the plan runs (data-plane verification):
        at once, then after gaps of 1, 2, 4 and then every ``PROBE_MAX_GAP`` periods (``PROBE_INTERVAL``). One
        probe that crosses the path after the rules went in is all the verify step needs; more only load
        the path (on germany50 an arrival's verify took seconds on an 18-switch path: 100 frames a
        second through every switch of it). A scheduler of its own per plan, whose post sends at once
        (the plan's greenthread waits meanwhile; nothing of the app's state changes)."""
        due = {"tick": 0, "next": 0, "gap": 1}

        def tick() -> None:
            now, due["tick"] = due["tick"], due["tick"] + 1
            if now >= due["next"]:
                due["next"], due["gap"] = now + due["gap"], min(2 * due["gap"], PROBE_MAX_GAP)
                send()

        def send() -> None:
            for r in c.ingress:
                frame = probe_frame(r.match_dict().get("vlan_vid"))
                sw = self.view.by_name(r.switch)
                dp = self.southbound.datapath(sw.dpid) if sw is not None else None
                if dp is None:
                    continue
                probe = ofmsg.packet_out_table(r.match_dict()["in_port"], frame)
                self.southbound.send(dp, [probe], kind="reservation_probe")

        sched = Scheduler(self.name, lambda fn: sched.run("probe", fn), [Service("probe", lambda: tick, PROBE_INTERVAL)],
                          spawn=self._spawn, sleep=self._sleep)
        sched.start()
        return sched.stop

    # ---- failures ----------------------------------------------------------------------------------
    def failures(self) -> Failures:
        static = self.view.static_graph
        expected = static.nodes_of_kind("ots") if static is not None else ()
        return failures_of(self.view.switches.values(), expected)

    @set_ev_cls([events.EventPortChange, events.EventSwitchLeave, events.EventSwitchEnter])
    def _network_changed(self, ev: Any) -> None:
        """A port or switch changed: restore, in this event, every lit reservation a failure broke (and
        restart the revert hold of those whose original path it touched)."""
        if self.writer is None or not self.mastership.acting():
            return
        f = self.failures()
        self._watch_reverts(f, time.time())
        if not self.restore_on or self.frozen or not self.manager.active:
            return
        if not f.ports:
            return
        now = time.time()
        # a circuit several reservations ride is one failure unit: they are restored together
        for unit in failure_units(self.manager.active, f, skip=self.busy | set(self.manager.unprotected)):
            for res_id in unit.ids:
                JOURNAL.add("reservation", event="broken", reservation_id=res_id, cause=unit.cause, unit=list(unit.ids))
            self.busy.update(unit.ids)
            if unit.shared:
                hub.spawn(self._restore_unit, unit, now)
            else:
                hub.spawn(self._guarded, unit.ids[0], lambda rid, why=unit.cause: self._restore(rid, why, now, 1),
                          unit.ids[0])

    def _restore_unit(self, unit: FailureUnit, detected: float, attempt: int = 1) -> None:
        """The riders of a shared circuit restored together (:mod:`app.controller.shared_restoration`)."""
        try:
            if self.holdoff > 0 and attempt == 1:
                hub.sleep(self.holdoff)
                f = self.failures()
                if not any(c is not None and broken_by(c.xcons, c.packet_ports, f) is not None
                           for c in map(self.manager.active.get, unit.ids)):
                    return
            f = self.failures()
            orders = self._db("orders", list(unit.ids))
            for out in restore_together(self.manager, orders, unit.cause, detected, f.exclude(self.view.graph()[0]),
                                        attempt):
                LOG.info("reservation %s: %s", out.reservation_id, out.to_json())
                if out.state == "DEGRADED":
                    self.retry[out.reservation_id] = (time.time() + min(RETRY_MAX, self.retry_s * 2 ** (attempt - 1)),
                                                      attempt + 1)
                else:
                    self.retry.pop(out.reservation_id, None)
        except Exception as exc:
            guard.failures.append(f"reservations {list(unit.ids)}: {exc!r}")
            guard.ERROR_LOG.exception("reservations %s failed", list(unit.ids))
        finally:
            self.busy.difference_update(unit.ids)

    def _restore(self, res_id: int, cause: str, detected: float, attempt: int) -> Any:
        if self.holdoff > 0 and attempt == 1:  # a flapping port settles; then only if it is still broken
            hub.sleep(self.holdoff)
            c = self.manager.active.get(res_id)
            if c is not None and broken_by(c.xcons, c.packet_ports, self.failures()) is None:
                return self.manager.held(res_id, cause)
        orders = self._db("orders", [res_id])
        if not orders:
            return self.manager.held(res_id, "no such reservation")
        f = self.failures()
        out = self.manager.restore(orders[0], cause, detected, f.exclude(self.view.graph()[0]), attempt)
        if out.state == "DEGRADED" or res_id in self.manager.unprotected:
            self.retry[res_id] = (time.time() + min(RETRY_MAX, self.retry_s * 2 ** (attempt - 1)), attempt + 1)
        else:
            self.retry.pop(res_id, None)
        return out

    def _retry_degraded(self, now: float) -> None:
        """Retry DEGRADED reservations whose back-off is over (and resume RESTORING ones a restart left),
        and 1+1 ones running unprotected on their surviving path."""
        waiting = list(self._db("to_restore", now))
        unprotected = [i for i in self.manager.unprotected if self.retry.get(i, (now, 1))[0] <= now]
        if unprotected:
            waiting += self._db("orders", unprotected)
        due = {}
        for order in waiting:
            at, attempt = self.retry.setdefault(order.id, (now, 1))
            if at <= now and order.id not in self.busy:
                due[order.id] = (order, attempt)
        # riders of one circuit come back together (one placement: shared again while it fits)
        for group in retry_units([o for o, _a in due.values()]):
            ids = tuple(o.id for o in group)
            attempt = max(due[i][1] for i in ids)
            self.busy.update(ids)
            if len(ids) > 1:
                hub.spawn(self._restore_unit, FailureUnit(ids, f"retry {attempt} after a failure"), now, attempt)
            else:
                hub.spawn(self._guarded, ids[0],
                          lambda rid, a=attempt: self._restore(rid, f"retry {a} after a failure", now, a), ids[0])

    def _watch_reverts(self, f: Failures, now: float) -> None:
        """Tell the revert hold, per reservation on a restoration path, whether its original path is clear."""
        if not self.revert_on:
            return
        self.reverts.keep(self.manager.originals)
        for res_id in list(self.manager.originals):
            self.reverts.observe(res_id, self.manager.original_fault(res_id, f) is None, now)

    def _revert_due(self, now: float) -> None:
        """Revert the reservations whose original path stayed clear for the hold time."""
        self._watch_reverts(self.failures(), now)
        for res_id in self.reverts.due(now):
            if res_id not in self.busy and res_id in self.manager.active:
                self.busy.add(res_id)
                hub.spawn(self._guarded, res_id, self._revert, res_id)

    def _revert(self, res_id: int) -> Any:
        since = self.reverts.clear_since.get(res_id, time.time())
        orders = self._db("orders", [res_id])
        if not orders:
            self.manager.originals.pop(res_id, None)
            return self.manager.held(res_id, "no such reservation")
        out = self.manager.revert(orders[0], since)
        self.reverts.tried(res_id, out.ok, time.time())
        return out

    # ---- the loop ----------------------------------------------------------------------------------
    @set_ev_cls(EventFollow)
    def _follow(self, ev: EventFollow) -> None:
        self.services.run("follow", self._follow_once)

    @set_ev_cls(events.EventMastership)
    def _mastership(self, ev: events.EventMastership) -> None:
        """Deposed: forget what we lit (the next leader adopts it from the database); elected: the next
        pass adopts the lit reservations first, then follows the database."""
        if not ev.master:
            self.manager.active.clear()
            self.manager.tries.clear()
            self.retry.clear()
        self.adopted = False

    def _follow_once(self) -> None:
        if self.writer is None or not self.mastership.acting():
            return
        if not self.adopted:
            lit = [inst for inst in self._db("installed") if inst.state == "ACTIVE"]
            for inst in lit:
                self.manager.adopt(inst)
                JOURNAL.add("reservation", event="adopted", reservation_id=inst.reservation_id)
            lit = [inst.reservation_id for inst in lit]
            for order in self._db("orders", lit) if lit else ():  # those on a restoration path: a revert to come
                self.manager.note_original(order)
            self.adopted = True
        now = time.time()
        read_at = self._ended_seq
        due = self._db("due", now)
        for order in due:
            if order.id not in self.busy and self._ended.get(order.id, 0) <= read_at \
                    and self.manager.may_try(order.id, now):
                self.busy.add(order.id)
                hub.spawn(self._guarded, order.id, self.manager.provision, order)
        self.manager.forget_tries([o.id for o in due] + sorted(self.busy))
        read_at_release = self._ended_seq
        for inst in self._db("to_release", sorted(self.busy)):
            rid = inst.reservation_id
            if rid not in self.busy and self._ended.get(rid, 0) <= read_at_release:
                self.busy.add(rid)
                hub.spawn(self._guarded, rid, self.manager.release, inst)
        self._ended = {k: v for k, v in self._ended.items() if v > read_at}  # later reads see those ends
        if self.restore_on and not self.frozen:
            self._retry_degraded(now)
            if self.revert_on:
                self._revert_due(now)
        self.manager.elastic_tick()  # elastic reservations follow their demand, a unit at a time

    def _guarded(self, res_id: int, fn: Any, arg: Any) -> None:
        try:
            out = fn(arg)
            LOG.info("reservation %s: %s", res_id, out.to_json())
        except Exception as exc:
            guard.failures.append(f"reservation {res_id}: {exc!r}")
            guard.ERROR_LOG.exception("reservation %s failed", res_id)
        finally:
            self._ended_seq += 1
            self._ended[res_id] = self._ended_seq
            self.busy.discard(res_id)

    # ---- control API -------------------------------------------------------------------------------
    def r_restoration(self, q: dict, d: dict) -> dict:
        """``POST /restoration {"frozen": true, "reason": "..."}``: an operator freeze (maintenance):
        broken reservations are left as they are until ``{"frozen": false}``, which also catches up."""
        from app.controller.control_api import ApiError

        if "frozen" not in d and ("revert" in d or "revert_hold_s" in d):
            return self._set_revert(d)
        frozen = d.get("frozen")
        if not isinstance(frozen, bool):
            raise ApiError(400, "'frozen' must be true or false")
        reason = d.get("reason", "frozen by the operator")
        if not isinstance(reason, str) or not reason.strip() or len(reason) > 200:
            raise ApiError(400, "'reason' must be a non-empty string of at most 200 characters")
        self.frozen = reason.strip() if frozen else ""
        JOURNAL.add("reservation", event="restoration_frozen" if frozen else "restoration_thawed", reason=self.frozen)
        if not frozen and self.writer is not None:
            self._network_changed(None)  # what broke meanwhile is restored now
        return {"frozen": bool(self.frozen), "reason": self.frozen}

    def _set_revert(self, d: dict) -> dict:
        """``POST /restoration {"revert": bool, "revert_hold_s"?: s}``: revertive mode on or off at run time
        (``[controller] revert`` / ``revert_hold_s`` at start): an operator's choice per maintenance."""
        from app.controller.control_api import ApiError

        on, hold = d.get("revert", self.revert_on), d.get("revert_hold_s", self.reverts.hold_s)
        if not isinstance(on, bool):
            raise ApiError(400, "'revert' must be true or false")
        if isinstance(hold, bool) or not isinstance(hold, (int, float)) or not 0 <= hold < 86400:
            raise ApiError(400, "'revert_hold_s' must be a number of seconds in [0, 86400)")
        self.revert_on = self.manager.revertive = on
        self.reverts.hold_s = float(hold)
        if not on:
            self.reverts.keep(())
        JOURNAL.add("reservation", event="revert_set", enabled=on, hold_s=self.reverts.hold_s)
        return {"revert": on, "revert_hold_s": self.reverts.hold_s}

    def r_reservations(self, q: dict, d: dict) -> dict:
        return {"lit": {str(k): c.to_json() for k, c in sorted(self.manager.active.items())},
                "elastic": {str(k): e.to_json() for k, e in sorted(self.manager.elastic.items())},
                "busy": sorted(self.busy), "events": list(self.outcomes)[-50:],
                "failures": {f"{sw}:{p}": why for (sw, p), why in sorted(self.failures().ports.items())},
                "retry": {str(k): {"at": at, "attempt": a} for k, (at, a) in sorted(self.retry.items())},
                "provision_retry": {str(k): {"at": at, "retries": n} for k, (at, n) in sorted(self.manager.tries.items())},
                "restoration": {"enabled": self.restore_on, "frozen": bool(self.frozen), "reason": self.frozen},
                "revert": {"enabled": self.revert_on, "hold_s": self.reverts.hold_s, "waiting": self.reverts.to_json()},
                "shared": shared_circuits(self.manager.active),  # grooming: failure units of several
                "database": bool(SETTINGS.db_url)}
