"""One schema owner: the migrations make exactly the declared tables, idempotently, once even when
several processes start together; stores neither create tables nor migrate; URL handling."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, create_engine, inspect, select, text

from app.db import migrate
from app.db.engine import make_engine, normalise_url
from app.db.models import METADATA, AdmissionLock, owned_tables
from tests.lib.webserver import ROOT


def schema_diff(engine: Engine) -> list:
    """Differences between the database and every declaration the migrations own (empty: equal)."""
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_name": migrate.owned_only})
        return compare_metadata(ctx, list(METADATA))


def test_fresh_database_gets_every_declared_table(tmp_path) -> None:  # noqa: ANN001
    engine = make_engine(str(tmp_path / "m.db"))
    try:
        assert migrate.upgrade(engine) == migrate.head()
        assert migrate.upgrade(engine) == migrate.head()  # idempotent: a second start does nothing
        assert schema_diff(engine) == []
        tables = set(inspect(engine).get_table_names())
        assert owned_tables() <= tables
        assert {"mon_samples", "mon_events", "cap_nodes", "reservation_rules", "plans"} <= tables
        assert tables - owned_tables() == {"alembic_version"}
        assert migrate.current(engine) == migrate.head()
        with engine.connect() as conn:
            assert conn.execute(select(AdmissionLock.id)).scalars().all() == [1]
    finally:
        engine.dispose()


def test_the_stores_leave_the_schema_to_the_entry_point(tmp_path) -> None:  # noqa: ANN001
    """MonitorStore and CapabilityStore neither create tables nor migrate: the process's entry point
    migrates once (:func:`migrate.open_migrated`) and hands the stores its engine."""
    from monitor.store import MonitorStore
    from topology.capabilities import CapabilityStore

    engine = make_engine(str(tmp_path / "bare.db"))
    try:
        MonitorStore(engine)
        CapabilityStore(engine)
        assert migrate.current(engine) is None and inspect(engine).get_table_names() == []
    finally:
        engine.dispose()
    db = migrate.open_migrated(str(tmp_path / "owned.db"))
    try:
        assert migrate.current(db.engine) == migrate.head() and schema_diff(db.engine) == []
        assert CapabilityStore(db.engine).list() == [] and MonitorStore(db.engine).events() == []
    finally:
        db.dispose()


def test_an_engine_made_elsewhere_is_migrated_in_one_locked_transaction(tmp_path) -> None:  # noqa: ANN001
    """A plain ``create_engine`` (pysqlite's own transaction handling) is migrated too (under
    BEGIN IMMEDIATE: the process race below runs with such engines as well)."""
    engine = create_engine(f"sqlite:///{tmp_path / 'plain.db'}")
    try:
        migrate.upgrade(engine)
        assert schema_diff(engine) == [] and migrate.current(engine) == migrate.head()
    finally:
        engine.dispose()


def test_in_memory_database_is_one_database_for_all_threads() -> None:
    import threading

    engine = make_engine("sqlite://")
    try:
        migrate.upgrade(engine)
        seen: list[str | None] = []
        t = threading.Thread(target=lambda: seen.append(migrate.current(engine)))
        t.start()
        t.join()
        assert seen == [migrate.head()]
    finally:
        engine.dispose()


@pytest.mark.parametrize("plain", [False, True], ids=["make_engine", "plain-engine"])
def test_processes_starting_together_migrate_once(tmp_path, plain: bool) -> None:  # noqa: ANN001
    """Four processes open a fresh file at the same instant: all succeed, the schema is made once
    (without the migration lock this fails with "table already exists"). Also with engines made by a
    plain ``create_engine`` (pysqlite's own transaction handling)."""
    path = tmp_path / "race.db"
    go = time.time() + 1.5  # after every interpreter has started
    target = "create_engine('sqlite:///' + sys.argv[1])" if plain else "sys.argv[1]"
    code = ("import sys, time; from sqlalchemy import create_engine; from app.db.migrate import upgrade; "
            f"t = {target}; time.sleep(max(0.0, {go} - time.time())); print(upgrade(t))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _out, err in outs]
    assert [out.strip() for out, _err in outs] == [migrate.head()] * 4
    engine = make_engine(str(path))
    try:
        assert schema_diff(engine) == []
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [migrate.head()]
            assert conn.execute(select(AdmissionLock.id)).scalars().all() == [1]  # inserted once
    finally:
        engine.dispose()


def test_a_database_from_a_newer_mlte_is_refused(tmp_path) -> None:  # noqa: ANN001
    engine = make_engine(str(tmp_path / "new.db"))
    try:
        migrate.upgrade(engine)
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(migrate.SchemaTooNew, match="'9999'.*newer version"):
            migrate.upgrade(engine)
    finally:
        engine.dispose()


def test_operator_command(tmp_path, capsys) -> None:  # noqa: ANN001
    path = tmp_path / "ops.db"
    assert migrate.main([str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"{path}: schema at revision {migrate.head()}"


def test_normalise_url() -> None:
    assert normalise_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("/tmp/x.db") == "sqlite:////tmp/x.db"
    assert normalise_url("sqlite:///rel.db") == "sqlite:///rel.db"


def test_database_package_monitor_and_topology_load_no_flask_or_os_ken(tmp_path) -> None:  # noqa: ANN001
    """app/db runs in the controller's writer thread; monitor/ and topology/ stay free of Flask and
    os-ken even when their stores use a migrated database."""
    url = f"sqlite:///{tmp_path / 'imp.db'}"
    code = ("import sys, app.db.provisioning, app.db.migrate, app.db.lifecycle; "
            "from monitor.store import MonitorStore; from topology.capabilities import CapabilityStore; "
            f"db = app.db.migrate.open_migrated({url!r}); MonitorStore(db.engine).events(); "
            "CapabilityStore(db.engine).list(); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('flask', 'os_ken', 'werkzeug') "
            "or m.startswith('app.web') or m.startswith('app.controller')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
