"""Database fencing: a deposed or frozen controller leader cannot change the shared database (issue 24).

Several controllers share one database; the one etcd elected has a monotonic integer ``epoch``. The
newest epoch lives in the one-row ``controller_epoch`` table (migration 0008):

* :func:`claim` — the new leader raises the stored epoch to its own before it writes anything;
  :class:`StaleEpoch` if a newer one is stored already.
* :func:`check` — inside a writer's transaction: lock the row (PostgreSQL ``SELECT … FOR SHARE``) and
  :class:`StaleEpoch` if the stored epoch is newer than the writer's. The claim's ``UPDATE`` conflicts
  with ``FOR SHARE``, so a write that passed its check commits *before* the claim (it is ordered
  under the old epoch); a write that checks after the claim, or while the claim is in progress (it
  waits for it, then READ COMMITTED re-reads the row), sees the new epoch and is rolled back.
  SQLite serialises writers: a transaction that has written holds the database's write lock, so the
  row it reads is the newest, and a transaction that read before a claim cannot write after it
  (WAL refuses to upgrade a stale snapshot).
* :class:`Fence` — the epoch a controller writes under: ``Fence()`` (epoch None) is one controller
  without etcd, no check at all (exactly the behaviour before fencing); ``Fence.standby()`` (epoch 0)
  a controller that is not the leader: every fenced write is refused.

One mechanism applies it to every write of a process's engine: :func:`attach` gives an engine a
:class:`Guard` (the fence now in force, the refusal counter), and one ``before_commit`` listener on
SQLAlchemy's ``Session`` flushes and calls :func:`check` in every commit of a session bound to a
guarded engine. The check runs last, just before ``COMMIT``, so the row lock is held for one round
trip, and whatever the transaction wrote is rolled back with it when it is refused. The controller's
writer thread (``app/controller/db_writer.py``) owns that engine; the web service's engines are never
guarded (the web service is not the controller).

A controller frozen (SIGSTOP) inside a transaction would hold its locks (this row's ``FOR SHARE``,
the ``admission_lock`` row) and stall the new leader's claim: on PostgreSQL every guarded transaction
sets ``idle_in_transaction_session_timeout`` (:data:`IDLE_TX_TIMEOUT_S`), so the server ends a frozen
controller's session and releases its locks; when it wakes up its commit fails.
"""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, CursorResult, Engine, event, select, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, SessionTransaction

from app.db.models import ControllerEpoch

ROW = 1  # the one row's id
IDLE_TX_TIMEOUT_S = 2.0  # PostgreSQL ends a guarded session idle this long inside a transaction
CLAIM_WAIT_S = 10.0  # the longest a claim waits for writers holding the row (PostgreSQL lock_timeout)
_CLAIMING = "mlte.fencing.claiming"  # Session.info key: this session is claiming (its commit is not checked)


class StaleEpoch(RuntimeError):
    """A newer controller epoch is stored than the writer's: the write is refused (never retried)."""

    def __init__(self, ours: int | None, stored: int, holder: str = "") -> None:
        self.ours, self.stored, self.holder = ours, stored, holder
        who = f" (held by {holder})" if holder else ""
        if ours is not None and ours < 1:
            msg = f"not the leader (no epoch): write refused; the database's epoch is {stored}{who}"
        else:
            msg = f"stale controller epoch {ours}: the database's epoch is {stored}{who}; write refused"
        super().__init__(msg)


class FenceError(RuntimeError):
    """The fence could not be claimed (the epoch row stayed locked, or the input is wrong)."""


@dataclass(frozen=True)
class Fence:
    """The epoch a controller writes under. ``epoch`` None: one controller, nothing checked (the
    default); 0: not the leader (every write refused); >= 1: the leader of that election."""

    epoch: int | None = None
    holder: str = ""

    @classmethod
    def standby(cls, holder: str = "") -> Fence:
        """A controller that is not (or no longer) the leader: its writes are refused."""
        return cls(0, holder)

    @property
    def enabled(self) -> bool:
        return self.epoch is not None


NO_FENCE = Fence()


class Guard:
    """The fence one engine's sessions are checked against, and what was refused.

    ``fence`` may be replaced from another thread at any time (a plain attribute store): the next
    commit uses the new one.
    """

    def __init__(self, fence: Fence = NO_FENCE, idle_tx_timeout_s: float = IDLE_TX_TIMEOUT_S) -> None:
        self.fence = fence
        self.idle_tx_timeout_s = idle_tx_timeout_s
        self.checked = 0  # commits that passed the check
        self.refused = 0  # commits refused (StaleEpoch): the refused writes
        self.last_refusal = ""

    def stats(self) -> dict[str, Any]:
        return {"epoch": self.fence.epoch, "holder": self.fence.holder, "checked_writes": self.checked,
                "refused_writes": self.refused, "last_refusal": self.last_refusal}


def _epoch(value: Any, what: str, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value < 2**63:
        raise FenceError(f"{what} must be an integer in {lo}..2^63-1, got {value!r}")
    return value


def read(session: Session) -> tuple[int, str, float]:
    """The stored (epoch, holder, since) without locking; (0, "", 0.0) if no leader ever claimed."""
    row = session.execute(select(ControllerEpoch.epoch, ControllerEpoch.holder, ControllerEpoch.since)
                          .where(ControllerEpoch.id == ROW)).one_or_none()
    return (0, "", 0.0) if row is None else (int(row[0]), row[1], float(row[2]))


def check(session: Session, epoch: int) -> int:
    """Inside the caller's transaction: lock the epoch row ``FOR SHARE`` (PostgreSQL; SQLite ignores
    it, its writers are serialised) and raise :class:`StaleEpoch` if the stored epoch is newer than
    ``epoch`` (or ``epoch`` is 0: not the leader). Returns the stored epoch.

    Call it after the transaction's writes (the before-commit listener does), so on SQLite the
    transaction already holds the write lock when it reads the row; the caller rolls back on error.
    """
    epoch = _epoch(epoch, "epoch", 0)
    row = session.execute(select(ControllerEpoch.epoch, ControllerEpoch.holder)
                          .where(ControllerEpoch.id == ROW).with_for_update(read=True)).one_or_none()
    stored, holder = (0, "") if row is None else (int(row[0]), row[1])
    if epoch < 1 or stored > epoch:
        raise StaleEpoch(epoch, stored, holder)
    return stored


def claim(session: Session, epoch: int, holder: str, *, now: float | None = None,
          wait_s: float = CLAIM_WAIT_S) -> int:
    """Raise the stored epoch to ``epoch`` (held by ``holder``) in one transaction of its own, and
    commit; returns the epoch stored before. :class:`StaleEpoch` (nothing written) if a newer epoch
    is stored; claiming the stored epoch again is allowed (a retried claim).

    ``session`` must have no transaction open. The ``UPDATE`` waits for writers that hold the row
    ``FOR SHARE`` (at most ``wait_s`` on PostgreSQL, then :class:`FenceError`); on SQLite the claim
    starts with ``BEGIN IMMEDIATE`` where the engine supports it (engines from
    :func:`app.db.engine.make_engine`).
    """
    from app.db.engine import manages_sqlite_begin

    epoch = _epoch(epoch, "epoch", 1)
    if not isinstance(holder, str) or len(holder) > 200:
        raise FenceError(f"holder must be a string of at most 200 characters, got {holder!r}")
    if session.in_transaction():
        raise FenceError("claim needs a session without an open transaction (it commits its own)")
    now = time.time() if now is None else now
    session.info[_CLAIMING] = True  # its own commit is not checked against the (older) fence in force
    bind = session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    try:
        if engine.dialect.name == "sqlite":
            if manages_sqlite_begin(engine):
                session.connection(execution_options={"sqlite_begin": "IMMEDIATE"})
        elif engine.dialect.name == "postgresql":
            session.execute(text(f"SET LOCAL lock_timeout = {max(1, int(wait_s * 1000))}"))
        before = read(session)
        moved = cast(CursorResult, session.execute(
            update(ControllerEpoch).where(ControllerEpoch.id == ROW, ControllerEpoch.epoch <= epoch)
            .values(epoch=epoch, holder=holder, since=now))).rowcount
        if not moved:
            stored, stored_holder, _since = read(session)
            if session.get(ControllerEpoch, ROW) is not None:
                raise StaleEpoch(epoch, stored, stored_holder)
            session.add(ControllerEpoch(id=ROW, epoch=epoch, holder=holder, since=now))  # someone deleted it
        session.commit()
        return before[0]
    except OperationalError as exc:
        session.rollback()
        if getattr(exc.orig, "sqlstate", None) == "55P03":  # lock_not_available
            raise FenceError(f"claiming epoch {epoch}: the epoch row stayed locked for {wait_s:g} s") from None
        raise
    except BaseException:
        session.rollback()
        raise
    finally:
        session.info.pop(_CLAIMING, None)


# ---- the one mechanism: every commit of a guarded engine is checked -------------------------------------
_GUARDS: weakref.WeakKeyDictionary[Engine, Guard] = weakref.WeakKeyDictionary()


def attach(engine: Engine, guard: Guard) -> Guard:
    """Check every commit of a session bound to ``engine`` against ``guard.fence`` from now on."""
    _install()
    _GUARDS[engine] = guard
    return guard


def detach(engine: Engine) -> None:
    _GUARDS.pop(engine, None)


def guard_of(engine: Engine) -> Guard | None:
    return _GUARDS.get(engine)


def _guard(session: Session) -> tuple[Guard, Fence] | None:
    if not _GUARDS or session.info.get(_CLAIMING):
        return None
    bind = session.bind
    engine = bind.engine if isinstance(bind, Connection) else bind
    guard = _GUARDS.get(engine) if engine is not None else None
    if guard is None:
        return None
    fence = guard.fence
    return (guard, fence) if fence.enabled else None


def _before_commit(session: Session) -> None:
    found = _guard(session)
    if found is None:
        return
    guard, fence = found
    assert fence.epoch is not None
    session.flush()  # the writes first: on SQLite the write lock is then held while the row is read
    try:
        check(session, fence.epoch)
    except StaleEpoch as exc:
        guard.refused += 1
        guard.last_refusal = str(exc)
        raise
    guard.checked += 1


def _after_begin(session: Session, _trans: SessionTransaction, conn: Connection) -> None:
    found = _guard(session)
    if found is not None and conn.dialect.name == "postgresql":
        ms = max(1, int(found[0].idle_tx_timeout_s * 1000))
        conn.exec_driver_sql(f"SET LOCAL idle_in_transaction_session_timeout = {ms}")


def _install() -> None:
    if not event.contains(Session, "before_commit", _before_commit):
        event.listen(Session, "before_commit", _before_commit)
        event.listen(Session, "after_begin", _after_begin)
