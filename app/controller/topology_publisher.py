"""Write what the web service shows: topology snapshots and lit circuits, into the shared database.

A thin os-ken app (loaded by the launcher when ``[db] url`` / ``--db-url`` is set). It subscribes to
the network view's graph changes (:data:`app.controller.events.GRAPH_EVENTS`: switches, ports, LLDP
links, hosts, XCONs, scans, static files, names), waits until they have been quiet for ``DEBOUNCE``
seconds (at most ``MAX_DELAY`` after the first one; never while an optical scan is probing), then
reads the merged multi-layer graph from the shared network view (as ``GET /topology`` does) and writes it through :class:`app.db.feed.Feed` — a new snapshot only if
the graph changed, and the set of lit circuits (``lit_circuits.lit_circuits``) only if it changed.
The writes are queued to the controller's writer thread (:mod:`app.controller.db_writer`), so a
locked database never stalls the hub.
Utilization and monitoring events are the monitor app's (``mon_*`` tables), not written here.
"""
from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import event as osken_event
from os_ken.controller.handler import set_ev_cls

from app.controller import db_writer, events
from app.controller.failures import Failures, failures_of
from app.controller.inventory import OFP_VERSIONS
from app.controller.lit_circuits import lit_circuits
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.runtime import SETTINGS
from app.controller.services import Service, app_scheduler
from app.controller.view_changes import ViewChange

LOG = logging.getLogger("mlte.controller.topology_publisher")

POLL = 0.1  # seconds between checks whether the pending changes are due
DEBOUNCE = 0.3  # quiet time after the last change before writing
MAX_DELAY = 2.0  # write at the latest this long after the first unwritten change (a flapping port)
FEED = "web_feed"  # the app.db.feed.Feed, a resource of the db_writer thread


class Debounce:
    """When to write after a burst of changes: once they were quiet for ``quiet`` seconds, at the latest
    ``max_delay`` after the first unwritten one, never while ``busy`` (time comes in as ``now``)."""

    def __init__(self, quiet: float = DEBOUNCE, max_delay: float = MAX_DELAY) -> None:
        self.quiet, self.max_delay = quiet, max_delay
        self.first: float | None = None  # the first change not written yet
        self.last = 0.0

    def changed(self, now: float) -> None:
        self.last = now
        self.first = self.first if self.first is not None else now

    def again(self, now: float) -> None:
        """Write again (the last write failed), as soon as nothing is pending."""
        self.first = self.first if self.first is not None else now

    def due(self, now: float, busy: bool = False) -> bool:
        """True (once) when the pending changes are to be written now."""
        if self.first is None or busy:
            return False
        if now - self.last >= self.quiet or now - self.first >= self.max_delay:
            self.first = None
            return True
        return False


class EventFeedTick(osken_event.EventBase):
    """Period of :data:`POLL`: are the pending changes due (or did the writer thread fail a write)?"""


class TopologyPublisher(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, MASTERSHIP: Mastership}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_topology_publisher"
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.mastership: Mastership = kwargs.get(MASTERSHIP) or Mastership()  # a follower writes no snapshots
        # the Feed is opened and used in the controller's writer thread only (db_writer): a locked
        # database must not stall the hub
        self.writer: db_writer.DbWriter | None = None
        if SETTINGS.db_url:
            from app.db.feed import Feed

            self.writer = db_writer.shared()
            self.writer.open(FEED, Feed)
        self.last_graph: dict | None = None
        self.last_circuits: list | None = None
        self.writes = 0
        self._rewrite = False  # set by the writer thread when a write failed for good: write again
        self.pending = Debounce()
        self.faults: dict[str, str] = {}  # failed ports last written as events (port -> why)
        self.services = app_scheduler(self, [Service("tick", EventFeedTick, POLL)])

    def start(self):
        thread = super().start()
        if self.writer is not None:
            self.services.start()
        return thread

    def stop(self):
        self.services.stop()
        if self.writer is not None:
            self.writer = None
            db_writer.release()  # the last user flushes what is queued
        super().stop()

    @set_ev_cls(events.GRAPH_EVENTS)
    def _graph_changed(self, ev: ViewChange) -> None:
        self.pending.changed(time.monotonic())

    @set_ev_cls([events.EventPortChange, events.EventSwitchLeave, events.EventSwitchEnter])
    def _faults_changed(self, ev: ViewChange) -> None:
        """A failed port is an ``events`` row (``network.fault``, warning) when it fails and
        (``network.repair``) when it is back, so the events page tells the story (docs/failures.md)."""
        if self.writer is None or not self.mastership.acting():
            return
        now = {f"{sw}:{p}": why for (sw, p), why in failures_of(self.view.switches.values()).ports.items()}
        rows = [("network.fault", "warning", f"{port}: {why}", port) for port, why in sorted(now.items())
                if port not in self.faults]
        rows += [("network.repair", "info", f"{port} back ({why} cleared)", port)
                 for port, why in sorted(self.faults.items()) if port not in now]
        self.faults = now
        for kind, severity, message, port in rows:
            self.writer.submit(db_writer.EVENT, FEED, partial(_write_event, kind, message, severity, {"port": port}),
                               self._failed)

    @set_ev_cls(events.EventDecision)
    def _te_decision(self, ev: events.EventDecision) -> None:
        """Each decision of the TE loop (offload, release, skip, grow...) as an ``events`` row: the web's
        events page shows what the loop did and why (``te.<decision>``)."""
        if self.writer is None:
            return
        d = dict(ev.data)
        kind = str(d.get("decision") or "decision")
        detail = {k: d[k] for k in ("flows", "plan", "offload") if d.get(k) is not None}
        self.writer.submit(db_writer.EVENT, FEED, partial(_write_event, f"te.{kind}", str(d.get("reason") or kind),
                                                          "info", detail), self._failed)

    @set_ev_cls(events.EventMastership)
    def _mastership(self, ev: events.EventMastership) -> None:
        """Elected: write our view once it settles, even if it did not change since (a follower wrote
        nothing; the database holds the previous leader's last snapshot)."""
        if ev.master:
            self.last_graph = self.last_circuits = None
            self.pending.changed(time.monotonic())

    @set_ev_cls(EventFeedTick)
    def _periodic(self, ev: EventFeedTick) -> None:
        self.services.run("tick", lambda: self._tick(time.monotonic()))

    def _tick(self, now: float) -> None:
        """Publish if the changes are due (the writer thread's failure flag counts as one)."""
        if self._rewrite:  # the last write failed (already reported): forget what we wrote
            self._rewrite = False
            self.last_graph = self.last_circuits = None
            self.pending.again(now)
        if self.pending.due(now, busy=self.view.scanning) and self.mastership.acting():  # the leader writes
            self.publish()

    def publish(self) -> None:
        """Queue the current graph and circuits if they differ from what was last queued (the writer
        thread writes them in order; on a failure :attr:`_rewrite` makes the next tick queue them again)."""
        assert self.writer is not None
        graph, _problems = self.view.graph()
        data = mark_failures(graph.to_dict(), failures_of(self.view.switches.values()))
        if data != self.last_graph:
            self.writer.submit(db_writer.SNAPSHOT, FEED, lambda feed: feed.topology(data), self._failed)
            self.last_graph = data
            self.writes += 1
        circuits = lit_circuits(graph)
        if circuits != self.last_circuits:
            writer = self.writer

            def sync(feed) -> None:  # noqa: ANN001 (runs in the writer thread: no logging here)
                added, released = feed.sync_circuits(circuits)
                if added or released:
                    writer.report(logging.INFO, f"topology_publisher: {added} circuit(s) up, {released} released")

            self.writer.submit(db_writer.SNAPSHOT, FEED, sync, self._failed)
            self.last_circuits = circuits

    def _failed(self, _exc: BaseException) -> None:
        self._rewrite = True  # runs in the writer thread: only a flag


def _write_event(kind: str, message: str, severity: str, detail: dict[str, Any], feed: Any) -> None:
    feed.event(kind, message, severity=severity, **detail)  # in the writer thread


def mark_failures(data: dict[str, Any], f: Failures) -> dict[str, Any]:
    """The published graph with what failed (docs/failures.md): a failed optical port's node and the
    fibre or adaptation edges at it, and the adaptation edge at a failed packet port, get ``failed``
    (the reason), so the topology page can show them."""
    failed = {f"{sw}:{p}": why for (sw, p), why in f.ports.items()}
    if not failed:
        return data
    for node in data["nodes"]:
        if node["id"] in failed:
            node["failed"] = failed[node["id"]]
    for link in data["links"]:
        if link.get("kind") not in ("optical", "adaptation"):
            continue
        # an OTS port by its node; a packet port (a switch node has no port nodes) by the link's end port
        ends = [f"{n}:{p}" for n, p in (link.get("ports") or {}).items()]
        why = next((failed[e] for e in (link["u"], link["v"], *ends) if e in failed), None)
        if why:
            link["failed"] = why
    return data
