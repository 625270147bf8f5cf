"""Monitoring time series and events in SQL (SQLAlchemy 2), with bounded retention.

Own ``DeclarativeBase`` and ``mon_``-prefixed tables, so the web service can read them from the
same database without importing the controller. The tables are declared here, but created and
changed only by mlte's migrations (``app/db/migrations``, docs/database.md): :class:`MonitorStore`
takes an engine that its process's entry point has already migrated, so this module imports nothing
from ``app/`` (SQLAlchemy only, no Flask or os-ken). :meth:`MonitorStore.prune` deletes rows older than ``[monitor] retention_seconds``; the
controller calls it once per interval.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Float, Index, Integer, String, Text, delete, insert, select
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from monitor.events import Event


class MonBase(DeclarativeBase):
    """Declarative base of the monitor's tables (listed in ``app.db.models.METADATA``)."""


class MonSample(MonBase):
    __tablename__ = "mon_samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    t: Mapped[float] = mapped_column(Float, index=True)
    point: Mapped[str] = mapped_column(String(128))
    metric: Mapped[str] = mapped_column(String(64))
    value: Mapped[float] = mapped_column(Float)
    __table_args__ = (Index("ix_mon_samples_point_metric_t", "point", "metric", "t"),)


class MonEvent(MonBase):
    __tablename__ = "mon_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    t: Mapped[float] = mapped_column(Float, index=True)
    circuit: Mapped[str] = mapped_column(String(128), index=True)
    kind: Mapped[str] = mapped_column(String(64), index=True)
    flows: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of 5-tuple dicts
    detail: Mapped[str] = mapped_column(Text, default="{}")  # JSON object


@dataclass(frozen=True)
class SeriesPoint:
    t: float
    value: float


class MonitorStore:
    """Write samples/events, read series back, prune by age."""

    def __init__(self, engine: Engine, retention_seconds: float = 3600) -> None:
        self.engine = engine  # migrated and disposed by its owner (the process's entry point)
        self.retention = retention_seconds

    def add_samples(self, rows: Iterable[tuple[float, str, str, float]]) -> int:
        """Rows of (t, point, metric, value); returns how many were written."""
        values = [{"t": t, "point": p, "metric": m, "value": float(v)} for t, p, m, v in rows]
        if not values:
            return 0
        # one executemany, not ORM objects: on germany50 (49 lit circuits) the ORM unit of work was
        # ~10 % of the controller's CPU, in its database writer thread
        with Session(self.engine) as s, s.begin():
            s.execute(insert(MonSample), values)
        return len(values)

    def add_event(self, ev: Event) -> None:
        d = ev.as_dict()
        with Session(self.engine) as s, s.begin():
            s.add(MonEvent(t=ev.t, circuit=ev.circuit, kind=ev.kind, flows=json.dumps(d["flows"]),
                           detail=json.dumps(d["detail"], default=str)))

    def series(self, point: str, metric: str, since: float = 0.0) -> list[SeriesPoint]:
        q = (select(MonSample.t, MonSample.value).where(MonSample.point == point, MonSample.metric == metric,
                                                         MonSample.t >= since).order_by(MonSample.t))
        with Session(self.engine) as s:
            return [SeriesPoint(t, v) for t, v in s.execute(q)]

    def events(self, since: float = 0.0, kind: str | None = None, limit: int = 1000) -> list[dict]:
        q = select(MonEvent).where(MonEvent.t >= since)
        if kind:
            q = q.where(MonEvent.kind == kind)
        q = q.order_by(MonEvent.t.desc(), MonEvent.id.desc()).limit(limit)
        with Session(self.engine) as s:
            return [{"t": e.t, "circuit": e.circuit, "kind": e.kind, "flows": json.loads(e.flows),
                     "detail": json.loads(e.detail)} for e in s.scalars(q)]

    def prune(self, now: float) -> int:
        """Delete samples and events older than the retention; returns rows deleted."""
        cutoff = now - self.retention
        with Session(self.engine) as s, s.begin():
            n = cast(CursorResult, s.execute(delete(MonSample).where(MonSample.t < cutoff))).rowcount or 0
            n += cast(CursorResult, s.execute(delete(MonEvent).where(MonEvent.t < cutoff))).rowcount or 0
        return n
