"""Engine, sessions, migrations and the admission write lock.

SQLite: the driver's own transaction handling is switched off so we can emit ``BEGIN`` ourselves;
writers that decide admission use ``BEGIN IMMEDIATE`` (the database write lock is taken before the
capacity check, so two racing requests are serialised). PostgreSQL: writers lock the single
``admission_lock`` row with ``SELECT ... FOR UPDATE`` (READ COMMITTED: later reads in the same
transaction see everything committed before the lock was granted).
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, select
from sqlalchemy.orm import Session, sessionmaker

from app.web.models import AdmissionLock, Base

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def normalise_url(url: str) -> str:
    """Accept ``postgresql://`` (psycopg 3 is the driver we ship) and plain file paths."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" not in url:
        return f"sqlite:///{url}"
    return url


def make_engine(url: str) -> Engine:
    """Create an engine with the transaction behaviour described in the module docstring."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        memory = ":memory:" in url or url in ("sqlite://", "sqlite:///")
        pool = {} if memory else {"pool_size": 20, "max_overflow": 40, "pool_timeout": 60}
        engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False}, **pool)

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn, _record) -> None:  # noqa: ANN001 (DBAPI objects)
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see _sqlite_begin)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            if not memory:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn) -> None:  # noqa: ANN001
            mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")

        return engine
    return create_engine(url, pool_size=10, max_overflow=40, pool_timeout=60, pool_pre_ping=True)


def web_tables_only(name: str | None, type_: str, _parent: dict) -> bool:
    """Alembic ``include_name`` filter: the DB is shared with the monitor (``mon_*``) and the
    capability store (``cap_*``), whose schemas their own modules own; autogenerate and schema
    comparisons look only at the web's tables."""
    return type_ != "table" or name in Base.metadata.tables


def upgrade(engine: Engine) -> None:
    """Run ``alembic upgrade head`` with the migrations shipped inside the package."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


class Database:
    """The engine plus a session factory; one instance per Flask app."""

    def __init__(self, url: str) -> None:
        self.url = normalise_url(url)
        self.engine = make_engine(self.url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._sqlite_writer = threading.Lock()

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    def session(self) -> Session:
        return self.sessions()

    @contextlib.contextmanager
    def writer(self) -> Iterator[None]:
        """Queue this process's SQLite writers on a thread lock before they ask SQLite for its write lock.

        SQLite's busy handler retries with growing sleeps, so under contention some writers waited
        > 1 s; a fair in-process queue removes that tail. ``BEGIN IMMEDIATE`` still guards against
        other processes writing the same file. PostgreSQL needs no such queue.
        """
        if not self.is_sqlite:
            yield
            return
        with self._sqlite_writer:
            yield

    def lock_for_write(self, session: Session) -> None:
        """Start ``session``'s transaction holding the admission lock (call before any query)."""
        if self.is_sqlite:
            session.connection(execution_options={"sqlite_begin": "IMMEDIATE"})
            return
        row = session.execute(select(AdmissionLock).where(AdmissionLock.id == 1).with_for_update()).scalar()
        if row is None:  # the migration inserts it; recreate if someone deleted it
            session.add(AdmissionLock(id=1, counter=0))
            session.flush()
            session.execute(select(AdmissionLock).where(AdmissionLock.id == 1).with_for_update())

    def dispose(self) -> None:
        self.engine.dispose()
