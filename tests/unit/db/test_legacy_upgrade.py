"""Databases made before app/db existed upgrade cleanly, data kept.

The schema of such a database is frozen in ``data/legacy_0002_sqlite.sql`` (dumped from
``sqlite_master`` of a database built by the code of commit 958523b: Alembic 0001 + 0002 of
``app/web/migrations``, then ``create_all`` of ``monitor/store.py`` and ``topology/capabilities.py``).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic import command
from sqlalchemy import select, text

from app.db import migrate
from app.db.engine import make_engine
from app.db.models import AuditEntry, Reservation
from monitor.store import MonitorStore
from tests.unit.db.test_migrate import schema_diff
from topology.capabilities import CapabilityStore

LEGACY = Path(__file__).with_name("data") / "legacy_0002_sqlite.sql"


def _legacy_db(path: Path, *, drop: tuple[str, ...] = ()) -> None:
    """A database as the old code left it, with a user, reservations, samples, an event and a node."""
    conn = sqlite3.connect(path)
    conn.executescript(LEGACY.read_text())
    for statement in drop:
        conn.execute(statement)
    conn.execute("INSERT INTO users (id, name, is_admin, created_at) VALUES (1, 'alice', 0, 1)")
    cols = ("id, name, description, src, dst, bandwidth, start_ts, end_ts, mode, state, state_reason, owner_id, "
            "created_ts, updated_ts")
    for rid, state in ((1, "ACTIVE"), (2, "ACTIVE"), (3, "RESERVED"), (4, "FINISHED")):
        conn.execute(f"INSERT INTO reservations ({cols}) VALUES (?, ?, '', 'A:1', 'C:3', 2, 10, 4e9, 'static', ?, "
                     "'start time reached', 1, 1, 1)", (rid, f"r{rid}", state))
    conn.execute("INSERT INTO circuits (id, reservation_id, name, a_end, z_end, capacity, state, created_ts, "
                 "updated_ts) VALUES (1, 2, 'A:3-B:1 via X', 'A:3', 'B:1', 10, 'ACTIVE', 1, 1)")
    conn.execute("INSERT INTO xcons (circuit_id, ots, in_port, out_port, active) VALUES (1, 'X', 1, 2, 1)")
    if "mon_samples" not in " ".join(drop):
        conn.executemany("INSERT INTO mon_samples (t, point, metric, value) VALUES (?, 'A:3', 'util', ?)",
                         [(float(t), t / 10) for t in range(5)])
        conn.execute("INSERT INTO mon_events (t, circuit, kind, flows, detail) VALUES (3, 'A-B', 'hot_spot', '[]', "
                     "'{\"drops\": 1}')")
    conn.execute("INSERT INTO cap_nodes (dpid, name, switch_type, switching_time, one_rule_per_port, granularity, "
                 "updated_at) VALUES ('0000000000000f01', 'X', 'optical', 0.2, 1, '{\"1\": \"ODU2\"}', 5)")
    conn.commit()
    conn.close()


def test_a_database_of_the_old_code_upgrades_with_its_data(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "legacy.db"
    _legacy_db(path)
    engine = make_engine(str(path))
    try:
        assert migrate.current(engine) == "0002"
        migrate.upgrade(engine)
        assert migrate.current(engine) == migrate.head()
        assert schema_diff(engine) == []  # the adopted tables equal the declarations, indexes included
        with engine.connect() as conn:
            states = dict(conn.execute(select(Reservation.id, Reservation.state)).all())
            # ACTIVE meant "window started"; now it means lit: r1 had nothing recorded and waits for the
            # controller again, r2 has a circuit recorded for it and stays ACTIVE
            assert states == {1: "PROVISIONING", 2: "ACTIVE", 3: "RESERVED", 4: "FINISHED"}
            (entry,) = conn.execute(select(AuditEntry)).all()
            assert entry.entity_id == 1 and entry.detail["from"] == "ACTIVE" and entry.detail["to"] == "PROVISIONING"
    finally:
        engine.dispose()
    url = f"sqlite:///{path}"
    db = migrate.open_migrated(url)
    mon = MonitorStore(db.engine)
    assert [p.value for p in mon.series("A:3", "util")] == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert mon.events()[0]["detail"] == {"drops": 1}
    caps = CapabilityStore(db.engine)
    assert caps.get(0xF01).granularity == {1: "ODU2"}
    db.dispose()


def test_old_databases_missing_some_tables_or_indexes(tmp_path) -> None:  # noqa: ANN001
    """A database whose monitor never ran (no mon_* tables) or that predates an index gets them."""
    path = tmp_path / "partial.db"
    _legacy_db(path, drop=("DROP TABLE mon_samples", "DROP TABLE mon_events"))
    engine = make_engine(str(path))
    try:
        migrate.upgrade(engine)
        assert schema_diff(engine) == []
    finally:
        engine.dispose()
    path2 = tmp_path / "noindex.db"
    _legacy_db(path2, drop=("DROP INDEX ix_mon_samples_point_metric_t",))
    engine = make_engine(str(path2))
    try:
        migrate.upgrade(engine)
        assert schema_diff(engine) == []
    finally:
        engine.dispose()


def test_a_monitor_only_database_gets_the_rest(tmp_path) -> None:  # noqa: ANN001
    """``mlte monitor events`` on its own used to create only the mon_* tables (no alembic_version)."""
    path = tmp_path / "mon_only.db"
    conn = sqlite3.connect(path)
    ddl = LEGACY.read_text().split(";\n")
    conn.executescript(";\n".join(s for s in ddl if "mon_" in s) + ";")
    conn.execute("INSERT INTO mon_samples (t, point, metric, value) VALUES (1, 'p', 'util', 0.5)")
    conn.commit()
    conn.close()
    engine = make_engine(str(path))
    try:
        assert migrate.current(engine) is None
        migrate.upgrade(engine)
        assert schema_diff(engine) == []
        with engine.connect() as conn:
            assert conn.execute(text("SELECT value FROM mon_samples")).scalars().all() == [0.5]
    finally:
        engine.dispose()


def test_downgrade_to_the_four_state_life_cycle(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "down.db"
    _legacy_db(path)
    engine = make_engine(str(path))
    try:
        migrate.upgrade(engine)
        cfg = migrate.config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0002")
        with engine.connect() as conn:
            assert migrate.current(engine) == "0002"
            assert dict(conn.execute(select(Reservation.id, Reservation.state)).all())[1] == "ACTIVE"
            tables = set(conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'")).scalars())
        assert "plans" not in tables and "reservation_rules" not in tables
        assert {"mon_samples", "mon_events", "cap_nodes"} <= tables  # kept: the old code made them itself
    finally:
        engine.dispose()
