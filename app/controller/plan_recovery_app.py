"""Plan takeover shim (thin os-ken app; several controllers with a database): record, then recover.

With ``[ha] etcd`` and a database, the shared :class:`~app.controller.plan_runner.PlanRunner` records
every plan as it runs in the ``plans`` table (:class:`app.db.plan_records.PlanRecords` through the
controller's writer, so fenced by the epoch): the row is written *before* the first change is sent
(a synchronous writer call), the step states and the outcome after (queued). On
:class:`EventMastership` (``master=True``) the runner takes the new epoch and, once the switches are
read back (every OTS's XCONs known again, no switch connected for a settle time, or
:data:`WAIT_S` passed, as the TE takeover waits), :meth:`PlanRunner.recover` finishes or rolls back each
plan an older leader left running, exactly once (docs/updates.md "Plans a dead leader left half-done").
One controller (no ``[ha] etcd``) records nothing and recovers nothing.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import event as osken_event
from os_ken.controller.handler import set_ev_cls
from os_ken.lib import hub

from app.controller import db_writer, events
from app.controller.guard import loud
from app.controller.journal import JOURNAL
from app.controller.model import OTS
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OFP_VERSIONS, OpenFlowSouthbound
from app.controller.plan_runner_live import RUNNER, RUNNER_EVENTS, PlanRunner, shared_runner
from app.controller.runtime import SETTINGS
from app.controller.services import Deadline
from app.update.model import FlowRule, ModelError
from app.update.recovery import HANDLED, Held, Unfinished
from topology import rule_plan

LOG = logging.getLogger("mlte.controller.plan_recovery")
RESOURCE = "plan_records"
SETTLE_S = 2.0  # no switch connected for this long: the others are not coming soon
WAIT_S = 30.0  # recover anyway after this (a switch that never came back: its steps count as applied)
NOT_WANTED = frozenset({"mapping"})  # the mapping app starts its probes afresh; the others' owners asked once
LOOK_S = 0.2  # how often the wait for the read-back looks again


class EventRecoverDue(osken_event.EventBase):
    """Time to look whether the switches are read back (the app's own timer)."""


class WriterPlanStore:
    """:class:`app.controller.plan_runner.PlanStore` and ``RecoveryStore`` over the controller's writer:
    the start of a plan and the recovery's reads and claims wait for the database (the greenthread
    polls, the hub runs on), step states and outcomes are queued."""

    def __init__(self, writer: db_writer.DbWriter) -> None:
        self.writer = writer

    def _call(self, fn: Any) -> Any:
        return self.writer.call(RESOURCE, fn, sleep=hub.sleep, timeout=10.0)

    def start(self, plan: Mapping[str, Any], *, epoch: int | None, source: str, owner: str, started_at: float,
              reservation_id: int | None = None) -> Any:
        try:
            return self._call(lambda r: r.start(plan, epoch=epoch, source=source, owner=owner,
                                                started_at=started_at, reservation_id=reservation_id))
        except Exception as exc:  # noqa: BLE001 - a refused write (deposed): the gate refuses the sends too
            LOG.warning("plan %s not recorded as running: %s", plan.get("id"), exc)
            return None

    def step(self, uid: str, step_id: str, state: str) -> Any:
        return self.writer.submit(db_writer.RECORD, RESOURCE, lambda r: r.step(uid, step_id, state))

    def finish(self, uid: str, record: Mapping[str, Any], *, keep: bool = True) -> Any:
        return self.writer.submit(db_writer.RECORD, RESOURCE, lambda r: r.finish(uid, record, keep=keep))

    def unfinished(self, epoch: int) -> list[Unfinished]:
        return list(self._call(lambda r: r.unfinished(epoch)))

    def claim(self, row_id: int, epoch: int) -> bool:
        return bool(self._call(lambda r: r.claim(row_id, epoch)))

    def complete(self, row_id: int, epoch: int, state: str, error: str, finished_at: float) -> bool:
        return bool(self._call(lambda r: r.complete(row_id, epoch, state, error, finished_at)))


def rule_of(switch: str, cookie: int, priority: int, table: int, match: Mapping[str, Any],
            out_ports: tuple[int, ...]) -> FlowRule | None:
    """A read-back packet rule as a FlowRule (None: not a band of ``rule_plan``, or not one output)."""
    band = rule_plan.band_of(cookie)
    if band is None or band.protocol != rule_plan.OF13 or len(out_ports) != 1:
        return None
    try:
        return FlowRule(switch, band.name, rule_plan.cookie_id(cookie), priority,
                        tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in match.items()), out_ports[0],
                        table)
    except ModelError:
        return None


class PlanRecoveryApp(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, RUNNER: PlanRunner}
    _EVENTS = [*RUNNER_EVENTS, EventRecoverDue]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_plan_recovery"
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.runner = shared_runner(kwargs, self, self.view, self.southbound)
        self.writer: db_writer.DbWriter | None = None
        self.store: WriterPlanStore | None = None
        self.last_enter = time.monotonic()
        self.pending: tuple[int, float] | None = None  # (epoch, elected at): a recovery waiting for the read-back
        self._due = Deadline(lambda ev: self.send_event(self.name, ev), EventRecoverDue, spawn=hub.spawn,
                             sleep=hub.sleep)
        if SETTINGS.ha.get("etcd") and SETTINGS.db_url:
            from app.db.plan_records import PlanRecords

            self.writer = db_writer.shared()
            self.writer.open(RESOURCE, PlanRecords)
            self.store = WriterPlanStore(self.writer)

    def stop(self) -> None:
        self._due.stop()
        if self.writer is not None:
            self.writer = None
            db_writer.release()
        super().stop()

    @set_ev_cls(events.EventSwitchEnter)
    def _enter(self, _ev: events.EventSwitchEnter) -> None:
        self.last_enter = time.monotonic()

    @set_ev_cls(events.EventMastership)
    @loud
    def _mastership(self, ev: events.EventMastership) -> None:
        self.pending = None
        if self.store is None:
            return
        if not ev.master or ev.epoch is None:
            self.runner.store, self.runner.epoch = None, None
            return
        self.runner.store, self.runner.epoch = self.store, ev.epoch
        now = time.monotonic()
        self.pending = (ev.epoch, now)
        self._due.push(now + SETTLE_S)

    @set_ev_cls(EventRecoverDue)
    @loud
    def _recover_due(self, _ev: EventRecoverDue) -> None:
        """The switches read back (or :data:`WAIT_S` passed): recover in a greenthread (it runs plans)."""
        if self.pending is None:
            return
        epoch, since = self.pending
        now = time.monotonic()
        if self.runner.epoch != epoch:
            self.pending = None
        elif not self._read_back() and now - since < WAIT_S:
            self._due.push(now + LOOK_S)
        else:
            self.pending = None
            hub.spawn(self._recover, epoch)

    def _read_back(self) -> bool:
        """Every OTS's XCONs known (none left "maybe") and no switch entered for a settle time."""
        if time.monotonic() - self.last_enter < SETTLE_S:
            return False
        sws = list(self.view.switches.values())
        return bool(sws) and not any(self.view.unknown_xcons.get(sw.dpid) for sw in sws if sw.kind == OTS)

    def held(self) -> Held:
        """What the switches hold now: the view's XCONs of each OTS read back, every packet switch's rules."""
        xcons = self.view.settled_xcons()
        rules: dict[str, list[FlowRule]] = {}
        for sw in list(self.view.switches.values()):
            if sw.kind == OTS:
                continue
            try:
                stats = self.southbound.flow_stats(sw.dpid)
            except Exception as exc:  # noqa: BLE001 - not read back: its steps count as applied
                LOG.warning("plan recovery: rules of %s: %s", sw.name, exc)
                continue
            rules[sw.name] = [r for st in stats if (r := rule_of(sw.name, st.cookie, st.priority, st.table,
                                                                 st.match, st.out_ports)) is not None]
        return Held(xcons, rules)

    def _recover(self, epoch: int) -> None:
        if self.store is None or self.runner.epoch != epoch:
            return
        try:
            done = self.runner.recover(self.store, epoch, self.held(),
                                       lambda r: r.source in HANDLED and r.source not in NOT_WANTED)
        except Exception as exc:  # noqa: BLE001 - the database refused (a newer leader): it recovers them
            LOG.warning("plan recovery under epoch %d stopped: %s", epoch, exc)
            return
        for d, state in done:
            JOURNAL.add("plan_recovered", epoch=epoch, state=state, **d.to_json())
            LOG.warning("plan recovery: plan %s of epoch %s: %s (%s) -> %s", d.record.plan.get("id"),
                        d.record.epoch, d.action, d.reason, state)
