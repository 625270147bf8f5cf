"""Write what the web service shows: topology snapshots and lit circuits, into the shared database.

A thin os-ken app (loaded by the launcher when ``[db] url`` / ``--db-url`` is set). It watches the
controller journal for topology and XCON changes (switches, ports, LLDP links, XCONs, scans, static
files), waits until they have been quiet for ``DEBOUNCE`` seconds (at most ``MAX_DELAY`` after the
first one; never while an optical scan is probing), then builds the live multi-layer graph exactly
as ``GET /topology`` does and writes it through :class:`app.web.feed.Feed` — a new snapshot only if
the graph changed, and the set of lit circuits (``circuit_view.lit_circuits``) only if it changed.
Utilization and monitoring events are the monitor app's (``mon_*`` tables), not written here.
"""
from __future__ import annotations

import logging
import time

from os_ken.base import app_manager
from os_ken.lib import hub

from app.controller import guard
from app.controller.circuit_view import lit_circuits
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.runtime import SETTINGS

LOG = logging.getLogger("mlte.controller.db_feed")

#: journal entry types that can change the graph or the lit circuits
CHANGES = frozenset({"switch_enter", "switch_leave", "port", "link_add", "link_delete", "capabilities",
                     "xcon_add", "xcon_delete", "scan_done", "static_loaded", "host", "names"})
POLL = 0.1  # seconds between journal checks
DEBOUNCE = 0.3  # quiet time after the last change before writing
MAX_DELAY = 2.0  # write at the latest this long after the first unwritten change (a flapping port)


class DbFeed(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_db_feed"
        self.feed = None
        if SETTINGS.db_url:
            from app.web.feed import Feed

            self.feed = Feed(SETTINGS.db_url)
        self.last_graph: dict | None = None
        self.last_circuits: list | None = None
        self.writes = 0

    def start(self):
        thread = super().start()
        if self.feed is not None:
            self._loop_thread = hub.spawn(self._loop)
        return thread

    def stop(self):
        if self.feed is not None:
            self.feed.close()
        super().stop()

    def _scanning(self, api) -> bool:  # noqa: ANN001
        if not api._scan_lock.acquire(blocking=False):
            return True
        api._scan_lock.release()
        return False

    def _loop(self) -> None:
        seen, first, last = 0, None, 0.0
        while True:
            hub.sleep(POLL)
            try:
                if JOURNAL.last_seq != seen:
                    fresh = JOURNAL.since(seen)
                    seen = JOURNAL.last_seq
                    if any(e["type"] in CHANGES for e in fresh):
                        last = time.monotonic()
                        first = first if first is not None else last
                if first is None:
                    continue
                now = time.monotonic()
                api = app_manager.lookup_service_brick("mlte_control_api")
                if api is None or self._scanning(api):
                    continue
                if now - last >= DEBOUNCE or now - first >= MAX_DELAY:
                    first = None
                    self.publish(api)
            except Exception as exc:  # keep feeding; loud in the error log and in GET /health
                guard.failures.append(f"db_feed: {exc!r}")
                guard.ERROR_LOG.exception("db_feed: writing the topology failed")

    def publish(self, api) -> None:  # noqa: ANN001
        """Write the current graph and circuits if they differ from what was last written."""
        graph, _problems = api.build_graph()
        data = graph.to_dict()
        if data != self.last_graph:
            self.feed.topology(data)
            self.last_graph = data
            self.writes += 1
        circuits = lit_circuits(graph)
        if circuits != self.last_circuits:
            added, released = self.feed.sync_circuits(circuits)
            self.last_circuits = circuits
            if added or released:
                LOG.info("db_feed: %d circuit(s) up, %d released", added, released)
