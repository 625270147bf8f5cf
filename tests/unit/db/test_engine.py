"""The SQLite engine's connection settings: WAL with synchronous=NORMAL (no fsync per commit, still safe from a
process crash), foreign keys on, the busy timeout."""
from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from app.db.engine import SQLITE_BUSY_MS, make_engine


def test_a_file_database_uses_wal_without_an_fsync_per_commit(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'mlte.db'}")
    try:
        with engine.connect() as c:
            assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert c.execute(text("PRAGMA synchronous")).scalar() == 1  # NORMAL (FULL is 2)
            assert c.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert c.execute(text("PRAGMA busy_timeout")).scalar() == SQLITE_BUSY_MS
    finally:
        engine.dispose()
