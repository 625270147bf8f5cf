"""The small documented interface through which the controller writes what the web service shows.

The controller never imports Flask: it opens a :class:`Feed` on the same database URL and calls
these methods (each one a short transaction). The web service only reads these tables.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete

from app.web.db import Database, upgrade
from app.web.models import Circuit, Event, LinkSample, TopologySnapshot, Xcon


class Feed:
    """Writer for topology snapshots, link samples, events and circuits."""

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.db = Database(url)
        if migrate:
            upgrade(self.db.engine)

    def close(self) -> None:
        self.db.dispose()

    def topology(self, graph_dict: dict[str, Any], ts: float | None = None) -> None:
        """Store ``MultiLayerGraph.to_dict()``; the newest snapshot is what ``--topology controller`` uses."""
        with self.db.session() as s, s.begin():
            s.add(TopologySnapshot(ts=time.time() if ts is None else ts, graph=graph_dict))

    def samples(self, rows: Iterable[tuple[float, str, float, float]]) -> None:
        """``(ts, edge key, Mbit/s, utilization 0..1)`` tuples."""
        with self.db.session() as s, s.begin():
            s.add_all(LinkSample(ts=ts, link=link, mbps=mbps, utilization=util) for ts, link, mbps, util in rows)

    def event(self, kind: str, message: str, *, severity: str = "info", ts: float | None = None,
              **detail: Any) -> None:
        if severity not in ("info", "warning", "error"):
            raise ValueError(f"severity must be info, warning or error, got {severity!r}")
        with self.db.session() as s, s.begin():
            s.add(Event(ts=time.time() if ts is None else ts, kind=kind, severity=severity, message=message,
                        detail=detail))

    def circuit(self, name: str, a_end: str, z_end: str, capacity: float, xcons: Iterable[tuple[str, int, int]],
                *, state: str = "ACTIVE", reservation_id: int | None = None, active: bool = True) -> int:
        """Record a circuit with its XCONs ``(ots, in_port, out_port)``; returns its id."""
        now = time.time()
        with self.db.session() as s, s.begin():
            c = Circuit(name=name, a_end=a_end, z_end=z_end, capacity=capacity, state=state,
                        reservation_id=reservation_id, created_ts=now, updated_ts=now,
                        xcons=[Xcon(ots=o, in_port=i, out_port=p, active=active) for o, i, p in xcons])
            s.add(c)
            s.flush()
            return c.id

    def prune_samples(self, older_than: float) -> None:
        """Drop samples older than ``older_than`` (epoch s): ``[monitor] retention_seconds``."""
        with self.db.session() as s, s.begin():
            s.execute(delete(LinkSample).where(LinkSample.ts < older_than))
