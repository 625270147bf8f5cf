"""Monitor app (thin os-ken shim around :class:`monitor.core.MonitorCore`).

Every Ts (``[monitor] interval``, with ±5% jitter) it requests PORT_STATS from every datapath
(OF1.3 packet switches and OF1.0 OTS nodes) and QUEUE_STATS from the OF1.3 switches — queue
``tx_errors`` is where shaped egress queues count drops (``monitor/drops.py``). Replies go into the
core; as soon as every reply of the poll is in (at most ``reply_timeout`` later) the core's tick
classifies circuits and returns fine-monitoring actions, which this app executes through OVSDB
(sFlow on/off per bridge, found by datapath id). A circuit that just became hot by drops is looked
at again ``fine_first_window`` after that tick and then every 0.1 s until its elephants are named
or the next poll is due, so an elephant is named from its first fine samples rather than one
interval later (:meth:`monitor.core.MonitorCore.early`). Events are broadcast as
:class:`EventMonitor`, written to the controller journal (``GET /events``, type ``monitor``) and
stored (``mon_events``) when a database is configured — through the controller's writer thread
(:mod:`app.controller.db_writer`), so a locked database never stalls the hub.

``[monitor] fine_backend = "flowstats"``: instead of sFlow, fine monitoring installs temporary
per-5-tuple counting rules on the hot switches and polls their flow statistics every Ts
(:mod:`monitor.flowstats`). Latency: every ``probe_interval`` one probe frame per packet link
(PACKET_OUT at one end, trapped back by PACKET_IN at the other, :mod:`monitor.probes`), corrected by
ECHO-measured control-channel delays; ``GET /monitor/latency`` and ``GET /monitor/fine`` on the
control API.

Everything runs on the eventlet hub (the launcher patches threads only): no blocking sockets or
sleeps here — ``hub.sleep`` and green sockets.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
from collections.abc import Iterable
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import event, ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_0, ofproto_v1_3

from app.config import DEFAULTS, load_config
from app.controller import db_writer, ofmsg
from app.controller import events as ctl_events
from app.controller.api_routes import CONTEXT as ROUTES
from app.controller.api_routes import ApiRoutes
from app.controller.guard import loud
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.lit_circuits import lit_circuits
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.metrics import CONTEXT as METRICS
from app.controller.metrics import ControllerMetrics
from app.controller.model import PACKET, PacketLink
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.controller.runtime import SETTINGS
from app.controller.services import Deadline, Service, app_scheduler
from app.controller.view_changes import ViewChange
from monitor import flowstats
from monitor.core import FineSource, MonitorCore, circuits_from_graph
from monitor.counters import PortSnapshot
from monitor.events import UNCONSTRAINED_IMBALANCE, Event
from monitor.fine import ENABLE, FineAction
from monitor.flowstats import FlowCounting, RuleOp
from monitor.ovsdb_sflow import OvsdbError, OvsSflow, bridges_by_dpid
from monitor.path_corroboration import LATENCY_SHIFT, RouteMemory
from monitor.probes import (
    PROBE_ETHERTYPE,
    LatencyMonitor,
    link_id,
    parse_probe,
    probe_frame,
    probed_links,
    rotate,
)
from monitor.sflow import SflowCollector
from monitor.sflow.sflow_rt import SflowRtBackend
from topology import rule_plan

LOG = logging.getLogger("mlte.controller.monitor")
COOKIE_PROBE = rule_plan.PROBE.cookie()  # the probe trap rule (topology/rule_plan.py)
PROBE_PRIORITY = rule_plan.PROBE.priority()
ECHO_MAGIC = b"MLTEECHO"
STORE = "monitor_store"  # the MonitorStore, a resource of the db_writer thread


COST_KEYS = ("polls", "coarse_sent", "coarse_received", "fine_sent", "fine_received", "replies_late",
             "sflow_received")  # sFlow: UDP datagram bytes at the collector (not OpenFlow)


def counting_messages(ops: list[RuleOp], idle_timeout: int) -> list:
    """The FLOW_MODs of fine monitoring's rule operations: learn rules (forward, then a copy to the
    controller with a non-host eth_dst) and per-5-tuple count rules (idle after ``idle_timeout`` s)."""
    msgs = []
    for op in ops:
        fields: dict[str, Any] = {"eth_type": 0x0800, "eth_dst": op.eth_dst}
        priority = flowstats.LEARN_PRIORITY
        if op.kind == flowstats.KIND_COUNT:
            assert op.key is not None
            priority = flowstats.COUNT_PRIORITY
            fields.update(ipv4_src=op.key.src, ipv4_dst=op.key.dst, ip_proto=op.key.proto)
            if op.key.proto in (6, 17):
                name = "tcp" if op.key.proto == 6 else "udp"
                fields[f"{name}_src"], fields[f"{name}_dst"] = op.key.sport, op.key.dport
        if op.op == flowstats.DELETE:
            msgs.append(ofmsg.flow_delete_strict(op.cookie, priority, fields))
        elif op.kind == flowstats.KIND_LEARN:
            actions = [ofmsg.output(op.port), ofmsg.set_eth_dst(flowstats.LEARN_MAC),
                       ofmsg.to_controller(flowstats.LEARN_COPY_BYTES)]
            msgs.append(ofmsg.flow_add(op.cookie, priority, fields, actions))
        else:
            msgs.append(ofmsg.flow_add(op.cookie, priority, fields, [ofmsg.output(op.port)], idle_timeout=idle_timeout))
    return msgs


class EventMonitorPoll(event.EventBase):
    """Period of ``[monitor] interval`` (±5 %): request the statistics of every datapath."""


class EventRepliesDue(event.EventBase):
    """The poll's reply timeout passed: tick with what came (the rest counts as ``replies_late``)."""


class EventEarlyWindow(event.EventBase):
    """A fine window of the circuits that just became hot, ``poll`` the poll that found them."""

    def __init__(self, poll: int) -> None:
        super().__init__()
        self.poll = poll


class EventDropWatch(event.EventBase):
    """Period of ``[monitor] drop_watch_interval``: read the queue drops of the watched circuit ends."""


class EventEchoRound(event.EventBase):
    """Period of ``[monitor] probe_interval``, half an interval before the probes: ECHO every switch."""


class EventProbeRound(event.EventBase):
    """Period of ``[monitor] probe_interval``: one latency probe per packet link."""


def services(interval: float, probe_interval: float, drop_watch: float = 0.0) -> list[Service]:
    """The monitor's periodic work (:mod:`app.controller.services`): the first poll at once; echoes
    half a probe interval away from the probes, so neither waits behind the other's replies; the drop
    watch (if on) between polls."""
    rows = [Service("poll", EventMonitorPoll, interval, jitter=0.05, first=0.0)]
    if drop_watch > 0:
        rows.append(Service("watch", EventDropWatch, drop_watch, first=drop_watch))
    if probe_interval > 0:
        rows += [Service("echo", EventEchoRound, probe_interval, first=probe_interval / 2),
                 Service("probe", EventProbeRound, probe_interval, first=probe_interval)]
    return rows


def probe_limit(probe_interval: float, probe_rate: float) -> int | None:
    """Latency probes (and echoes) per round at most, from ``[monitor] probe_rate`` (per second in
    all; 0 = no limit): on a WAN every packet link probed every 0.2 s is hundreds of PACKET_OUTs and
    PACKET_INs a second (germany50 with its 49-circuit backbone: 245, and 250 echoes), so past the
    budget each link waits its turn (round robin) and is probed every ⌈links / limit⌉ rounds."""
    if probe_rate <= 0 or probe_interval <= 0:
        return None
    return max(1, int(probe_rate * probe_interval))


class EventMonitor(event.EventBase):
    """A monitoring event (hot spot, balanced growth, unconstrained imbalance, elephant gone)."""

    def __init__(self, ev: Event) -> None:
        super().__init__()
        self.event = ev


def monitor_settings() -> dict[str, Any]:
    """The ``[monitor]`` section: from the launcher's settings (``mlte -c FILE controller``), else
    from the TOML file named by ``MLTE_CONFIG``, else the defaults; missing keys are defaults."""
    if SETTINGS.monitor:
        return SETTINGS.section("monitor")
    path = os.environ.get("MLTE_CONFIG", "")
    return {**DEFAULTS["monitor"], **(load_config(path)["monitor"] if path else {})}


def agent_address(index: int) -> str:
    """A distinct sFlow agent address per local bridge (127.0.1.N), so samples name their switch."""
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


class MonitorApp(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _EVENTS = [EventMonitor]
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, ROUTES: ApiRoutes, MASTERSHIP: Mastership,
                 METRICS: ControllerMetrics}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_monitor"
        self.metrics: ControllerMetrics = kwargs.get(METRICS) or ControllerMetrics(process=False)  # cycle times
        # a follower polls counters (reads) but installs no rules and sends no probes
        self.mastership: Mastership = kwargs.get(MASTERSHIP) or Mastership()
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.routes: ApiRoutes = r if (r := kwargs.get(ROUTES)) is not None else ApiRoutes()
        self.cfg = monitor_settings()
        self.interval = float(self.cfg["interval"])
        self.backend = str(self.cfg["fine_backend"])
        self.collector: SflowCollector | None = None
        self.counting: FlowCounting | None = None
        fine: FineSource | None = None
        if self.backend == "sflow":
            self.collector = SflowCollector("127.0.0.1", int(self.cfg["sflow_collector_port"]),
                                            window=float(self.cfg["fine_window"]))
            fine = self.collector
        elif self.backend == "sflow-rt":
            fine = SflowRtBackend(str(self.cfg["sflow_rt_url"]))
        elif self.backend == "flowstats":
            self.counting = FlowCounting(stale=3 * self.interval, max_flows=int(self.cfg["flowstats_max_flows"]),
                                         refresh=float(self.cfg["flowstats_refresh"]))
            fine = self.counting
        self.core = MonitorCore(self.cfg, fine)
        self.sflow = OvsSflow(f"127.0.0.1:{self.cfg['sflow_collector_port']}", int(self.cfg["sflow_sampling"]),
                              int(self.cfg["sflow_polling"]))
        self.queue_drops: dict[tuple[int, int], int] = {}
        self.fine_on: set[str] = set()
        self.last: dict = {}
        self._flow_replies: dict[tuple[int, int], list] = {}  # (dpid, xid) -> flow-stats entries of a multipart reply
        self._flow_xids: dict[int, int] = {}  # dpid -> xid of our last flow-stats request (others read back rules too)
        self.reply_timeout = float(self.cfg["reply_timeout"])
        self.first_window = float(self.cfg["fine_first_window"])
        self.everywhere = bool(self.cfg["fine_everywhere"])
        # flowstats: an early window asks the fresh circuits' switches for their counting rules' stats
        # first and looks when they are in (the poll's data is up to one Ts old: the elephant was named
        # from it one Ts after the hot spot); every fine_early_step s until named or the next poll
        self.early_fine_poll = bool(self.cfg["fine_early_poll"])
        self.early_step = float(self.cfg["fine_early_step"])
        self._early_xids: dict[int, tuple[int, bool]] = {}  # early flow-stats requests due: xid -> (dpid, all rules)
        # after an elephant is named, the early windows keep reading its switches' counts until the
        # next poll (fine_early_follow): the TE loop's gain judges it again on each newer count
        self.early_follow = bool(self.cfg["fine_early_follow"])
        # switch -> the named elephants whose counts are followed (one FLOW_STATS per count rule, by its
        # cookie), until _follow_until: fine_early_span after the naming, across polls
        self._follow: dict[str, set] = {}
        self._follow_until = 0.0
        # the drop watch: every drop_watch_interval s (0 = off) the queue drops of the watched circuit
        # ends only, so a hot spot by drops starts fine monitoring between polls (MonitorCore.watch_drops)
        self.drop_watch = float(self.cfg["drop_watch_interval"])
        self._watch_xids: dict[int, set[int]] = {}  # dpid -> xids of drop-watch requests in flight
        self._watch_points: set[tuple[str, int]] = set()  # the ends the last watch reads
        self._awaiting: set[tuple[int, str]] = set()  # (dpid, reply type) still due for this poll
        self._polls = 0  # polls begun (an early window of an older poll is dropped)
        self._poll_open = False  # the last poll's replies are awaited: its tick is still to come
        self._poll_start = 0.0
        self.cost: dict[str, int] = dict.fromkeys(COST_KEYS, 0)  # OpenFlow bytes of monitoring
        self.probe_interval = float(self.cfg["probe_interval"])
        self.path_memory = RouteMemory()  # light path of each probed link at its detector's base
        self._paths: dict[str, tuple] = {}
        self._paths_at = -1
        self.latency = LatencyMonitor(float(self.cfg["path_change_tolerance_ms"]), timeout=float(self.cfg["probe_timeout"]))
        self.probe_limit = probe_limit(self.probe_interval, float(self.cfg["probe_rate"]))
        self._echo_cursor = 0
        self._probed_key: tuple[int, tuple[tuple[int, str], ...]] | None = None  # what the probed links follow
        # (src name, port, dst name, port) -> the view's link: a probe back where it was sent confirms it
        self._probe_links: dict[tuple[str, int, str, int], PacketLink] = {}
        self._trapped: set[int] = set()
        self.services = app_scheduler(self, services(self.interval, self.probe_interval, self.drop_watch))
        self._replies_due = Deadline(lambda ev: self.send_event(self.name, ev), EventRepliesDue,
                                     spawn=hub.spawn, sleep=hub.sleep)
        # the circuits come from the view's graph: read it again on the next tick only once the graph
        # moved (set at once by the view's change bus, so no tick misses a change)
        self._graph_moved = True
        self.view.subscribe(self._view_changed)
        # samples and events go to the DB through the controller's writer thread (db_writer): a
        # locked database must not stall the hub; the store is opened and used in that thread only
        self.writer: db_writer.DbWriter | None = None
        if SETTINGS.db_url:
            from monitor.store import MonitorStore

            retention = float(self.cfg["retention_seconds"])
            self.writer = db_writer.shared()
            self.writer.open(STORE, lambda db: MonitorStore(db.engine, retention))

    def start(self):
        thread = super().start()
        if self.collector is not None:
            # the launcher green-patches threads only, so the collector's own (blocking) receive
            # thread would stall the hub: receive on a green socket here and feed the collector
            from eventlet.green import socket as green_socket  # the hub's (the launcher selects eventlet)

            self._sflow_sock = green_socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                self._sflow_sock.bind((self.collector.host, self.collector.port))
            except OSError as exc:  # e.g. another controller's collector: any free port will do,
                # because we tell OVS where to send (the sFlow target of each bridge we enable)
                self._sflow_sock.bind((self.collector.host, 0))
                LOG.warning("sFlow collector port %s not available (%s); using %s", self.collector.port,
                            exc.strerror or exc, self._sflow_sock.getsockname()[1])
            self.collector.port = self._sflow_sock.getsockname()[1]
            self.sflow.target = f"127.0.0.1:{self.collector.port}"
            self._receiver = hub.spawn(self._sflow_loop)
        # our read endpoints on the control API
        self.routes[("GET", "/monitor/latency")] = self.r_latency
        self.routes[("GET", "/monitor/fine")] = self.r_fine
        self.routes[("GET", "/monitor/cost")] = self.r_cost
        self.services.start()
        return thread

    def _sflow_loop(self) -> None:
        assert self.collector is not None
        while True:
            try:
                data = self._sflow_sock.recv(65535)
            except OSError:
                LOG.exception("sFlow socket failed")
                return
            self.cost["sflow_received"] += len(data)
            self.collector.feed(data, time.monotonic())

    def stop(self):
        self.services.stop()
        self._replies_due.stop()
        for bridge in sorted(self.fine_on):
            try:
                self.sflow.disable(bridge)
            except OvsdbError:
                LOG.exception("could not disable sFlow on %s", bridge)
        if self.counting is not None:
            for name in sorted(self.counting.enabled):
                self._flowstats_off(name)
        if self.collector is not None:
            self._sflow_sock.close()
        if self.writer is not None:
            self.writer = None
            db_writer.release()  # the last user flushes what is queued
        super().stop()

    # ---- polling --------------------------------------------------------------------------------
    @set_ev_cls(EventMonitorPoll)
    def _poll(self, ev: EventMonitorPoll) -> None:
        self.services.run("poll", self._begin_poll)

    def _begin_poll(self) -> None:
        """Request the statistics; the tick follows the last reply (:meth:`_received`), at most
        ``min(reply_timeout, interval / 2)`` later (:meth:`_replies_late`), so it acts on complete data
        without a fixed wait."""
        if self._poll_open:  # the last poll's replies did not all come: it ticks now, before this one
            self._finish_poll()
        self._polls += 1
        self._poll_start = time.monotonic()
        for xid, (dpid, _all) in self._early_xids.items():  # this poll's flow stats supersede an early window's
            self._flow_replies.pop((dpid, xid), None)
        self._early_xids.clear()
        if self._poll_start >= self._follow_until:
            self._follow.clear()
        self._request_stats()
        self._poll_open = True
        if not self._awaiting:
            self._finish_poll()
            return
        self._replies_due.push(self._poll_start + min(self.reply_timeout, 0.5 * self.interval))

    @set_ev_cls(EventRepliesDue)
    def _replies_late(self, ev: EventRepliesDue) -> None:
        if self._poll_open:
            self.services.protect("poll", self._finish_poll)

    def _finish_poll(self) -> None:
        """Tick (late replies count into the next one), then the first early window if a circuit just
        became hot."""
        self._poll_open = False
        if self._awaiting:
            self.cost["replies_late"] += len(self._awaiting)
            self._awaiting.clear()
        events = self._tick()
        self.metrics.monitor_cycle(time.monotonic() - self._poll_start)
        if self.first_window > 0 and self.core.fresh:
            self.services.later(self._window_delay(), EventEarlyWindow(self._polls))
        elif self._follow_named(events or []) or self._follow:
            self.services.later(self.early_step, EventEarlyWindow(self._polls))

    def _window_delay(self) -> float:
        """Until the next early window: ``fine_first_window`` after the youngest fresh hot spot, at least
        ``fine_early_step`` (a hot spot kept across a poll goes on at that step)."""
        since = self.core.fresh_since()
        age = time.monotonic() - since if since is not None else 0.0
        return min(max(self.first_window - age, self.early_step), 0.8 * self.interval)

    @set_ev_cls(EventEarlyWindow)
    def _early_window(self, ev: EventEarlyWindow) -> None:
        if ev.poll == self._polls:  # else a newer poll began: its tick has the data
            self.services.protect("poll", self._early_once)

    def _early_once(self) -> None:
        """One early window. With counting rules (flowstats, ``fine_early_poll``) it first asks the
        fresh circuits' switches for their flow stats and looks once they are in; else it looks now."""
        if self.counting is not None and self.early_fine_poll and self._request_early_flows():
            return  # _early_look runs on the last reply (a lost reply: the next poll takes over)
        self._early_look()

    def _early_look(self) -> None:
        """Name elephants from the fine data; not named yet: look again ``fine_early_step`` s on, while
        within 0.85 interval of the poll's start."""
        self._early()
        if self._follow and time.monotonic() >= self._follow_until:
            self._follow.clear()
        if (self.core.fresh or self._follow) and time.monotonic() - self._poll_start < 0.85 * self.interval:
            self.services.later(self.early_step, EventEarlyWindow(self._polls))

    def _follow_named(self, events: list[Event]) -> bool:
        """Follow the switches of the circuits whose elephants these events name; True if newly on."""
        if self.counting is None or not self.early_follow:
            return False
        before = bool(self._follow)
        for ev in events:
            if ev.kind == UNCONSTRAINED_IMBALANCE:
                for name in self.core.switches(ev.circuit):
                    self._follow.setdefault(name, set()).update(ev.flows)
                self._follow_until = time.monotonic() + self.core.early_span
        return bool(self._follow) and not before

    def _request_early_flows(self) -> bool:
        """FLOW_STATS of the counting rules on the fresh circuits' fine switches (all of them: the
        elephants are still to be named), and of the followed elephants' rules only (by cookie) on the
        others; False if none asked."""
        assert self.counting is not None
        self._early_xids = {}
        fresh = set(self.core.fresh_switches())
        for name in sorted(fresh | set(self._follow)):
            dp = self._datapath_by_name(name) if name in self.counting.enabled else None
            if dp is None or dp.ofproto.OFP_VERSION != ofproto_v1_3.OFP_VERSION:
                continue
            if name in fresh:
                asks = [(flowstats.cookie(flowstats.KIND_COUNT, 0), flowstats.KIND_MASK)]
            else:
                asks = [(ck, flowstats.EXACT_MASK) for ck in self.counting.count_cookies(name, self._follow[name])]
            for ck, mask in asks:
                req = ofmsg.flow_stats_request(dp.ofproto.OFP_VERSION, ck, mask)
                self._send(dp, req, "fine")
                self._early_xids[req.xid] = (dp.id, mask == flowstats.KIND_MASK)
        return bool(self._early_xids)

    @set_ev_cls(EventDropWatch)
    def _watch(self, ev: EventDropWatch) -> None:
        self.services.run("watch", self._begin_watch)

    def _begin_watch(self) -> None:
        """QUEUE_STATS of each OF1.3 switch with a watched circuit end (one request for all its queues:
        a port without queues would answer a per-port request with an error), not while a poll's
        replies are due (they carry the same counters)."""
        if self._poll_open:
            return
        self._watch_points = set(self.core.watched_points())
        for name in sorted({name for name, _port in self._watch_points}):
            sw = self.view.by_name(name)
            dp = self.southbound.datapath(sw.dpid) if sw is not None and sw.kind == PACKET else None
            if dp is None or dp.ofproto.OFP_VERSION != ofproto_v1_3.OFP_VERSION:
                continue
            req = ofmsg.queue_stats_request()
            self._send(dp, req)
            xids = self._watch_xids.setdefault(dp.id, set())
            if len(xids) > 64:  # replies that never came
                xids.clear()
            xids.add(req.xid)

    def _watched(self, msg) -> None:
        """A drop-watch reply: hot spots now, their fine monitoring and early windows."""
        sw = self.view.switches.get(msg.datapath.id)
        name = sw.name if sw is not None else ""
        per_port: dict[tuple[str, int], int] = {}
        for q in msg.body:
            if (name, q.port_no) in self._watch_points:
                per_port[(name, q.port_no)] = per_port.get((name, q.port_no), 0) + q.tx_errors
        self._received(msg, "coarse", "")
        res = self.core.watch_drops(time.monotonic(), per_port)
        self._apply(res.actions, res.events)
        if res.events and self.first_window > 0 and self.core.fresh:
            self.services.later(self._window_delay(), EventEarlyWindow(self._polls))

    def _send(self, dp, msg, kind: str = "coarse") -> None:
        """Send and count the OpenFlow bytes (``GET /monitor/cost``; sending serializes into ``buf``)."""
        if ofmsg.is_change(msg) and not self.mastership.acting():
            return
        self.southbound.send(dp, [msg], kind=f"monitor_{kind}")
        self.cost[f"{kind}_sent"] += len(msg.buf or b"")

    def _received(self, msg, kind: str, reply: str) -> None:
        """Count a reply (after its data went in); the poll's last one finishes the poll at once."""
        self.cost[f"{kind}_received"] += len(msg.buf or b"")
        ofp = msg.datapath.ofproto
        more = getattr(ofp, "OFPMPF_REPLY_MORE", None) or getattr(ofp, "OFPSF_REPLY_MORE", 1)  # OF1.3 / OF1.0
        if reply and not msg.flags & more:
            self._awaiting.discard((msg.datapath.id, reply))
            if self._poll_open and not self._awaiting:
                self.services.protect("poll", self._finish_poll)

    def _request_stats(self) -> None:
        inv = self.view
        fine = self.counting.enabled if self.counting is not None else set()
        self.cost["polls"] += 1
        self._awaiting = set()
        for sw in list(inv.switches.values()):
            # packet switches only: the monitor's circuits are packet links, whose ends are packet ports;
            # an OTS's port counters fed nothing (on germany50 50 requests and replies a second)
            dp = self.southbound.datapath(sw.dpid) if sw.kind == PACKET else None
            if dp is None:
                continue
            version = dp.ofproto.OFP_VERSION
            if version == ofproto_v1_3.OFP_VERSION:
                # queue stats first: the switch answers in order, so each PORT_STATS reply is
                # combined with the queue drops of the same poll
                self._awaiting |= {(dp.id, "queue"), (dp.id, "port")}
                self._send(dp, ofmsg.queue_stats_request())
                self._send(dp, ofmsg.port_stats_request(version))
                if sw.name in fine:  # per-flow counters only where fine monitoring is on
                    self._flow_replies.pop((dp.id, self._flow_xids.get(dp.id, -1)), None)  # the last poll's, if cut
                    self._awaiting.add((dp.id, "flow"))
                    req = ofmsg.flow_stats_request(version, flowstats.cookie(flowstats.KIND_COUNT, 0),
                                                   flowstats.KIND_MASK)
                    self._send(dp, req, "fine")
                    self._flow_xids[dp.id] = req.xid
            elif version == ofproto_v1_0.OFP_VERSION:
                self._awaiting.add((dp.id, "port"))
                self._send(dp, ofmsg.port_stats_request(version))

    @set_ev_cls(ofp_event.EventOFPQueueStatsReply, MAIN_DISPATCHER)
    @loud
    def _queue_stats(self, ev) -> None:
        dpid = ev.msg.datapath.id
        xids = self._watch_xids.get(dpid)
        if xids and ev.msg.xid in xids:
            xids.discard(ev.msg.xid)
            self.services.protect("watch", lambda: self._watched(ev.msg))
            return
        per_port: dict[int, int] = {}
        for q in ev.msg.body:
            per_port[q.port_no] = per_port.get(q.port_no, 0) + q.tx_errors
        for port, errors in per_port.items():
            self.queue_drops[(dpid, port)] = errors
        self._received(ev.msg, "coarse", "queue")

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    @loud
    def _port_stats(self, ev) -> None:
        dp = ev.msg.datapath
        inv = self.view
        sw = inv.switches.get(dp.id)
        if sw is None:
            self._received(ev.msg, "coarse", "port")
            return
        now = time.monotonic()
        for st in ev.msg.body:
            if st.port_no >= dp.ofproto.OFPP_MAX:
                continue
            drops = st.tx_dropped + self.queue_drops.get((dp.id, st.port_no), 0)
            self.core.port_stats(now, sw.name, st.port_no,
                                 PortSnapshot(st.tx_bytes, st.rx_bytes, st.tx_packets, st.rx_packets, drops))
        self._received(ev.msg, "coarse", "port")

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    @loud
    def _flow_stats(self, ev) -> None:
        msg, dp = ev.msg, ev.msg.datapath
        early = self._early_xids.get(msg.xid)
        if early is not None and early[0] != dp.id:
            early = None
        if self.counting is None or (early is None and self._flow_xids.get(dp.id) != msg.xid):
            return  # not ours: forwarding and the OTS driver read their rules back with flow stats
        entries = self._flow_replies.setdefault((dp.id, msg.xid), [])
        entries += [(st.cookie, st.byte_count, st.duration_sec + st.duration_nsec / 1e9) for st in msg.body]
        if msg.flags & dp.ofproto.OFPMPF_REPLY_MORE:  # more parts of this reply follow
            self._received(msg, "fine", "" if early is not None else "flow")
            return
        del self._flow_replies[(dp.id, msg.xid)]
        sw = self.view.switches.get(dp.id)
        if sw is not None:  # a reply by cookie holds only the followed rules: the others are not gone
            self.counting.stats(sw.name, entries, time.monotonic(), complete=early is None or early[1])
        if early is None:
            self._received(msg, "fine", "flow")
            return
        del self._early_xids[msg.xid]  # an early window's request, not the poll's
        self._received(msg, "fine", "")
        if not self._early_xids:
            self.services.protect("poll", self._early_look)

    # ---- classification and fine actions ------------------------------------------------------------
    def _view_changed(self, change: ViewChange) -> None:
        self._graph_moved = self._graph_moved or change.graph

    def _tick(self) -> list[Event]:
        if self._graph_moved:
            self._graph_moved = False
            graph, _problems = self.view.graph()
            self.core.set_circuits(circuits_from_graph(graph))
        if self.everywhere:  # the baseline: fine data on every packet switch, all the time
            inv = self.view
            for action in self.core.manager.hold("everywhere", [sw.name for sw in inv.switches.values()
                                                                 if sw.kind == PACKET]):
                self._execute(action)
        if self.counting is not None:
            self.view.set_fine_flows(self.counting.flow_counts(time.monotonic()))  # for the TE loop's gain
            for name in sorted(self.counting.enabled):  # follow re-routes of the forwarding rules
                self._send_rules(name, self.counting.sync(name, self._forwarding(name)))
        now = time.monotonic()
        res = self.core.tick(now)
        self.last = {"t": time.time(), "circuits": res.circuits}
        self.view.set_link_loads({cid: float(v["mbps"]) for cid, v in res.circuits.items()})  # the TE placement's
        for cid, vals in res.circuits.items():
            if vals["drops"] or vals["util"] > float(self.cfg["growth_threshold"]):
                JOURNAL.add("monitor_load", circuit=cid, **{k: round(v, 4) for k, v in vals.items()})
        for action in res.actions:
            self._execute(action)
        for ev in res.events:
            self._publish(ev)
        # queued, never waited for (docs/controller.md "Database writes"); only the leader writes
        if self.writer is not None and self.mastership.acting():
            wall = time.time()
            rows = []
            for cid, vals in res.circuits.items():
                rows += [(wall, cid, metric, value) for metric, value in vals.items()]
            rows += [(wall, lid, "latency_ms", ms) for lid, ms in self.latency.take_minima().items()]
            if rows:
                self.writer.submit(db_writer.SAMPLE, STORE, lambda store: store.add_samples(rows))
            for ev in res.events:  # the core's clock is monotonic; the database keeps epoch time
                self._store_event(dataclasses.replace(ev, t=wall))
            self.writer.submit(db_writer.PRUNE, STORE, lambda store: store.prune(wall))
        return res.events

    def _early(self) -> None:
        """The first fine window of the circuits that just became hot (see :meth:`MonitorCore.early`).
        The counts go to the view first: the TE loop judges an elephant named here on its count (else
        it found none and took the naming as enough, the sFlow rule: the gain was skipped)."""
        now = time.monotonic()
        if self.counting is not None:
            self.view.set_fine_flows(self.counting.flow_counts(now))
        res = self.core.early(now)
        self._follow_named(res.events)
        self._apply(res.actions, res.events)

    def _apply(self, actions: list[FineAction], events: list[Event]) -> None:
        """Carry out what a look of the core decided: its fine actions, its events published and (the
        leader only) stored with epoch time (the core's clock is monotonic)."""
        for action in actions:
            self._execute(action)
        for ev in events:
            self._publish(ev)
        if self.writer is not None and self.mastership.acting():
            wall = time.time()
            for ev in events:
                self._store_event(dataclasses.replace(ev, t=wall))

    def _store_event(self, ev: Event) -> None:
        assert self.writer is not None
        self.writer.submit(db_writer.EVENT, STORE, lambda store: store.add_event(ev))

    def _publish(self, ev: Event, level: int = logging.WARNING) -> None:
        """Journal (``GET /events?type=monitor``) and other os-ken apps (:class:`EventMonitor`)."""
        LOG.log(level, "monitor event %s on %s %s", ev.kind, ev.circuit, [str(f) for f in ev.flows])
        d = ev.as_dict()
        JOURNAL.add("monitor", event=ev.kind, circuit=ev.circuit, flows=d["flows"], detail=d["detail"])
        self.send_event_to_observers(EventMonitor(ev))

    def _execute(self, action: FineAction) -> None:
        if self.backend == "flowstats":
            self._execute_flowstats(action)
            return
        if self.backend != "sflow":
            return  # sFlow-RT: the site's agents already export everywhere; nothing to switch
        inv = self.view
        sw = inv.by_name(action.switch)
        if sw is None:
            return
        bridges = bridges_by_dpid()
        # the switch names its bridge itself (LOCAL port): a stale bridge with the same datapath id
        # left by a killed lab cannot take its place
        bridge = sw.local_port if sw.local_port in bridges.values() else bridges.get(sw.dpid)
        if bridge is None:
            LOG.warning("no local OVS bridge for %s (dpid %x): fine monitoring not changed", sw.name, sw.dpid)
            return
        try:
            if action.op == ENABLE:
                index = sorted(bridges).index(sw.dpid)
                agent = agent_address(index)
                self.core.agents[sw.name] = agent
                self.sflow.enable(bridge, agent=agent)
                if self.collector is not None:
                    self.collector.estimator.mark_start(agent, time.monotonic())
                self.fine_on.add(bridge)
            else:
                self.sflow.disable(bridge)
                self.fine_on.discard(bridge)
        except OvsdbError:
            LOG.exception("fine monitoring %s on %s failed", action.op, bridge)
        JOURNAL.add("monitor_fine", op=action.op, switch=action.switch, bridge=bridge)

    # ---- fine monitoring with OpenFlow per-flow statistics ----------------------------------------
    def _datapath_by_name(self, switch: str):
        sw = self.view.by_name(switch)
        return self.southbound.datapath(sw.dpid) if sw is not None else None

    def _forwarding(self, switch: str) -> dict[str, int]:
        """The forwarding app's current rules (eth_dst → output port) on ``switch``."""
        sw = self.view.by_name(switch)
        if sw is None:
            return {}
        return dict(self.view.forwarding_rules.get(sw.dpid, {}))

    def _execute_flowstats(self, action: FineAction) -> None:
        assert self.counting is not None
        inv = self.view
        sw = inv.by_name(action.switch)
        if sw is None or sw.kind != PACKET:
            return
        if action.op == ENABLE:
            self.core.agents[sw.name] = sw.name  # flow_rates(agents=...) takes switch names
            self._send_rules(sw.name, self.counting.enable(sw.name, self._forwarding(sw.name)))
        else:
            self._flowstats_off(sw.name)
        JOURNAL.add("monitor_fine", op=action.op, switch=action.switch, backend="flowstats",
                    rules=self.counting.rules(sw.name))

    def _flowstats_off(self, switch: str) -> None:
        assert self.counting is not None
        self.counting.disable(switch)
        dp = self._datapath_by_name(switch)
        if dp is None:
            return
        # every learn and count rule of this switch, by cookie
        self._send(dp, ofmsg.flow_delete(flowstats.cookie(flowstats.KIND_LEARN, 0), flowstats.ALL_MASK), "fine")
        self._send(dp, ofmsg.barrier(dp.ofproto.OFP_VERSION), "fine")

    def _send_rules(self, switch: str, ops: list[RuleOp]) -> None:
        if not ops:
            return
        dp = self._datapath_by_name(switch)
        if dp is None:
            return
        for msg in counting_messages(ops, int(self.cfg["flowstats_idle_timeout"])):
            self._send(dp, msg, "fine")

    # ---- PACKET_IN: learn copies and latency probes ----------------------------------------------
    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    @loud
    def _packet_in(self, ev) -> None:
        now = time.monotonic()
        msg = ev.msg
        dp = msg.datapath
        if dp.ofproto.OFP_VERSION != ofproto_v1_3.OFP_VERSION:
            return
        if msg.cookie == COOKIE_PROBE:
            probe = parse_probe(msg.data)
            sw = self.view.switches.get(dp.id)
            if probe is None or sw is None:
                return
            res = self.latency.received(probe[0], (sw.name, msg.match["in_port"]), now)
            if res is not None:
                probed = self.latency.links[res.link].link
                seen = self._probe_links.get((*probed.src, *probed.dst))
                if seen is not None:  # as good as an LLDP frame: LLDP's next round skips its port
                    self.view.confirm_link(seen, time.time())
                route = self._light_paths().get(res.link)
                self.path_memory.seen(res.link, route)
                for change in res.changes:
                    self._path_change(res.link, change, route)
            return
        if self.counting is not None and flowstats.cookie_kind(msg.cookie) == flowstats.KIND_LEARN:
            self.cost["fine_received"] += len(msg.buf or b"")  # the learn copies are fine-monitoring bytes
            sw = self.view.switches.get(dp.id)
            if sw is None:
                return
            op = self.counting.learned(sw.name, msg.cookie, msg.data)
            if op is not None:
                self._send_rules(sw.name, [op])

    # ---- latency probes -----------------------------------------------------------------------------
    @set_ev_cls(EventEchoRound)
    def _echo_period(self, ev: EventEchoRound) -> None:
        self.services.run("echo", self._echo_round)

    @set_ev_cls(EventProbeRound)
    def _probe_period(self, ev: EventProbeRound) -> None:
        if self.mastership.acting():
            self.services.run("probe", self._probe_round)

    def _echo_round(self) -> None:
        """ECHO to the switches at the ends of the probed links (the control-channel delay subtracted
        from their probe times), at most ``probe_limit`` of them per round, in turn."""
        ends = self._ends(self.latency.links)
        turn, self._echo_cursor = rotate(ends, self._echo_cursor, self.probe_limit)
        self._echo(turn)

    def _ends(self, link_ids: Iterable[str]) -> list[str]:
        """The switches at either end of these probed links, by name."""
        return sorted({end[0] for lid in link_ids for end in (self.latency.links[lid].link.src,
                                                               self.latency.links[lid].link.dst)})

    def _echo(self, names: Iterable[str]) -> None:
        by_name = {sw.name: sw for sw in self.view.switches.values() if sw.kind == PACKET}
        for name in names:
            sw = by_name.get(name)
            dp = self.southbound.datapath(sw.dpid) if sw is not None else None
            if dp is not None:
                echo = ofmsg.echo_request(ECHO_MAGIC + time.monotonic_ns().to_bytes(8, "big"))
                self.southbound.send(dp, [echo], kind="monitor_echo")

    def _probe_round(self) -> None:
        inv = self.view
        key = (inv.links.generation, tuple(sorted((dpid, sw.name) for dpid, sw in inv.switches.items())))
        if key != self._probed_key:  # the links to probe follow the link table, not the clock
            names = dict(key[1])
            self._probe_links = {(names[x.src.dpid], x.src.port_no, names[x.dst.dpid], x.dst.port_no): x
                                 for x in inv.links.links() if x.src.dpid in names and x.dst.dpid in names}
            directed = list(self._probe_links)
            self._probed_key = key
            added, removed = self.latency.set_links(probed_links(directed))
        else:
            added, removed = [], []
        if removed:
            self.path_memory.forget_except(self.latency.links)
        if added or removed:
            JOURNAL.add("monitor_probe_links", added=added, removed=removed, links=sorted(self.latency.links))
        if added:  # their ends' control-channel delays before their first probes come back
            self._echo(self._ends(added))
        packet = [sw for sw in inv.switches.values() if sw.kind == PACKET]
        for sw in packet:
            dp = self.southbound.datapath(sw.dpid)
            if dp is None:
                continue
            if sw.dpid not in self._trapped:
                self._install_trap(dp)
        by_name = {sw.name: sw for sw in packet}
        for link, pid in self.latency.send(time.monotonic(), self.probe_limit):
            src = by_name.get(link.src[0])
            dp = self.southbound.datapath(src.dpid) if src is not None else None
            if dp is None:
                continue
            frame = probe_frame(pid, time.monotonic_ns())
            self.southbound.send(dp, [ofmsg.packet_out(link.src[1], frame)], kind="monitor_probe")

    def _install_trap(self, dp) -> None:
        """Probe frames (their own ethertype) go to the controller on every packet switch."""
        trap = ofmsg.flow_add(COOKIE_PROBE, PROBE_PRIORITY, {"eth_type": PROBE_ETHERTYPE}, [ofmsg.to_controller()])
        self.southbound.send(dp, [trap], kind="monitor_probe")
        self._trapped.add(dp.id)

    @set_ev_cls(ofp_event.EventOFPEchoReply, MAIN_DISPATCHER)
    @loud
    def _echo_reply(self, ev) -> None:
        now = time.monotonic_ns()
        data = bytes(ev.msg.data or b"")
        if len(data) != 16 or not data.startswith(ECHO_MAGIC):
            return  # os-ken's own keep-alive echoes
        sw = self.view.switches.get(ev.msg.datapath.id)
        if sw is not None:
            self.latency.control.add(sw.name, (now - int.from_bytes(data[8:], "big")) / 1e6)

    @set_ev_cls(ctl_events.EventSwitchLeave)
    @loud
    def _switch_leave(self, ev) -> None:
        self._trapped.discard(ev.switch.dpid)  # re-install the trap when it comes back

    def _light_paths(self) -> dict[str, tuple]:
        """Each packet link that is one of our lit circuits -> its light path (hops), per view version."""
        if self._paths_at != self.view.version:
            graph, _problems = self.view.graph()
            def end(port: str) -> tuple[str, int]:
                sw, no = port.rsplit(":", 1)
                return sw, int(no)

            self._paths = {link_id(end(c.a_end), end(c.z_end)): c.xcons for c in lit_circuits(graph)}
            self._paths_at = self.view.version
        return self._paths

    def _path_change(self, link: str, change, route: tuple | None = None) -> None:
        """A change point: a path change, or a latency shift on one of our circuits whose light path is
        unchanged (monitor/path_corroboration.py)."""
        kind, why = self.path_memory.judge(link, route)
        ev = Event(change.t, link, kind, detail={"old_ms": change.old_ms, "new_ms": round(change.new_ms, 4), **why})
        # a latency shift is an INFO: nothing for an operator to look at
        self._publish(ev, logging.INFO if kind == LATENCY_SHIFT else logging.WARNING)
        if self.writer is not None:
            self._store_event(dataclasses.replace(ev, t=time.time()))

    # ---- control API endpoints ------------------------------------------------------------------------
    def r_latency(self, q: dict, d: dict) -> dict:
        """``GET /monitor/latency[?samples=N]``: per probed packet link, latency and detector state."""
        try:
            samples = int(q.get("samples", 20))
        except ValueError:
            from app.controller.control_api import ApiError

            raise ApiError(400, "'samples' must be an integer") from None
        return {"probe_interval": self.probe_interval, "misdelivered": self.latency.misdelivered,
                "retired": self.latency.retired, "links": self.latency.snapshot(samples)}

    def r_cost(self, q: dict, d: dict) -> dict:
        """``GET /monitor/cost``: OpenFlow bytes the monitor sent/received since start (coarse = port and
        queue stats, fine = flow stats, counting rules and learn copies), polls made, sFlow received."""
        return {"backend": self.backend, **self.cost}

    def r_fine(self, q: dict, d: dict) -> dict:
        """``GET /monitor/fine``: which switches have fine monitoring on, and with how many rules."""
        out: dict[str, Any] = {"backend": self.backend, "switches": sorted(self.core.manager.enabled)}
        if self.counting is not None:
            out["rules"] = {n: self.counting.rules(n) for n in sorted(self.counting.enabled)}
            out["flows"] = [f.as_dict() for f in self.counting.flow_rates(time.monotonic())]
            out["not_counted"] = self.counting.not_counted
        return out
