"""Bring a database to the newest schema: ``alembic upgrade head``, the one way mlte's tables are made.

Each process migrates once, at its entry point, through :func:`open_migrated` or :func:`upgrade`
(the web service in ``create_app``, the controller's writer thread when it opens its engine, the CLI
commands); the stores take the migrated engine and never migrate themselves. Operators can run
``python -m app.db.migrate URL``. It is idempotent and cheap once the database is at head (one
``SELECT`` of ``alembic_version``, no lock), and safe when several processes start at once: the
migration runs in one transaction that holds a lock — SQLite ``BEGIN IMMEDIATE`` (the write lock),
PostgreSQL ``pg_advisory_xact_lock`` — and Alembic reads the current revision inside it, so the
second process finds the work done. Within a process a thread lock serialises migrations (Alembic's
``context`` is module-global).
"""
from __future__ import annotations

import argparse
import contextlib
import threading
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from app.db.engine import Database, make_engine, manages_sqlite_begin
from app.db.models import owned_tables

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
#: key of the PostgreSQL advisory lock held while migrating ("mltedb")
PG_LOCK_KEY = 0x6D6C74656462
_process_lock = threading.Lock()


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer mlte than this one: refuse rather than guess."""


def owned_only(name: str | None, type_: str, _parent_names: dict) -> bool:
    """Alembic ``include_name`` filter: compare and autogenerate only the tables mlte owns, so a
    table someone else keeps in the same database is never proposed for dropping."""
    return type_ != "table" or name in owned_tables()


def config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(config())


def head() -> str:
    """The newest revision shipped with this code."""
    rev = _scripts().get_current_head()
    assert rev is not None
    return rev


def current(engine: Engine) -> str | None:
    """The revision the database is at (None: never migrated)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


@contextlib.contextmanager
def migration_lock(engine: Engine) -> Iterator[Connection]:
    """A connection whose transaction holds the migration lock; commits when the block ends."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite" and manages_sqlite_begin(engine):
            conn.execution_options(sqlite_begin="IMMEDIATE")
            with conn.begin():
                yield conn
            return
        if engine.dialect.name == "sqlite":
            # an engine made elsewhere (pysqlite's own transaction handling): begin ourselves, so the
            # DDL runs inside this transaction and under the write lock
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        elif engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_LOCK_KEY})
        try:
            yield conn
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


def upgrade(target: str | Engine) -> str:
    """Migrate the database at ``target`` (a URL or SQLite path, or an engine) to :func:`head`.

    Returns the head revision. Raises :class:`SchemaTooNew` if the database is at a revision this
    code does not know.
    """
    engine = make_engine(target) if isinstance(target, str) else target
    try:
        want = head()
        now = current(engine)
        if now == want:
            return want
        if now is not None and now not in {s.revision for s in _scripts().walk_revisions()}:
            raise SchemaTooNew(f"database schema is at revision {now!r}, unknown to this mlte (head {want!r}): "
                               "it was migrated by a newer version")
        with _process_lock, migration_lock(engine) as conn:
            cfg = config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        return want
    finally:
        if isinstance(target, str):
            engine.dispose()


def open_migrated(url: str) -> Database:
    """The entry point's one :class:`Database`, brought to :func:`head`; the caller disposes it."""
    db = Database(url)
    try:
        upgrade(db.engine)
    except BaseException:
        db.dispose()
        raise
    return db


def main(argv: list[str] | None = None) -> int:
    """``python -m app.db.migrate URL``: migrate a database to head and print its revision."""
    p = argparse.ArgumentParser(prog="python -m app.db.migrate", description=main.__doc__)
    p.add_argument("url", help="SQLAlchemy URL or SQLite file path")
    args = p.parse_args(argv)
    print(f"{args.url}: schema at revision {upgrade(args.url)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
