"""Engines, sessions and the write lock every writer of reservation state takes.

SQLite: the driver's own transaction handling is switched off so we can emit ``BEGIN`` ourselves;
writers that decide admission or change a reservation's state use ``BEGIN IMMEDIATE`` (the database
write lock is taken before anything is read, so two racing writers are serialised); WAL journal and a
60 s busy timeout let readers go on while someone writes. PostgreSQL: writers lock the single
``admission_lock`` row with ``SELECT ... FOR UPDATE`` (READ COMMITTED: later reads in the same
transaction see everything committed before the lock was granted).

The web service (admission, commit, cancel, the time-driven sweep) and the controller's
:class:`app.db.provisioning.ProvisioningStore` both go through :meth:`Database.lock_for_write`, so a
cancel racing a ``mark_active`` is decided by whoever gets the lock first.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, create_engine, event, select
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from app.db.models import AdmissionLock

SQLITE_BUSY_MS = 60_000


def normalise_url(url: str) -> str:
    """Accept ``postgresql://`` (psycopg 3 is the driver we ship) and plain file paths."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" not in url:
        return f"sqlite:///{url}"
    return url


def is_memory_sqlite(url: str) -> bool:
    return url.startswith("sqlite") and (":memory:" in url or url in ("sqlite://", "sqlite:///"))


def _sqlite_begin(conn: Any) -> None:
    """Emit ``BEGIN <mode>``; ``mode`` comes from the ``sqlite_begin`` execution option (default DEFERRED)."""
    mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


def manages_sqlite_begin(engine: Engine) -> bool:
    """True for SQLite engines made by :func:`make_engine` (they honour ``sqlite_begin``)."""
    return engine.dialect.name == "sqlite" and event.contains(engine, "begin", _sqlite_begin)


def make_engine(url: str) -> Engine:
    """Create an engine with the transaction behaviour described in the module docstring.

    An in-memory SQLite database is one connection shared by all threads (``StaticPool``): with a
    pool, every thread would see a different, empty database.
    """
    url = normalise_url(url)
    if url.startswith("sqlite"):
        memory = is_memory_sqlite(url)
        pool: dict[str, Any] = {"poolclass": StaticPool} if memory else \
            {"pool_size": 20, "max_overflow": 40, "pool_timeout": 60}
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_MS / 1000, "check_same_thread": False},
                               **pool)

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn, _record) -> None:  # noqa: ANN001 (DBAPI objects)
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see _sqlite_begin)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            if not memory:
                cur.execute("PRAGMA journal_mode=WAL")
                # WAL + NORMAL: a commit is safe from a process crash (SIGKILL) and the file never corrupts;
                # only an OS crash or power loss may roll back the last commits. FULL's fsync per commit
                # took 4.4 ms of the controller's single writer thread here (0.34 ms with NORMAL): 100
                # reservations starting together commit ~300 times.
                cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
            cur.close()

        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return create_engine(url, pool_size=10, max_overflow=40, pool_timeout=60, pool_pre_ping=True)


class Database:
    """The engine plus a session factory; one instance per process and user (web app, controller store)."""

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
        """Start ``session``'s transaction holding the write lock (call before any query)."""
        if self.is_sqlite:
            session.connection(execution_options={"sqlite_begin": "IMMEDIATE"})
            return
        row = session.execute(select(AdmissionLock).where(AdmissionLock.id == 1).with_for_update()).scalar()
        if row is None:  # the migration inserts it; recreate if someone deleted it
            session.add(AdmissionLock(id=1, counter=0))
            session.flush()
            session.execute(select(AdmissionLock).where(AdmissionLock.id == 1).with_for_update())

    @contextlib.contextmanager
    def locked(self) -> Iterator[Session]:
        """A session whose transaction holds the write lock; commits on success, rolls back on error.

        Without :meth:`writer`'s in-process queue: meant for a process's single writer such as the
        controller's writer thread (whose ``threading`` eventlet may have patched: a green lock must
        not be waited on from an OS thread). The web service's many threads use ``write_tx``, which
        queues first.
        """
        s = self.session()
        try:
            self.lock_for_write(s)
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()

    def dispose(self) -> None:
        self.engine.dispose()
