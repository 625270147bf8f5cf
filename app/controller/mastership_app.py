"""Mastership shim (thin os-ken app, always loaded): the election, the gate and the switches' roles.

The plain :class:`~app.controller.mastership.Mastership` (context ``mlte_mastership``) is the gate of
the one send path from the start. With ``[ha] etcd`` set, this app runs the election loop
(``app.ha.election.run``) in a greenthread; on each transition it

- as the new leader: tells every connected switch MASTER with ``generation_id = epoch`` (a switch that
  answers "stale" deposes us at once), then announces :class:`EventMastership` so the apps take over
  (they read the switches back and resume from the database);
- as a follower (or deposed): announces it; the gate is already closed (it asks the lease's local
  deadline on every send), and a new leader's MASTER request demotes us at every switch anyway.

A switch that connects gets the role this controller holds now. One controller (no ``[ha] etcd``)
sends no role request at all: its switches keep the default role (equal), as before.
"""
from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from os_ken.base import app_manager
from os_ken.controller.handler import set_ev_cls
from os_ken.lib import hub

from app.controller import db_writer, events
from app.controller.api_routes import CONTEXT as ROUTES
from app.controller.api_routes import ApiRoutes
from app.controller.driver_errors import DriverError
from app.controller.guard import loud
from app.controller.journal import JOURNAL
from app.controller.mastership import CONTEXT, Change, Mastership, role_messages
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OFP_VERSIONS, OpenFlowSouthbound, error_names
from app.controller.runtime import SETTINGS

LOG = logging.getLogger("mlte.controller.mastership")


class MastershipApp(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, ROUTES: ApiRoutes, CONTEXT: Mastership}
    _EVENTS = [events.EventMastership]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_mastership"
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        routes = kwargs.get(ROUTES)
        self.routes: ApiRoutes = ApiRoutes() if routes is None else routes
        self.mastership: Mastership = kwargs.get(CONTEXT) or Mastership()
        self.southbound.gate = self.mastership.is_master
        self.mastership.subscribe(self._changed)
        cfg = SETTINGS.section("ha")
        self.endpoints = [str(e) for e in cfg["etcd"]]
        self.key = str(cfg["key"])
        self.ttl = float(cfg["ttl"])
        ctl = SETTINGS.section("controller")
        self.candidate = str(cfg["name"]) or f"{socket.gethostname()}:{ctl['listen_port']}"
        self.election: Any = None
        self.writer: db_writer.DbWriter | None = None
        self._stop = threading.Event()
        self.role_errors = 0
        self.routes.add("GET", "/mastership", lambda q, d: self.status())
        if self.endpoints:
            # a follower from the very start, before any app runs a timer or meets a switch: a restarted
            # controller that believed itself master for a moment published an empty topology snapshot
            from app.ha.election import Election

            self.election = Election(self.endpoints, key=self.key, candidate=self.candidate, ttl=self.ttl)
            self.mastership.elected_mode(self.election.is_leader)
            if SETTINGS.db_url:  # the shared database: a follower's writes are refused (app/db/fencing.py)
                from app.db.fencing import Fence

                self.writer = db_writer.shared()
                self.writer.fence = Fence.standby()

    def start(self):
        thread = super().start()
        if self.election is not None:
            from app.ha.election import run

            hub.spawn(run, self.election, self._on_elected, self._on_deposed, hub.sleep, self._stop.is_set)
            LOG.info("mastership: candidate %s in the election at %s (key %s, ttl %.1fs)",
                     self.candidate, ",".join(self.endpoints), self.key, self.ttl)
        return thread

    def stop(self):
        self._stop.set()
        if self.writer is not None:
            self.writer = None
            db_writer.release()
        if self.election is not None:
            try:
                self.election.resign()
            except Exception as exc:  # etcd gone: the lease expires by itself
                LOG.info("mastership: resign failed (%s); the lease expires by itself", exc)
        super().stop()

    def status(self) -> dict[str, Any]:
        out = self.mastership.to_json()
        out.update(candidate=self.candidate, etcd=self.endpoints, role_errors=self.role_errors,
                   refused_by_type=dict(self.southbound.refused_by_type))
        if self.election is not None:
            try:
                leader = self.election.leader()
            except Exception as exc:
                out["leader"] = {"error": str(exc)}
            else:
                out["leader"] = None if leader is None else {"name": leader[0], "epoch": leader[1]}
        return out

    # ---- transitions ---------------------------------------------------------------------------------
    def _on_elected(self, epoch: int) -> None:
        """The election made us leader: the database first (its epoch raised to ours, our writes fenced
        by it), then the mastership (gate, roles, the apps take over)."""
        if self.writer is not None:
            from app.db.fencing import StaleEpoch

            try:
                before = self.writer.claim(epoch, self.candidate, sleep=hub.sleep)
            except StaleEpoch as exc:
                LOG.error("mastership: elected with epoch %d but the database refuses it (%s): was etcd "
                          "reset while the database kept a newer epoch? see docs/operations.md", epoch, exc)
                self.mastership.saw_epoch(epoch + 1, "the database")
                if self.election is not None:
                    self.election.resign()
                return
            except Exception as exc:  # the database unreachable: never act without the fence
                LOG.error("mastership: elected with epoch %d but the database claim failed (%s)", epoch, exc)
                if self.election is not None:
                    self.election.resign()
                return
            LOG.info("mastership: database epoch %s -> %d", before, epoch)
        self.mastership.elected(epoch)

    def _on_deposed(self, reason: str) -> None:
        if self.writer is not None:
            from app.db.fencing import Fence

            self.writer.fence = Fence.standby()
        self.mastership.deposed(reason)

    def _changed(self, change: Change) -> None:
        """Called by the Mastership (on the election's greenthread): roles to every switch, then the event."""
        JOURNAL.add("mastership", master=change.master, epoch=change.epoch, reason=change.reason,
                    candidate=self.candidate)
        LOG.warning("mastership: %s", change.reason)
        if change.master:
            for dpid in list(self.southbound.datapaths):
                hub.spawn(self._send_role, dpid)
        self.send_event_to_observers(events.EventMastership(change.master, change.epoch, change.reason))

    def _learn_epoch(self) -> None:
        """The current leader's epoch from etcd (a follower's role requests must carry it)."""
        if self.election is None:
            return
        try:
            leader = self.election.leader()
        except Exception as exc:  # etcd unreachable: the newest epoch we know will do
            LOG.info("mastership: cannot read the leader from etcd (%s)", exc)
            return
        if leader is not None:
            self.mastership.saw_epoch(int(leader[1]), "etcd")

    @set_ev_cls(events.EventSwitchEnter)
    @loud
    def _switch_enter(self, ev: events.EventSwitchEnter) -> None:
        if self.mastership.mode != "single":
            hub.spawn(self._send_role, ev.switch.dpid)

    def _send_role(self, dpid: int, again: bool = True) -> None:
        """Our role at one switch now; an error (a stale generation) means a newer leader exists (as a
        follower: learn its epoch and ask once more)."""
        sw = self.view.switches.get(dpid)
        dp = self.southbound.datapath(dpid)
        if sw is None or dp is None:
            return
        if not self.mastership.is_master():
            self._learn_epoch()  # a SLAVE request older than the leader's MASTER one is refused as stale
        role, generation = self.mastership.role(), self.mastership.generation()
        try:
            res = self.southbound.confirm(dpid, role_messages(sw.ofp_version, role, generation), kind="role")
        except DriverError as exc:
            LOG.info("mastership: role %s to %016x not confirmed (%s)", role, dpid, exc)
            return
        if res.errors:
            self.role_errors += 1
            names = [error_names(e.type, e.code, e.version) for e in res.errors]
            LOG.warning("mastership: %s refused role %s generation %d: %s", sw.name, role, generation, names)
            JOURNAL.add("role_refused", node=sw.name, dpid=dpid, role=role, generation=generation,
                        errors=[f"{t}/{c}" for t, c in names])
            if role == "master":
                self.mastership.saw_epoch(generation + 1, f"switch {sw.name}")
            elif again:
                self._learn_epoch()
                if self.mastership.generation() != generation:
                    self._send_role(dpid, again=False)
        else:
            JOURNAL.add("role", node=sw.name, dpid=dpid, role=role, generation=generation)
