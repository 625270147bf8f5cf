"""The elastic TE loop's shim (thin os-ken app, loaded with ``[te] enabled = true``).

It subscribes to the monitor's events on the bus (:class:`EventMonitor`), asks the plain
:class:`app.te.decisions.OffloadDecider` what to do with the network view's graph, and runs the
plans it returns through the live southbound, each in its own greenthread:

- *unconstrained imbalance* → the named elephants onto a temporary circuit (5-tuple steer rules);
- *elephant gone* is judged here, on the offload's own rule counters (every ``[te] poll`` seconds): a
  moved elephant no longer crosses the circuit the monitor watches, so its rate is read where it now
  is. Below the monitor's elephant threshold for ``[te] gone_intervals`` polls → release plan.
- *balanced growth* → :class:`app.te.growth.GrowthDecider`: a parallel circuit next to the link and
  ``split`` rules; each poll reads the link's whole load (the forwarding rules' bytes out of the old
  port plus the split rules' bytes, per direction) and, calm long enough, releases the circuit.

A failure (docs/failures.md) that darkens an offload's circuit releases it in the same event
(:meth:`app.te.decisions.OffloadDecider.broken`); its elephants fall back to the default path and the
next imbalance places them again.

The offload gain reads what each flow has sent from the monitor's fine data (``NetworkView.fine_flows``,
the flowstats backend's per-flow byte counts). An elephant the gain turned down is judged again on
each new count while it stays above the elephant threshold — a short flow ends first and is never
moved; a long one pays once it has sent enough (:meth:`TeApp._retry_waiting`).

``[te] placement = otter | cspf`` swaps the joint decider for :class:`app.te.placement.PlacementDecider`
(same interface): an imbalance, and every ``placement_period`` seconds, places every monitored flow
at once; what moves runs, is reserved and is released exactly as an offload (:meth:`TeApp._placement`).

Restart and takeover (:mod:`app.te.takeover`, docs/te-loop.md): every offload and grown circuit is a record
in the TE store (:mod:`app.te.store`: with ``[db] url`` the shared database's ``te_records``, through the
controller's writer thread, so the next leader on any host finds them; else ``X.te.json`` beside
``[controller] state_file``), written before its plan runs and removed once its release is done. A
(re)started controller first waits until the switches are back and settled, reads their TE rules and
XCONs back, and lets :func:`app.te.takeover.adopt` decide: consistent records are adopted (released
later by their counters, as before), the rest and the TE rules no record owns are released once
(:meth:`TeApp._takeover`).

Plans run through the shared :class:`~app.controller.plan_runner.PlanRunner`, which reserves the
circuit's packet ports for the offload (default forwarding keeps off them) from before the plan runs
until it is released. Every decision, taken or skipped, goes to the journal
(``te_decision``, with its reason) and the bus (:class:`app.controller.events.EventDecision`).
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any, TypedDict

from os_ken.base import app_manager
from os_ken.controller import event as osken_event
from os_ken.controller.handler import set_ev_cls
from os_ken.lib import hub

from app.controller import db_writer, events, guard, reconcile
from app.controller.api_routes import CONTEXT as ROUTES
from app.controller.api_routes import ApiRoutes
from app.controller.failures import broken_by, failures_of
from app.controller.guard import loud
from app.controller.journal import JOURNAL
from app.controller.lit_circuits import lit_circuits
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.metrics import CONTEXT as METRICS
from app.controller.metrics import ControllerMetrics
from app.controller.model import OTS, PACKET
from app.controller.monitor_app import EventMonitor
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OFP_VERSIONS, OpenFlowSouthbound
from app.controller.plan_runner_live import RUNNER, RUNNER_EVENTS, PlanRunner, shared_runner
from app.controller.reservation_circuits import LIT_CONTEXT, LitReservations
from app.controller.ridden_circuits import held_share, link_riders, plan_refusal
from app.controller.runtime import SETTINGS
from app.controller.services import Service, app_scheduler
from app.te.damping import Damper
from app.te.decisions import OFFLOAD, RELEASE, SKIP, Decision, Offload, OffloadDecider, link_capacity
from app.te.elastic import rate_mbps
from app.te.gain import judged_rate, slowing
from app.te.growth import GROW, SHRINK, Growth, GrowthDecider, GrowthDecision
from app.te.placement import PlacementDecider, PlacementPolicy
from app.te.store import DbTeStore, StoreError, TeStore, open_store
from app.te.takeover import (
    GROWTH,
    LIT,
    RELEASING,
    TE_BANDS,
    Release,
    SwitchState,
    TeRecord,
    adopt,
    circuits_by_end,
    growth_record,
    offload_record,
    rule_from_stat,
    with_state,
)
from app.update.model import normalise_match
from monitor.events import BALANCED_GROWTH, ELEPHANT_GONE, UNCONSTRAINED_IMBALANCE, Event
from pce.otter.graph import hop_id
from topology import rule_plan
from topology.flow import FiveTuple

LOG = logging.getLogger("mlte.controller.te")
RETRY_S = 0.1  # how often the waiting elephants are looked at for a newer count
#: seconds after the start the takeover waits at most for the nodes its records name (a node that does not
#: come back leaves its records in the store for a later controller)
TAKEOVER_WAIT_S = 30.0
HELD_EVENTS = 64  # monitor events kept (the newest) while the takeover pass is not done


class GainSettings(TypedDict):
    """The offload gain's keyword arguments of both deciders."""

    overhead_s: float
    min_gain_s: float


class EventTePoll(osken_event.EventBase):
    """Period of ``[te] poll``: the offloads' and grown links' own counters, the periodic re-solve."""


class EventTeRetry(osken_event.EventBase):
    """Period of :data:`RETRY_S`: elephants the gain turned down, judged again on a newer count."""


def services(cfg: dict[str, Any]) -> list[Service]:
    """The TE app's periodic work (:mod:`app.controller.services`)."""
    return [Service("poll", EventTePoll, float(cfg["poll"])), Service("retry", EventTeRetry, RETRY_S)]


def _waits(d: Decision) -> bool:
    """A skip judged again on the elephant's next count: the gain did not pay yet, or one of its hosts has no
    learnt address yet (a leader that took over knows the hosts behind the adopted rules without it until
    they ARP; the monitor announces an imbalance only once)."""
    return d.kind == SKIP and bool(d.detail.get("gain") or d.detail.get("host_unknown"))


class TeApp(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, ROUTES: ApiRoutes, RUNNER: PlanRunner,
                 LIT_CONTEXT: LitReservations, MASTERSHIP: Mastership, METRICS: ControllerMetrics}
    _EVENTS = [events.EventDecision, *RUNNER_EVENTS]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_te"
        self.metrics: ControllerMetrics = kwargs.get(METRICS) or ControllerMetrics(process=False)  # decision times
        # several controllers: a follower decides nothing; elected, it runs the takeover pass under its epoch
        self.mastership: Mastership = kwargs.get(MASTERSHIP) or Mastership()
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        cfg = SETTINGS.section("te")  # one table: app/config.py
        self.cfg = cfg
        self.decider = OffloadDecider(
            Damper(min_hold_s=float(cfg["min_hold_s"]), max_moves=int(cfg["max_moves"]),
                   interval_s=float(cfg["move_interval_s"])),
            stable_ms=float(cfg["stable_ms"]), verify_timeout_s=float(cfg["verify_timeout"]),
            young_horizon_s=float(cfg["young_horizon_s"]), **self._gain_settings(cfg))
        lit = kwargs.get(LIT_CONTEXT)
        self.lit: LitReservations = LitReservations() if lit is None else lit  # the reservations app's
        if cfg["placement"] != "joint":
            self.decider = self._placement(cfg)
        self.growth = GrowthDecider(
            Damper(min_hold_s=float(cfg["grow_hold_s"]), max_moves=int(cfg["max_moves"]),
                   interval_s=float(cfg["move_interval_s"]), on=float(cfg["grow_trigger_util"]),
                   off=float(cfg["shrink_util"])),
            target_util=float(cfg["grow_target_util"]), calm_intervals=int(cfg["grow_calm_intervals"]),
            bits=int(cfg["split_bits"]), stable_ms=float(cfg["stable_ms"]))
        self.link_bytes: dict[tuple[str, str], tuple[float, int]] = {}  # (link, switch) -> last reading
        self._said: dict[str, str] = {}  # link -> kind of the last calm-poll decision journalled (no repeats)
        self.runner = shared_runner(kwargs, self, self.view, self.southbound)
        self.thresholds: dict[int, float] = {}  # offload id -> Mbit/s below which its elephants are gone
        self.releasing: set[int] = set()  # offloads being released (a teardown darkens ports on its way)
        self.counters: dict[int, tuple[float, int, int]] = {}  # offload id -> (t, bytes, polls below)
        # elephants the offload gain turned down -> (their event, the highest Mbit/s they have shown (named or
        # counted since), time of the count judged)
        self.waiting: dict[FiveTuple, tuple[Event, float, float]] = {}
        # restart and takeover: the records of this loop's circuits (app/te/store.py); ``epoch``: the leader's,
        # set by the election when there is one (None: a lone controller)
        ctl = SETTINGS.section("controller")
        self.writer: db_writer.DbWriter | None = None
        self.store: TeStore = self._open_store(str(ctl.get("state_file", "")))
        self.epoch: int | None = None
        self.adopted = False  # decisions allowed: the takeover pass is done, or there was nothing to take over
        self.taken_over = False  # the takeover pass is done
        self.own: set[tuple[str, int]] = set()  # records this process wrote (not the takeover's to decide)
        self.held_events: list[EventMonitor] = []  # monitor events that came before it, decided after it
        self.started = self.last_enter = time.monotonic()
        self.settle = reconcile.settle_seconds(float(ctl["link_timeout"]), float(ctl["lldp_interval"]))
        routes = kwargs.get(ROUTES)
        if routes is not None:
            routes[("GET", "/te")] = lambda q, d: self.status()
        self.services = app_scheduler(self, services(cfg))

    def _open_store(self, state_file: str) -> TeStore:
        """``[db] url`` set: the shared database's ``te_records`` (every controller sees them; writes go
        through the writer thread and its epoch fence); else the file beside the state file."""
        if not SETTINGS.db_url:
            return open_store(state_file)
        self.writer = writer = db_writer.shared()
        return DbTeStore(lambda fn: writer.call(db_writer.DATABASE, fn, sleep=hub.sleep))

    def _placement(self, cfg: dict[str, Any]) -> PlacementDecider:
        """``otter``/``cspf``: the placement decider over the monitor's fine data, default forwarding
        (a flow's current path) and the reservations app's lit circuits (held where they are)."""
        def reservations(_now: float) -> list[dict[str, Any]]:
            out = []
            share = held_share(dict(self.lit))  # grooming: sharers of a circuit split its capacity
            for c in list(self.lit.values()):
                ends = [f"{r.switch}:{dict(r.match)['in_port']}" for r in c.ingress[:2]]
                if len(ends) == 2 and c.segments:
                    path = tuple(hop_id(*x, *y) for x, y in map(sorted, c.segments))
                    out.append({"id": c.ident, "src": ends[0], "dst": ends[1], "bandwidth": share.get(c.ident, c.capacity),
                                "start_ts": -math.inf, "end_ts": math.inf, "path": path})
            return out

        return PlacementDecider(
            PlacementPolicy(str(cfg["placement"]), period_s=float(cfg["placement_period"])), self.decider.damper,
            monitored=lambda: self.view.fine_flows, reservations=reservations,
            link_loads=lambda: self.view.link_loads,
            forwarding=lambda: {self.view.name_of(d): r for d, r in self.view.forwarding_rules.items()},
            stable_ms=float(cfg["stable_ms"]), verify_timeout_s=float(cfg["verify_timeout"]),
            event_scope=str(cfg["placement_scope"]), **self._gain_settings(cfg))

    @staticmethod
    def _gain_settings(cfg: dict[str, Any]) -> GainSettings:
        """The offload gain's settings, the same for every ``[te] placement`` (a policy judged with
        another bar than the joint decider's would be compared on the bar, not on its placements)."""
        return GainSettings(overhead_s=float(cfg["overhead_s"]), min_gain_s=float(cfg["min_gain_s"]))

    def start(self):
        thread = super().start()
        # the joint circuit-lighting model's solver stack takes ~0.5 s to import: pay it now, not on the
        # first elephant (it was a third of that offload's delay)
        import pce.circuits  # noqa: F401

        self.services.start()
        return thread

    def stop(self):
        self.services.stop()
        if self.writer is not None:
            self.writer = None
            db_writer.release()
        super().stop()

    # ---- monitor events ----------------------------------------------------------------------------
    @set_ev_cls(EventMonitor)
    @loud
    def _monitor(self, ev: EventMonitor) -> None:
        e: Event = ev.event
        if not self.mastership.acting():
            return
        if not self.adopted:  # decided once the takeover pass is done (an imbalance is announced only once)
            LOG.info("TE: %s on %s waits for the takeover of the previous controller's circuits", e.kind, e.circuit)
            self.held_events = [*self.held_events[-(HELD_EVENTS - 1):], ev]
            return
        if e.kind in (BALANCED_GROWTH, UNCONSTRAINED_IMBALANCE) and (riders := link_riders(e.circuit, self.lit)):
            self._note(Decision(SKIP, f"{e.circuit} carries reservation(s) {', '.join(map(str, riders))}: "
                                      "their traffic stays on the circuit it was admitted on", e.flows))
            return
        if e.kind == BALANCED_GROWTH:
            t0 = time.perf_counter()
            grown = self.growth.on_event(e, self.view.graph()[0], time.monotonic())
            self.metrics.te_decided("growth", time.perf_counter() - t0)
            for g in grown:
                self._note(g)
                if g.kind == GROW:
                    hub.spawn(self._run, g)
            return
        if e.kind != UNCONSTRAINED_IMBALANCE:
            return  # elephant gone is judged on the offload's own counters (see the module docstring)
        graph, _ = self.view.graph()
        rates = dict(zip(e.flows, e.detail.get("elephant_mbps") or [], strict=False))
        t0 = time.perf_counter()
        decided = self.decider.on_event(e, graph, time.monotonic(), flow_bytes=self._flow_bytes,
                                        loads_mbps=self._loads(e, graph), flow_count=self.view.fine_flows.get)
        self.metrics.te_decided("offload", time.perf_counter() - t0)
        for d in decided:
            self._note(d)
            if _waits(d):  # judged again while it lasts (_retry_waiting)
                now = time.monotonic()
                self.waiting.update({f: (e, float(rates.get(f, 0.0)), now) for f in d.flows})
            self._start(d, e)

    def _loads(self, e: Event, graph: Any) -> dict[str, float]:
        """The congested circuit's load, for the residual graph the decision plans on."""
        cap = link_capacity(graph, e.circuit)
        return {e.circuit: float(e.detail.get("util", 0.0)) * cap} if cap else {}

    def _start(self, d: Decision, e: Event) -> None:
        if d.kind == OFFLOAD and d.offload is not None:
            self.thresholds[d.offload.ident] = float(e.detail.get("threshold_mbps", 0.0))
            hub.spawn(self._run, d)

    def _flow_bytes(self, f: FiveTuple) -> float | None:
        """Bytes the flow sent as the monitor's fine data counted them (None: no count, e.g. sFlow)."""
        count = self.view.fine_flows.get(f)
        return float(count.bytes) if count is not None else None

    # ---- flows the gain turned down: judged again on each new count --------------------------------
    @set_ev_cls(EventTeRetry)
    def _retry(self, ev: EventTeRetry) -> None:
        self.services.run("retry", self._retry_waiting)

    def _retry_waiting(self) -> None:
        """A waiting elephant with a newer byte count is judged again, at the highest rate it has shown
        (:func:`app.te.gain.judged_rate`: a falling rate may be a flow ending, and must not make moving
        it look better), but not on a count that shows it slowing (:func:`app.te.gain.slowing`: it may be
        ending); one below the elephant threshold (or no longer counted) ended before a move paid."""
        for f, (e, named, seen) in list(self.waiting.items()):
            count = self.view.fine_flows.get(f)
            if count is not None and count.t <= seen:
                continue  # no news: judged on this count already
            if count is None or count.mbps < float(e.detail.get("threshold_mbps", 0.0)):
                del self.waiting[f]
                self._note(Decision(SKIP, "ended (below the elephant rate) before an offload paid", (f,)))
                continue
            self.waiting[f] = (e, max(named, count.mbps), count.t)
            if slowing(count.mbps, count.bytes, count.seconds):
                continue  # maybe ending inside this count's interval: the next count tells
            rate = judged_rate(named, count.mbps, count.bytes, count.seconds)
            now = time.monotonic()
            ev = Event(now, e.circuit, UNCONSTRAINED_IMBALANCE, (f,),
                       {**e.detail, "elephant_mbps": [round(rate, 3)]})
            graph, _ = self.view.graph()
            for d in self.decider.on_event(ev, graph, now, flow_bytes=self._flow_bytes, loads_mbps=self._loads(e, graph),
                                           flow_count=self.view.fine_flows.get):
                if _waits(d):
                    continue  # still does not pay (or its host is not placed yet): wait quietly for the next count
                self.waiting.pop(f, None)
                self._note(d)
                self._start(d, e)

    def _note(self, d: Decision | GrowthDecision) -> None:
        data = d.as_dict()
        JOURNAL.add("te_decision", **{"gain": None, **data})
        LOG.info("TE %s: %s", d.kind, d.reason)
        self.send_event_to_observers(events.EventDecision(data))

    # ---- executing ---------------------------------------------------------------------------------
    def _run(self, d: Decision | GrowthDecision) -> None:
        """Execute an offload/release or a grow/shrink plan; the new circuit's ports are reserved from
        before the plan until its release (default forwarding keeps off them)."""
        if isinstance(d, GrowthDecision):
            assert d.growth is not None
            ident, ends, owner, opens, closes = d.growth.ident, d.growth.new_ends, f"grow:{d.growth.ident}", GROW, SHRINK
            decider: Any = self.growth
        else:
            assert d.offload is not None
            ident, ends, owner, opens, closes = d.offload.ident, d.offload.ends, f"te:{d.offload.ident}", OFFLOAD, RELEASE
            decider = self.decider
        assert d.plan is not None
        if (why := plan_refusal(d.plan, self.lit)) is not None:  # grooming: never under a live reservation
            self._note(Decision(SKIP, f"{d.kind} {ident} not run: {why}", getattr(d, "flows", ())))
            return
        if d.kind == RELEASE:
            self.releasing.add(ident)
        try:
            record = self._record(d)
            self._persist(record if d.kind == opens else with_state(record, RELEASING))
            rec = self.runner.run(d.plan, owner, "te", ports=ends if d.kind == opens else (),
                                  releases=d.kind == closes, context={"decision": d.kind, "offload": ident}).to_json()
            ok = rec["state"] == "done"
            decider.done(d, ok, time.monotonic())
            if ok and d.kind == opens:
                self._persist(with_state(record, LIT))
            elif (ok and d.kind == closes) or (not ok and d.kind == opens and rec["state"] == "rolled_back"):
                self._forget(record)  # a failed release (or roll-back) stays: the next takeover finishes it
            JOURNAL.add("te_done", decision=d.kind, offload=ident, ok=ok, plan=rec["id"], state=rec["state"],
                        error=rec.get("error", ""), seconds=round(rec["finished_at"] - rec["started_at"], 4))
            if (d.kind == opens and not ok) or (d.kind == closes and ok):  # the runner gave the ports back
                self.counters.pop(ident, None)
        except Exception as exc:
            guard.failures.append(f"te: {exc!r}")
            guard.ERROR_LOG.exception("TE plan %s failed", d.plan.id)
        finally:
            if d.kind == RELEASE:
                self.releasing.discard(ident)

    # ---- restart and takeover: the records (app/te/store.py) ----------------------------------------
    def _record(self, d: Decision | GrowthDecision) -> TeRecord:
        """The store's record of a decision's offload or growth (its state before the plan: opening)."""
        since = time.time()
        if isinstance(d, GrowthDecision):
            assert d.growth is not None
            return growth_record(d.growth, since=since, epoch=self.epoch)
        assert d.offload is not None
        return offload_record(d.offload, since=since, threshold_mbps=self.thresholds.get(d.offload.ident, 0.0),
                              epoch=self.epoch)

    def _persist(self, record: TeRecord) -> None:
        try:
            self.store.put(record)
            self.own.add(record.key)
        except (StoreError, OSError) as exc:  # the circuit still works; a takeover would release it
            guard.failures.append(f"te store: {exc!r}")
            guard.ERROR_LOG.error("TE store: %s %s not recorded: %s", record.kind, record.ident, exc)

    def _forget(self, record: TeRecord) -> None:
        try:
            self.store.remove(record.kind, record.ident, self.epoch)
            self.own.discard(record.key)
        except (StoreError, OSError) as exc:
            guard.failures.append(f"te store: {exc!r}")
            guard.ERROR_LOG.error("TE store: %s %s not removed: %s", record.kind, record.ident, exc)

    @set_ev_cls(events.EventSwitchEnter)
    def _switch_entered(self, ev: events.EventSwitchEnter) -> None:
        self.last_enter = time.monotonic()

    def _takeover_due(self, records: list[TeRecord], now: float) -> bool:
        """The switches are back: every node the records name connected (or TAKEOVER_WAIT_S passed), no
        switch entered for one settle time, and every OTS read back (no XCON of it left "maybe")."""
        if now - self.last_enter < self.settle:
            return False
        if now - self.started >= TAKEOVER_WAIT_S:
            return True
        sws = list(self.view.switches.values())
        if not any(sw.kind == PACKET for sw in sws):
            return False
        need = set().union(*(r.nodes() for r in records)) if records else set()
        if need - {sw.name for sw in sws}:
            return False
        return not any(self.view.unknown_xcons.get(sw.dpid) for sw in sws if sw.kind == OTS)

    def switch_state(self) -> SwitchState:
        """What the switches hold now: the TE bands' rules read back (a switch that does not answer is left
        out), the applied XCONs, and the lit circuits no reservation or default forwarding uses."""
        rules: dict[str, list] = {}
        xcons = self.view.settled_xcons()
        for sw in list(self.view.switches.values()):
            if sw.kind == OTS:
                continue
            try:
                stats = [st for band in TE_BANDS for st in self.southbound.flow_stats(sw.dpid, band.cookie(), band.mask())]
            except Exception as exc:  # noqa: BLE001 - a switch that does not answer: its records wait
                LOG.warning("TE takeover: rules of %s: %s", sw.name, exc)
                continue
            rules[sw.name] = [r for st in stats if (r := rule_from_stat(sw.name, st.cookie, st.priority, st.match,
                                                                         st.out_ports, st.table)) is not None]
        busy = set(self.view.reserved_ports) | {(self.view.name_of(d), p) for d, table in
                                                self.view.forwarding_rules.items() for p in table.values()}

        def end(s: str) -> tuple[str, int]:
            sw, port = s.rsplit(":", 1)
            return sw, int(port)

        lit = [(end(c.a_end), end(c.z_end), c.xcons) for c in lit_circuits(self.view.graph()[0])]
        return SwitchState(rules, xcons, circuits_by_end(lit, busy))

    def _takeover(self) -> None:
        """Once, after the start: adopt the stored offloads and growths the switches still hold, release the
        rest and the TE rules no record owns (:func:`app.te.takeover.adopt`)."""
        now = time.monotonic()
        try:
            loaded = self.store.load()
        except (StoreError, OSError) as exc:  # the database unreachable: the pass waits for the next poll
            LOG.warning("TE takeover: the records cannot be read (%s); trying again next poll", exc)
            return
        records = [r for r in loaded if r.key not in self.own]
        if not self._takeover_due(records, now):
            if not records and not self.adopted:
                self._early_start()
            return
        logged = self._logged_ident()
        if logged is None:
            return
        result = adopt(records, self.switch_state(), live=[r for r in loaded if r.key in self.own])
        self.taken_over = True
        self.decider.skip_ids(max(result.max_ident.get(OFFLOAD, 0), result.max_ident.get(GROWTH, 0), logged))
        self.growth.skip_ids(max(*result.max_ident.values(), logged, 0))
        wall = time.time()
        for rec in result.keep:
            moved_at = now - max(wall - rec.since, 0.0)
            if isinstance(rec.body, Growth):
                self.growth.adopt(rec.body, moved_at)
            else:
                self.decider.adopt(rec.body, moved_at)
                self.thresholds[rec.ident] = rec.threshold_mbps
            self.runner.reserve(rec.owner, rec.ends)
            if rec.epoch != self.epoch and self.epoch is not None:
                self._persist(TeRecord(rec.kind, rec.body, LIT, rec.since, rec.threshold_mbps, self.epoch))
            JOURNAL.add("te_adopted", kind=rec.kind, id=rec.ident, circuit=rec.body.circuit_id,
                        xcons=[x.to_json() for x in rec.xcons], rules=len(rec.ingress) + len(rec.egress),
                        age_s=round(wall - rec.since, 3))
            LOG.info("TE takeover: %s %s on circuit %s adopted", rec.kind, rec.ident, rec.body.circuit_id)
        for rec in result.forget:
            self._forget(rec)
        for rel in result.release:
            data: dict[str, Any] = {"decision": RELEASE, "reason": f"takeover: {rel.reason}", "flows": [], "plan": rel.plan.id,
                    "offload": rel.record.ident if rel.record else None, "gain": None}
            JOURNAL.add("te_decision", **data)
            LOG.info("TE takeover release: %s", rel.reason)
            self.send_event_to_observers(events.EventDecision(data))
            hub.spawn(self._run_release, rel)
        JOURNAL.add("te_takeover", adopted=len(result.keep), released=len(result.release),
                    forgotten=len(result.forget), deferred=len(result.deferred),
                    waited_s=round(now - self.started, 3), held_events=len(self.held_events))
        self._open()

    def _early_start(self) -> None:
        """No record to take over: decisions need not wait for the switches to settle if the packet switches
        connected so far hold no TE rule. The full pass still runs once they settle (orphans on a switch that
        connects later); it leaves this process's own records alone."""
        packet = [sw for sw in self.view.switches.values() if sw.kind == PACKET]
        if not packet:
            return
        for sw in packet:
            try:
                held = [st for band in TE_BANDS for st in self.southbound.flow_stats(sw.dpid, band.cookie(), band.mask())]
            except Exception as exc:  # noqa: BLE001 - a switch that does not answer: wait for the full pass
                LOG.warning("TE early start: rules of %s: %s", sw.name, exc)
                return
            if held:
                return
        logged = self._logged_ident()
        if logged is None:
            return
        self.decider.skip_ids(logged)
        self.growth.skip_ids(logged)
        LOG.info("TE: no record and no TE rule on %d packet switch(es): deciding before the takeover pass", len(packet))
        self._open()

    def _logged_ident(self) -> int | None:
        """The highest TE plan number in the shared plan log (0 without one): new plans are numbered above
        it, since every record may have been released before this start or takeover (the soak found a
        new leader's ``offload1`` refused by the plans table's unique uid). None: unreadable now."""
        try:
            return self.store.highest_plan_ident()
        except StoreError as exc:
            LOG.warning("TE: the plan log's ids cannot be read (%s); trying again next poll", exc)
            return None

    def _open(self) -> None:
        """Decisions from now on; what the monitor said meanwhile is decided now (an adopted elephant:
        "already offloaded")."""
        self.adopted = True
        held, self.held_events = self.held_events, []
        for ev in held:
            self._monitor(ev)

    def _run_release(self, rel: Release) -> None:
        """A takeover's release, once, through the runner like every release; its record goes when it is done
        (a failure leaves it for the next controller)."""
        if (why := plan_refusal(rel.plan, self.lit)) is not None:  # grooming: never under a live reservation
            JOURNAL.add("te_done", decision=RELEASE, offload=rel.record.ident if rel.record else None, ok=False,
                        plan=rel.plan.id, state="refused", error=why, takeover=True, seconds=0.0)
            return
        try:
            rec = self.runner.run(rel.plan, rel.owner, "te", ports=(), releases=True,
                                  context={"decision": RELEASE, "takeover": True}).to_json()
            ok = rec["state"] == "done"
            JOURNAL.add("te_done", decision=RELEASE, offload=rel.record.ident if rel.record else None, ok=ok,
                        plan=rec["id"], state=rec["state"], error=rec.get("error", ""), takeover=True,
                        seconds=round(rec["finished_at"] - rec["started_at"], 4))
            if ok and rel.record is not None:
                self._forget(rel.record)
        except Exception as exc:
            guard.failures.append(f"te: {exc!r}")
            guard.ERROR_LOG.exception("TE takeover plan %s failed", rel.plan.id)

    # ---- failures: an offload whose circuit a failure darkened is released ---------------------------
    @set_ev_cls([events.EventPortChange, events.EventSwitchLeave])
    def _network_changed(self, ev: Any) -> None:
        if not self.decider.offloads or not self.mastership.acting():
            return
        f = failures_of(self.view.switches.values())
        if not f.ports:
            return
        for off in list(self.decider.offloads.values()):
            cause = broken_by(off.xcons, off.ends, f)
            if cause is not None and off.ident not in self.releasing:
                self.releasing.add(off.ident)
                d = self.decider.broken(off, cause)
                self._note(d)
                hub.spawn(self._run, d)

    # ---- elephant gone: the offload's own counters ---------------------------------------------------
    @set_ev_cls(EventTePoll)
    def _poll(self, ev: EventTePoll) -> None:
        self.services.run("poll", self._poll_once)

    @set_ev_cls(events.EventMastership)
    def _mastership(self, ev: events.EventMastership) -> None:
        """Elected: the takeover pass again, under the new epoch, once the switches are read back (what the
        previous leader lit is adopted or released); deposed: forget what we decided (the next leader
        takes it over from the switches and the records)."""
        if ev.master:
            self.epoch = ev.epoch
            self.taken_over = self.adopted = False
            self.own = set()
            self.started = time.monotonic()
        else:
            self.decider.offloads.clear()
            self.growth.growths.clear()
            self.thresholds.clear()
            self.counters.clear()
            self.releasing.clear()
            self.held_events = []

    def _poll_once(self) -> None:
        if not self.mastership.acting():
            return
        if not self.taken_over:
            self._takeover()
            if not self.taken_over:
                return  # (an early start decides on monitor events meanwhile; the counters wait for the pass)
        for off in list(self.decider.offloads.values()):
            self._check_gone(off)
        for g in list(self.growth.growths.values()):
            self._check_calm(g)
        if isinstance(self.decider, PlacementDecider):  # PER: the periodic re-solve
            now = time.monotonic()
            for d in self.decider.tick(self.view.graph()[0], now):
                self._note(d)
                self._start(d, Event(now, "", UNCONSTRAINED_IMBALANCE, d.flows,
                                     {"threshold_mbps": self.decider.threshold_mbps}))

    def _check_gone(self, off: Offload) -> None:
        fwd = [r for r in off.ingress if r.switch == off.ingress[0].switch]
        sw = self.view.by_name(fwd[0].switch)
        if sw is None:
            return
        try:
            stats = self.southbound.flow_stats(sw.dpid, rule_plan.STEER.cookie(off.ident),
                                               rule_plan.STEER.mask(by_id=True))
        except Exception as exc:  # noqa: BLE001 - a switch that does not answer: try again next poll
            LOG.warning("TE: counters of offload %s: %s", off.ident, exc)
            return
        keys = {(r.priority, r.match) for r in fwd}
        total = sum(st.bytes for st in stats if (st.priority, normalise_match(st.match)) in keys)
        now = time.monotonic()
        prev = self.counters.get(off.ident)
        if prev is None:
            self.counters[off.ident] = (now, total, 0)
            return
        t0, b0, below = prev
        mbps = (total - b0) * 8 / 1e6 / max(now - t0, 1e-3)
        below = below + 1 if mbps < self.thresholds.get(off.ident, 0.0) else 0
        self.counters[off.ident] = (now, total, below)
        if below >= int(self.cfg["gone_intervals"]):
            self.counters.pop(off.ident, None)
            gone = Event(now, off.circuit_id, ELEPHANT_GONE, off.flows, {"last_mbps": round(mbps, 3)})
            for d in self.decider.on_event(gone, self.view.graph()[0], now):
                self._note(d)
                if d.kind == RELEASE:
                    hub.spawn(self._run, d)

    # ---- balanced growth: the grown link's whole load -------------------------------------------------
    def _check_calm(self, g: Growth) -> None:
        """Per direction: bytes the near end sends into the old link (forwarding rules out of its port)
        plus into the parallel circuit (its split rules); the busier direction is the link's load."""
        now = time.monotonic()
        rates = []
        for (sw_name, old_port) in g.ends:
            sw = self.view.by_name(sw_name)
            if sw is None:
                return
            try:
                fwd = self.southbound.flow_stats(sw.dpid, rule_plan.FORWARDING.cookie(), rule_plan.FORWARDING.mask())
                split = self.southbound.flow_stats(sw.dpid, rule_plan.SPLIT.cookie(g.ident),
                                                   rule_plan.SPLIT.mask(by_id=True))
            except Exception as exc:  # noqa: BLE001 - a switch that does not answer: try again next poll
                LOG.warning("TE: counters of growth %s at %s: %s", g.ident, sw_name, exc)
                return
            ports = {p for sw2, p in g.new_ends if sw2 == sw_name} | {old_port}
            total = (sum(st.bytes for st in fwd if old_port in st.out_ports)
                     + sum(st.bytes for st in split if set(st.out_ports) & ports))
            rate = rate_mbps(self.link_bytes.get((g.link, sw_name)), now, total)
            self.link_bytes[(g.link, sw_name)] = (now, total)
            if rate is not None:
                rates.append(rate)
        if len(rates) < len(g.ends):
            return
        d = self.growth.observe(g.link, max(rates), now)
        if d is None or (d.kind != SHRINK and self._said.get(g.link) == d.kind):
            return
        self._said[g.link] = d.kind
        self._note(d)
        if d.kind == SHRINK:
            for key in [k for k in self.link_bytes if k[0] == g.link]:
                del self.link_bytes[key]
            hub.spawn(self._run, d)

    def status(self) -> dict[str, Any]:
        return {"adopted": self.taken_over, "deciding": self.adopted, "offloads": {str(k): o.to_json() for k, o in self.decider.offloads.items()},
                "growths": {k: g.to_json() for k, g in self.growth.growths.items()}}
