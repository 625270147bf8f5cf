"""The small documented interface through which the controller writes what the web service shows.

The controller never imports Flask: its ``topology_publisher`` app (``app/controller/topology_publisher.py``) has the
writer thread open a :class:`Feed` on the controller's one migrated :class:`Database` and calls these methods (each one a short transaction):
topology snapshots, the circuits it has lit, and controller events. Utilization series and
monitoring events are *not* written here: the monitor app stores them in ``mon_samples`` /
``mon_events`` (``monitor/store.py``) and the web reads them from there (``app/web/monitor_read.py``).
A reservation's own circuits, rules and state are written through
:class:`app.db.provisioning.ProvisioningStore`; :meth:`Feed.sync_circuits` leaves those rows alone.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import selectinload

from app.db.engine import Database
from app.db.models import Circuit, Event, TopologySnapshot, Xcon
from app.db.provisioning import circuit_key

ACTIVE, RELEASED = "ACTIVE", "RELEASED"


@dataclass(frozen=True)
class CircuitRecord:
    """A lit circuit as the controller sees it: packet port to packet port over a chain of XCONs."""

    a_end: str  # "A:3"
    z_end: str
    capacity: float  # Mbit/s (the narrowest optical container on the way)
    xcons: tuple[tuple[str, int, int], ...]  # (ots, in_port, out_port) from a_end towards z_end

    @property
    def name(self) -> str:
        return f"{self.a_end}-{self.z_end} via {','.join(dict.fromkeys(o for o, _i, _p in self.xcons))}"


class Feed:
    """Writer for topology snapshots, circuits and controller events."""

    def __init__(self, db: Database, *, keep_snapshots: int = 100) -> None:
        self.db = db  # migrated and disposed by its owner (the process's entry point)
        self.keep_snapshots = keep_snapshots

    def topology(self, graph_dict: dict[str, Any], ts: float | None = None) -> int:
        """Store ``MultiLayerGraph.to_dict()`` (the newest row is what ``--topology controller`` serves);
        only the newest ``keep_snapshots`` rows are kept. Returns the new row's id."""
        with self.db.session() as s, s.begin():
            row = TopologySnapshot(ts=time.time() if ts is None else ts, graph=graph_dict)
            s.add(row)
            s.flush()
            s.execute(delete(TopologySnapshot).where(TopologySnapshot.id <= row.id - self.keep_snapshots))
            return row.id

    def latest_topology(self) -> dict[str, Any] | None:
        with self.db.session() as s:
            return s.execute(select(TopologySnapshot.graph).order_by(TopologySnapshot.id.desc()).limit(1)).scalar()

    def event(self, kind: str, message: str, *, severity: str = "info", ts: float | None = None,
              **detail: Any) -> None:
        if severity not in ("info", "warning", "error"):
            raise ValueError(f"severity must be info, warning or error, got {severity!r}")
        with self.db.session() as s, s.begin():
            s.add(Event(ts=time.time() if ts is None else ts, kind=kind, severity=severity, message=message,
                        detail=detail))

    def circuit(self, name: str, a_end: str, z_end: str, capacity: float, xcons: Iterable[tuple[str, int, int]],
                *, state: str = ACTIVE, reservation_id: int | None = None, active: bool = True) -> int:
        """Record a circuit with its XCONs ``(ots, in_port, out_port)``; returns its id."""
        now = time.time()
        with self.db.session() as s, s.begin():
            c = Circuit(name=name, a_end=a_end, z_end=z_end, capacity=capacity, state=state,
                        reservation_id=reservation_id, created_ts=now, updated_ts=now,
                        xcons=[Xcon(ots=o, in_port=i, out_port=p, active=active) for o, i, p in xcons])
            s.add(c)
            s.flush()
            return c.id

    def sync_circuits(self, current: Iterable[CircuitRecord], ts: float | None = None) -> tuple[int, int]:
        """Make the ACTIVE rows equal ``current``: new circuits are inserted ACTIVE, ACTIVE rows no longer
        lit become RELEASED (XCONs inactive); each change is also an event. Returns (added, released).

        A circuit recorded for a reservation (``reservation_id`` set, by the provisioning store) counts
        as present when it is lit, and is never released here: its life follows the reservation's
        (``ProvisioningStore.mark_released``). Circuits match in either direction."""
        now = time.time() if ts is None else ts
        want = {circuit_key(c.a_end, c.z_end, c.xcons): c for c in current}
        added = released = 0
        with self.db.session() as s:
            self.db.lock_for_write(s)  # read-then-write: take the write lock first (SQLite WAL snapshots)
            rows = s.execute(select(Circuit).where(Circuit.state == ACTIVE)
                             .options(selectinload(Circuit.xcons))).scalars().all()
            for row in rows:
                key = circuit_key(row.a_end, row.z_end, ((x.ots, x.in_port, x.out_port) for x in row.xcons))
                if want.pop(key, None) is not None or row.reservation_id is not None:
                    continue
                row.state, row.updated_ts = RELEASED, now
                for x in row.xcons:
                    x.active = False
                s.add(Event(ts=now, kind="circuit.down", severity="info", message=f"circuit {row.name} released",
                            detail={"circuit_id": row.id, "a_end": row.a_end, "z_end": row.z_end}))
                released += 1
            for c in want.values():
                row = Circuit(name=c.name, a_end=c.a_end, z_end=c.z_end, capacity=c.capacity, state=ACTIVE,
                              created_ts=now, updated_ts=now,
                              xcons=[Xcon(ots=o, in_port=i, out_port=p, active=True) for o, i, p in c.xcons])
                s.add(row)
                s.flush()
                s.add(Event(ts=now, kind="circuit.up", severity="info", message=f"circuit {c.name} is up",
                            detail={"circuit_id": row.id, "a_end": c.a_end, "z_end": c.z_end,
                                    "capacity": c.capacity}))
                added += 1
            s.commit()
        return added, released
