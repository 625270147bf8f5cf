"""Utilization samples written the way the controller's monitor writes them, for the web's tests.

The web reads ``mon_samples`` keyed by whatever the monitor keys its circuits by; a test that writes
rows by hand in a format of its own proves nothing about that contract (the chart once asked for
``adaptation:…`` and ``access:…`` keys the monitor never writes, and a hand-made fixture agreed
with it). :class:`MonitorFeed` runs the monitor's own pieces instead: the circuits come from the
graph through ``monitor.core.circuits_from_graph``, port counters go through
:class:`monitor.core.MonitorCore` (rates, EWMA, utilization), and each tick's circuit values are
stored through :class:`monitor.store.MonitorStore` as ``(wall, circuit id, metric, value)`` rows,
exactly what ``MonitorApp._tick`` submits.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.config import DEFAULTS
from app.db.migrate import open_migrated
from monitor.core import MonitorCore, circuits_from_graph
from monitor.counters import PortSnapshot
from monitor.store import MonitorStore


def fig2_lit(*links: tuple[str, int, str, int]) -> Any:
    """The Fig. 2 graph with the packet links LLDP finds over lit circuits, e.g. ``("A", 3, "C", 1)``
    (what the controller's graph has once they carry frames; the lab spec has none)."""
    from app.web.topology_source import TopologySource

    g = TopologySource("fig2", 1.0).graph(None)  # type: ignore[arg-type]
    for a, a_port, b, b_port in links:
        g.add_packet_link(a, a_port, b, b_port, capacity=10.0)
    return g


class MonitorFeed:
    """A monitor core over ``graph`` whose ports carry the rates a test chooses, stored per tick."""

    def __init__(self, url: str, graph: Any, interval: float = 1.0) -> None:
        self.db = open_migrated(url)  # as the controller's writer opens it (a path or a URL)
        self.store = MonitorStore(self.db.engine)
        self.core = MonitorCore({**DEFAULTS["monitor"], "ewma_alpha": 1.0})  # no smoothing: a rate shows at once
        self.interval = interval
        self.mono = 0.0
        self.bytes: dict[tuple[str, int], int] = {}
        self.set_graph(graph)

    def set_graph(self, graph: Any) -> None:
        """The circuits of a new graph (a circuit lit or gone), as ``MonitorApp._tick`` does each tick."""
        self.core.set_circuits(circuits_from_graph(graph))
        for c in self.core.circuits.values():
            for sw, port in c.ends:
                if (sw, port) not in self.bytes:  # a new end: its first snapshot only starts its counters
                    self.bytes[(sw, port)] = 0
                    self.core.port_stats(self.mono, sw, port, PortSnapshot(0, 0))

    @property
    def circuit_ids(self) -> list[str]:
        return sorted(self.core.circuits)

    def tick(self, wall: float, mbps: Mapping[str, float]) -> dict[str, dict[str, float]]:
        """One interval in which circuit ``id`` carried ``mbps[id]`` (others idle): counters advance,
        the core ticks, and its circuit values are stored at ``wall``. Returns the stored values."""
        self.mono += self.interval
        for c in self.core.circuits.values():
            rate = float(mbps.get(c.id, 0.0))
            for sw, port in c.ends:
                self.bytes[(sw, port)] += round(rate * 1e6 / 8 * self.interval)
                self.core.port_stats(self.mono, sw, port, PortSnapshot(self.bytes[(sw, port)], 0))
        res = self.core.tick(self.mono)
        rows = [(wall, cid, metric, value) for cid, vals in res.circuits.items() for metric, value in vals.items()]
        if rows:
            self.store.add_samples(rows)
        return res.circuits

    def close(self) -> None:
        self.db.dispose()
