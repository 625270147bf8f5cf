"""Monitor app (thin os-ken shim around :class:`monitor.core.MonitorCore`).

Every Ts (``[monitor] interval``, with ±5% jitter) it requests PORT_STATS from every datapath
(OF1.3 packet switches and OF1.0 OTS nodes) and QUEUE_STATS from the OF1.3 switches — queue
``tx_errors`` is where shaped egress queues count drops (``monitor/drops.py``). Replies go into the
core; then the core's tick classifies circuits and returns fine-monitoring actions, which this app
executes through OVSDB (sFlow on/off per bridge, found by datapath id). Events are broadcast as
:class:`EventMonitor`, written to the controller journal (``GET /events``, type ``monitor``) and
stored (``mon_events``) when a database is configured.
"""
from __future__ import annotations

import logging
import os
import random
import socket
import time
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import event, ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_0, ofproto_v1_3

from app.config import DEFAULTS, load_config
from app.controller.guard import loud
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.runtime import SETTINGS
from monitor.core import MonitorCore, circuits_from_graph
from monitor.counters import PortSnapshot
from monitor.events import Event
from monitor.fine import ENABLE, FineAction
from monitor.ovsdb_sflow import OvsdbError, OvsSflow, bridges_by_dpid
from monitor.sflow import SflowCollector
from monitor.sflow.sflow_rt import SflowRtBackend

LOG = logging.getLogger("mlte.controller.monitor")


class EventMonitor(event.EventBase):
    """A monitoring event (hot spot, balanced growth, unconstrained imbalance, elephant gone)."""

    def __init__(self, ev: Event) -> None:
        super().__init__()
        self.event = ev


def monitor_settings() -> dict[str, Any]:
    """The ``[monitor]`` section: from the launcher's settings when it passes them, else from the
    TOML file named by ``MLTE_CONFIG`` (labs and tests), else the defaults."""
    cfg = getattr(SETTINGS, "monitor", None)
    if cfg:
        return dict(cfg)
    path = os.environ.get("MLTE_CONFIG", "")
    return dict(load_config(path)["monitor"]) if path else dict(DEFAULTS["monitor"])


def agent_address(index: int) -> str:
    """A distinct sFlow agent address per local bridge (127.0.1.N), so samples name their switch."""
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


class MonitorApp(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _EVENTS = [EventMonitor]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_monitor"
        self.cfg = monitor_settings()
        self.interval = float(self.cfg["interval"])
        self.collector: SflowCollector | None = None
        fine = None
        if self.cfg["fine_backend"] == "sflow":
            self.collector = SflowCollector("127.0.0.1", int(self.cfg["sflow_collector_port"]),
                                            window=float(self.cfg["fine_window"]))
            fine = self.collector
        elif self.cfg["fine_backend"] == "sflow-rt":
            fine = SflowRtBackend(str(self.cfg["sflow_rt_url"]))
        self.core = MonitorCore(self.cfg, fine)
        self.sflow = OvsSflow(f"127.0.0.1:{self.cfg['sflow_collector_port']}", int(self.cfg["sflow_sampling"]),
                              int(self.cfg["sflow_polling"]))
        self.queue_drops: dict[tuple[int, int], int] = {}
        self.fine_on: set[str] = set()
        self.last: dict = {}
        self.store = None
        if SETTINGS.db_url:
            from monitor.store import MonitorStore

            self.store = MonitorStore(SETTINGS.db_url, float(self.cfg["retention_seconds"]))

    def start(self):
        thread = super().start()
        if self.collector is not None:
            # the launcher green-patches threads only, so the collector's own (blocking) receive
            # thread would stall the hub: receive on a green socket here and feed the collector
            from eventlet.green import socket as green_socket  # the hub's (the launcher selects eventlet)

            self._sflow_sock = green_socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._sflow_sock.bind((self.collector.host, self.collector.port))
            self._receiver = hub.spawn(self._sflow_loop)
        self._poller = hub.spawn(self._poll_loop)
        return thread

    def _sflow_loop(self) -> None:
        assert self.collector is not None
        while True:
            try:
                data = self._sflow_sock.recv(65535)
            except OSError:
                LOG.exception("sFlow socket failed")
                return
            self.collector.feed(data, time.monotonic())

    def stop(self):
        for bridge in sorted(self.fine_on):
            try:
                self.sflow.disable(bridge)
            except OvsdbError:
                LOG.exception("could not disable sFlow on %s", bridge)
        if self.collector is not None:
            self._sflow_sock.close()
        super().stop()

    # ---- polling --------------------------------------------------------------------------------
    def _poll_loop(self) -> None:
        settle = min(0.2, 0.2 * self.interval)  # time for the stats replies to come back
        while True:
            hub.sleep(self.interval * random.uniform(0.95, 1.05) - settle)
            try:
                self._request_stats()
                hub.sleep(settle)
                self._tick()
            except Exception:  # keep polling; the failure is logged loudly
                LOG.exception("monitor poll failed")

    def _request_stats(self) -> None:
        inv = app_manager.lookup_service_brick("mlte_inventory")
        for sw in list(inv.switches.values()):
            dp = inv.datapath(sw.dpid)
            if dp is None:
                continue
            ofp, parser = dp.ofproto, dp.ofproto_parser
            if ofp.OFP_VERSION == ofproto_v1_3.OFP_VERSION:
                # queue stats first: the switch answers in order, so each PORT_STATS reply is
                # combined with the queue drops of the same poll
                dp.send_msg(parser.OFPQueueStatsRequest(dp, 0, ofp.OFPP_ANY, ofp.OFPQ_ALL))
                dp.send_msg(parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY))
            elif ofp.OFP_VERSION == ofproto_v1_0.OFP_VERSION:
                dp.send_msg(parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_NONE))

    @set_ev_cls(ofp_event.EventOFPQueueStatsReply, MAIN_DISPATCHER)
    @loud
    def _queue_stats(self, ev) -> None:
        dpid = ev.msg.datapath.id
        per_port: dict[int, int] = {}
        for q in ev.msg.body:
            per_port[q.port_no] = per_port.get(q.port_no, 0) + q.tx_errors
        for port, errors in per_port.items():
            self.queue_drops[(dpid, port)] = errors

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    @loud
    def _port_stats(self, ev) -> None:
        dp = ev.msg.datapath
        inv = app_manager.lookup_service_brick("mlte_inventory")
        sw = inv.switches.get(dp.id)
        if sw is None:
            return
        now = time.monotonic()
        for st in ev.msg.body:
            if st.port_no >= dp.ofproto.OFPP_MAX:
                continue
            drops = st.tx_dropped + self.queue_drops.get((dp.id, st.port_no), 0)
            self.core.port_stats(now, sw.name, st.port_no,
                                 PortSnapshot(st.tx_bytes, st.rx_bytes, st.tx_packets, st.rx_packets, drops))

    # ---- classification and fine actions ------------------------------------------------------------
    def _tick(self) -> None:
        api = app_manager.lookup_service_brick("mlte_control_api")
        if api is not None:
            graph, _problems = api.build_graph()
            self.core.set_circuits(circuits_from_graph(graph))
        now = time.monotonic()
        res = self.core.tick(now)
        self.last = {"t": time.time(), "circuits": res.circuits}
        for cid, vals in res.circuits.items():
            if vals["drops"] or vals["util"] > float(self.cfg["growth_threshold"]):
                JOURNAL.add("monitor_load", circuit=cid, **{k: round(v, 4) for k, v in vals.items()})
        for action in res.actions:
            self._execute(action)
        for ev in res.events:
            LOG.warning("monitor event %s on %s %s", ev.kind, ev.circuit, [str(f) for f in ev.flows])
            d = ev.as_dict()
            JOURNAL.add("monitor", event=ev.kind, circuit=ev.circuit, flows=d["flows"], detail=d["detail"])
            self.send_event_to_observers(EventMonitor(ev))
        if self.store is not None:
            wall = time.time()
            rows = []
            for cid, vals in res.circuits.items():
                rows += [(wall, cid, metric, value) for metric, value in vals.items()]
            self.store.add_samples(rows)
            for ev in res.events:
                self.store.add_event(ev)
            self.store.prune(wall)

    def _execute(self, action: FineAction) -> None:
        if self.cfg["fine_backend"] != "sflow":
            return  # sFlow-RT: the site's agents already export everywhere; nothing to switch
        inv = app_manager.lookup_service_brick("mlte_inventory")
        sw = inv.by_name(action.switch)
        if sw is None:
            return
        bridges = bridges_by_dpid()
        bridge = bridges.get(sw.dpid)
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
