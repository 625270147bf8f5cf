"""Where the TE loop keeps its records (:class:`app.te.takeover.TeRecord`) across a restart or a takeover.

A plain interface, :class:`TeStore` (``load`` / ``put`` / ``remove``), epoch-tagged: a write carries
the writer's epoch (the leader's, once controllers are elected; None for a lone controller) and is
refused (:class:`StaleEpoch`) when the store has seen a newer one, so a deposed leader cannot bring
back a record its successor released. Three backends:

- :class:`DbTeStore`: with ``[db] url`` set, the ``te_records`` table of the shared database
  (migration 0010), so every controller on it sees the records and a new leader on another host
  adopts the old leader's offloads instead of releasing them as orphans. The controller reaches it
  through its database writer thread (the writer's fence refuses a deposed leader's commit too);
- :class:`FileTeStore`: no database: one JSON document next to the controller's state file
  (``[controller] state_file`` ``X.json`` → ``X.te.json``), written atomically (fsync + rename) on
  every change — a lone controller without ``[db] url`` keeps its offloads across a restart;
- :class:`MemoryTeStore`: neither (and the unit tests): nothing survives the process, and the
  takeover pass still releases whatever TE rules and circuits the switches hold (orphans), so
  nothing stays lit without an owner; only the elephant falls back to its default path until the
  next imbalance moves it again.
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from app.controller.state_file import write_atomic
from app.te.takeover import RecordError, TeRecord

if TYPE_CHECKING:
    from app.db.engine import Database

TE_PLAN_PREFIXES = ("offload", "release", "grow", "shrink", "placement", "place")  # app/te's plan ids
TE_PLAN_UID = re.compile(r"^(offload|release|grow|shrink|placement|place)(\d+)$")

FORMAT = "mlte-te-state"
VERSION = 1


class StoreError(Exception):
    """The store's file exists but is not one this controller wrote (one line: what is wrong)."""

    user_error = True


class StaleEpoch(StoreError):
    """A write from an epoch older than one the store has seen: the writer is no longer the leader."""


class TeStore(Protocol):
    def load(self) -> list[TeRecord]: ...

    def put(self, rec: TeRecord) -> None: ...

    def remove(self, kind: str, ident: int, epoch: int | None = None) -> None: ...

    def highest_plan_ident(self) -> int: ...


class MemoryTeStore:
    """Records in memory, with the same epoch fence as the file."""

    def __init__(self, records: list[TeRecord] | None = None, epoch: int | None = None) -> None:
        self._records: dict[tuple[str, int], TeRecord] = {r.key: r for r in records or []}
        self.epoch = epoch  # the newest epoch seen (None: none given yet)
        self._lock = threading.Lock()

    def load(self) -> list[TeRecord]:
        with self._lock:
            return sorted(self._records.values(), key=lambda r: r.key)

    def _fence(self, epoch: int | None) -> None:
        if epoch is None:
            return
        if self.epoch is not None and epoch < self.epoch:
            raise StaleEpoch(f"TE store: a write of epoch {epoch}, but epoch {self.epoch} has written")
        self.epoch = epoch

    def put(self, rec: TeRecord) -> None:
        with self._lock:
            self._fence(rec.epoch)
            self._records[rec.key] = rec
            self._changed()

    def remove(self, kind: str, ident: int, epoch: int | None = None) -> None:
        with self._lock:
            self._fence(epoch)
            if self._records.pop((kind, ident), None) is not None:
                self._changed()

    def highest_plan_ident(self) -> int:
        """0: without a database there is no shared plan log whose ids a new offload could repeat."""
        return 0

    def _changed(self) -> None:
        """Hook of the file backend (called under the lock)."""


class FileTeStore(MemoryTeStore):
    """The records in one JSON file (read at construction, rewritten atomically on every change)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        records, epoch = self._read()
        super().__init__(records, epoch)

    def _read(self) -> tuple[list[TeRecord], int | None]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return [], None
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot read it ({exc.strerror or exc})") from None
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise StoreError(f"{self.path}: not JSON ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise StoreError(f"{self.path}: not an mlte TE state file (no \"format\": \"{FORMAT}\")")
        if doc.get("version") != VERSION:
            raise StoreError(f"{self.path}: version {doc.get('version')!r}, this controller reads version {VERSION}")
        items = doc.get("records", [])
        if not isinstance(items, list):
            raise StoreError(f"{self.path}: 'records' must be a list")
        out = []
        for i, d in enumerate(items):
            try:
                out.append(TeRecord.from_json(d))
            except RecordError as exc:
                raise StoreError(f"{self.path}: records[{i}]: {exc}") from None
        epoch = doc.get("epoch")
        return out, None if epoch is None else int(epoch)

    def dumps(self) -> str:
        doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "epoch": self.epoch,
                               "records": [r.to_json() for r in sorted(self._records.values(), key=lambda r: r.key)]}
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"

    def _changed(self) -> None:
        write_atomic(self.path, self.dumps())


def te_state_path(state_file: str) -> str:
    """The TE records' file beside the controller's state file (``""``: none)."""
    if not state_file:
        return ""
    p = Path(state_file)
    return str(p.with_name(f"{p.stem}.te{p.suffix or '.json'}"))


def open_store(state_file: str) -> MemoryTeStore:
    """The store of a controller without a database whose ``[controller] state_file`` is ``state_file``."""
    path = te_state_path(state_file)
    return FileTeStore(path) if path else MemoryTeStore()


T = TypeVar("T")
#: runs ``fn(database)`` where the caller's database access happens and returns its result (the
#: controller: its writer thread, ``writer.call(DATABASE, fn)``; tests: ``fn(db)`` directly)
Runner = Callable[[Callable[["Database"], T]], T]


class DbTeStore:
    """The records in the shared database's ``te_records`` table (one row per (kind, ident)).

    Every call is one transaction run by ``run``. The epoch fence: a write whose epoch is older than
    the newest one the table holds, or than the database's leader epoch (``controller_epoch``, raised
    by each new leader's claim, so it survives the records' removal), is refused with
    :class:`StaleEpoch` and nothing is written; a write without an epoch (a lone controller) is not
    checked. On the controller the writer's own fence (app/db/fencing.py) also refuses every commit
    of a deposed leader; either refusal reaches the caller as :class:`StaleEpoch`. A database error
    is a :class:`StoreError` (one line), so the TE loop goes on and reports it.
    """

    def __init__(self, run: Runner[Any]) -> None:
        self._run = run

    @classmethod
    def direct(cls, db: Database) -> DbTeStore:
        """A store calling the database in the caller's thread (tools, tests)."""
        return cls(lambda fn: fn(db))

    def _call(self, fn: Callable[[Database], T], what: str) -> T:
        from sqlalchemy.exc import SQLAlchemyError

        from app.db import fencing

        try:
            return self._run(fn)
        except fencing.StaleEpoch as exc:
            raise StaleEpoch(f"TE store: {what} refused: {exc}") from None
        except (SQLAlchemyError, TimeoutError, RuntimeError) as exc:  # the writer closed, the database gone
            raise StoreError(f"TE store (database): {what} failed: {str(exc).splitlines()[0] if str(exc) else exc!r}") from None

    def load(self) -> list[TeRecord]:
        from sqlalchemy import select

        from app.db.models import TeRecordRow

        def read(db: Database) -> list[TeRecord]:
            with db.session() as s:
                rows = s.execute(select(TeRecordRow).order_by(TeRecordRow.kind, TeRecordRow.ident)).scalars().all()
                out = []
                for row in rows:
                    try:
                        out.append(TeRecord.from_json(_doc(row)))
                    except RecordError as exc:
                        raise StoreError(f"te_records ({row.kind}, {row.ident}): {exc}") from None
                return out

        return self._call(read, "reading the records")

    def put(self, rec: TeRecord) -> None:
        from app.db.models import TeRecordRow

        doc = rec.to_json()

        def write(db: Database) -> None:
            with db.session() as s:
                _fence(s, rec.epoch)
                row = s.get(TeRecordRow, (rec.kind, rec.ident))
                if row is None:
                    row = TeRecordRow(kind=rec.kind, ident=rec.ident)
                    s.add(row)
                row.body, row.state, row.since = doc["body"], rec.state, rec.since
                row.threshold_mbps, row.epoch = rec.threshold_mbps, rec.epoch
                s.commit()

        self._call(write, f"writing {rec.kind} {rec.ident}")

    def remove(self, kind: str, ident: int, epoch: int | None = None) -> None:
        from sqlalchemy import delete

        from app.db.models import TeRecordRow

        def drop(db: Database) -> None:
            with db.session() as s:
                _fence(s, epoch)
                s.execute(delete(TeRecordRow).where(TeRecordRow.kind == kind, TeRecordRow.ident == ident))
                s.commit()

        self._call(drop, f"removing {kind} {ident}")

    def highest_plan_ident(self) -> int:
        """The highest number of a TE plan (``offload7``, ``release7``, ``grow3``...) in the shared
        ``plans`` table: a leader that took over after every record was released (or a restarted one)
        numbers its plans above it, or the plan log's insert fails on the table's unique ``uid``."""
        from sqlalchemy import or_, select

        from app.db.models import Plan

        def read(db: Database) -> int:
            with db.session() as s:
                uids = s.execute(select(Plan.uid).where(or_(*(Plan.uid.like(f"{p}%") for p in TE_PLAN_PREFIXES))))
                return max((int(m.group(2)) for (uid,) in uids if uid and (m := TE_PLAN_UID.match(uid))), default=0)

        return self._call(read, "reading the highest TE plan id")


def _doc(row: Any) -> dict[str, Any]:
    return {"kind": row.kind, "state": row.state, "since": row.since, "threshold_mbps": row.threshold_mbps,
            "epoch": row.epoch, "body": row.body}


def _fence(session: Any, epoch: int | None) -> None:
    """Inside the write's transaction: refuse ``epoch`` if the records or the leader row hold a newer one
    (raised as the database fence's own refusal: the writer thread counts it and never retries it)."""
    if epoch is None:
        return
    from sqlalchemy import func, select

    from app.db import fencing
    from app.db.models import TeRecordRow

    newest = session.execute(select(func.max(TeRecordRow.epoch))).scalar_one_or_none()
    leader, holder, _since = fencing.read(session)
    stored = max(int(newest or 0), leader)
    if epoch < stored:
        raise fencing.StaleEpoch(epoch, stored, holder if leader == stored else "")
