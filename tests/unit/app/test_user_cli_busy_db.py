"""`mlte web create-user` on a database a running controller keeps writing to: it waits for the write
lock instead of failing at once with "database is locked" (a CI run's reservation-lifecycle lab lost its
`create-user` that way: a read then a write in one deferred SQLite transaction is refused, not retried,
when another connection committed in between)."""
from __future__ import annotations

import threading
import time

from app.cli.main import main
from app.db.migrate import open_migrated
from monitor.store import MonitorStore


def test_create_user_waits_for_a_busy_database(tmp_path, capsys) -> None:
    path = str(tmp_path / "busy.db")
    assert main(["web", "create-user", "seed", "--db", path]) == 0
    db = open_migrated(f"sqlite:///{path}")
    store = MonitorStore(db.engine, 3600)
    stop = threading.Event()

    def controller_writes() -> None:  # the monitor's samples, back to back
        while not stop.is_set():
            store.add_samples([(time.time(), "packet:A:3-B:1", "mbps", 1.0)] * 50)

    writer = threading.Thread(target=controller_writes, daemon=True)
    writer.start()
    try:
        time.sleep(0.2)
        codes = [main(["web", "create-user", f"u{i}", "--db", path]) for i in range(8)]
    finally:
        stop.set()
        writer.join(timeout=10)
        db.dispose()
    err = capsys.readouterr().err
    assert codes == [0] * 8, err
    assert "database is locked" not in err
