"""Where the TE loop keeps its records (:class:`app.te.takeover.TeRecord`) across a restart or a takeover.

A plain interface, :class:`TeStore` (``load`` / ``put`` / ``remove``), epoch-tagged: a write carries
the writer's epoch (the leader's, once controllers are elected; None for a lone controller) and is
refused (:class:`StaleEpoch`) when the store has seen a newer one, so a deposed leader cannot bring
back a record its successor released. Two backends:

- :class:`FileTeStore`: one JSON document next to the controller's state file (``[controller]
  state_file`` ``X.json`` → ``X.te.json``), written atomically (fsync + rename) on every change;
- :class:`MemoryTeStore`: no state file configured (and the unit tests): nothing survives the
  process, and the takeover pass still releases whatever TE rules and circuits the switches hold
  (orphans), so nothing stays lit without an owner; only the elephant falls back to its default path
  until the next imbalance moves it again.

Why not the database: a controller without ``[db] url`` must keep its offloads too, the state file
is already how a restarted controller remembers what it learnt, and a record is read once at start
and written a few times per offload. A shared store for controllers on different hosts plugs in
behind the same interface.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Protocol

from app.controller.state_file import write_atomic
from app.te.takeover import RecordError, TeRecord

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
    """The store of a controller whose ``[controller] state_file`` is ``state_file``."""
    path = te_state_path(state_file)
    return FileTeStore(path) if path else MemoryTeStore()
