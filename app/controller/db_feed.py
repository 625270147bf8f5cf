"""Write what the web service shows: topology snapshots and lit circuits, into the shared database.

A thin os-ken app (loaded by the launcher when ``[db] url`` / ``--db-url`` is set). It watches the
controller journal for topology and XCON changes (switches, ports, LLDP links, XCONs, scans, static
files), waits until they have been quiet for ``DEBOUNCE`` seconds (at most ``MAX_DELAY`` after the
first one; never while an optical scan is probing), then reads the merged multi-layer graph from the
shared network view (as ``GET /topology`` does) and writes it through :class:`app.db.feed.Feed` — a new snapshot only if
the graph changed, and the set of lit circuits (``circuit_view.lit_circuits``) only if it changed.
The writes are queued to the controller's writer thread (:mod:`app.controller.db_writer`), so a
locked database never stalls the hub.
Utilization and monitoring events are the monitor app's (``mon_*`` tables), not written here.
"""
from __future__ import annotations

import logging
import time

from os_ken.base import app_manager
from os_ken.lib import hub

from app.controller import db_writer, guard
from app.controller.circuit_view import lit_circuits
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.runtime import SETTINGS

LOG = logging.getLogger("mlte.controller.db_feed")

#: journal entry types that can change the graph or the lit circuits
CHANGES = frozenset({"switch_enter", "switch_leave", "port", "link_add", "link_delete", "capabilities",
                     "xcon_add", "xcon_delete", "scan_done", "static_loaded", "host", "names"})
POLL = 0.1  # seconds between journal checks
DEBOUNCE = 0.3  # quiet time after the last change before writing
MAX_DELAY = 2.0  # write at the latest this long after the first unwritten change (a flapping port)
FEED = "web_feed"  # the app.db.feed.Feed, a resource of the db_writer thread


class DbFeed(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_db_feed"
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
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

    def start(self):
        thread = super().start()
        if self.writer is not None:
            self._loop_thread = hub.spawn(self._loop)
        return thread

    def stop(self):
        if self.writer is not None:
            self.writer = None
            db_writer.release()  # the last user flushes what is queued
        super().stop()

    def _loop(self) -> None:
        seen, first, last = 0, None, 0.0
        while True:
            hub.sleep(POLL)
            try:
                if self._rewrite:  # the last write failed (already reported): forget what we wrote
                    self._rewrite = False
                    self.last_graph = self.last_circuits = None
                    first = first if first is not None else time.monotonic()
                if JOURNAL.last_seq != seen:
                    fresh = JOURNAL.since(seen)
                    seen = JOURNAL.last_seq
                    if any(e["type"] in CHANGES for e in fresh):
                        last = time.monotonic()
                        first = first if first is not None else last
                if first is None:
                    continue
                now = time.monotonic()
                if self.view.scanning:
                    continue
                if now - last >= DEBOUNCE or now - first >= MAX_DELAY:
                    first = None
                    self.publish()
            except Exception as exc:  # keep feeding; loud in the error log and in GET /health
                guard.failures.append(f"db_feed: {exc!r}")
                guard.ERROR_LOG.exception("db_feed: writing the topology failed")

    def publish(self) -> None:
        """Queue the current graph and circuits if they differ from what was last queued (the writer
        thread writes them in order; on a failure :attr:`_rewrite` makes the next loop queue them again)."""
        assert self.writer is not None
        graph, _problems = self.view.graph()
        data = graph.to_dict()
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
                    writer.report(logging.INFO, f"db_feed: {added} circuit(s) up, {released} released")

            self.writer.submit(db_writer.SNAPSHOT, FEED, sync, self._failed)
            self.last_circuits = circuits

    def _failed(self, _exc: BaseException) -> None:
        self._rewrite = True  # runs in the writer thread: only a flag
