"""The controller's database writer: queueing never blocks green threads, samples are dropped first,
failures are reported (not raised), close flushes."""
from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable

import eventlet
import pytest
import sqlalchemy.exc
from sqlalchemy import create_engine, select

from app.controller.db_writer import EVENT, PRUNE, RECORD, SAMPLE, SNAPSHOT, DbWriter, WriterClosed
from app.db import migrate
from app.db.engine import Database
from monitor.events import Event
from monitor.store import MonitorStore

LOCK_SECONDS = 3.0


def _max_gap(ticks: list[float]) -> float:
    return max(b - a for a, b in zip(ticks, ticks[1:], strict=False))


def _run_under_lock(path: str, work: Callable[[], list[float]], pending: Callable[[], int] = lambda: 0,
                    ) -> tuple[float, list[float], int]:
    """Hold the SQLite write lock for LOCK_SECONDS from a second connection while a green ticker runs
    and ``work`` (a green thread) writes; returns (longest ticker gap, submit durations, jobs pending
    when the lock was released)."""
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    ticks: list[float] = []
    running = True

    def ticker() -> None:
        while running:
            ticks.append(time.monotonic())
            eventlet.sleep(0.01)

    tick_thread = eventlet.spawn(ticker)
    durations = eventlet.spawn(work).wait() or []
    eventlet.sleep(max(0.0, LOCK_SECONDS - (ticks[-1] - ticks[0])))
    held_up = pending()
    locker.execute("COMMIT")
    locker.close()
    running = False
    tick_thread.wait()
    return _max_gap(ticks), durations, held_up


def test_enqueue_while_db_locked_keeps_green_threads_running(tmp_path) -> None:
    path = tmp_path / "mon.db"
    url = f"sqlite:///{path}"
    migrate.upgrade(url)  # the tables exist before the lock is taken
    writer = DbWriter(max_jobs=100, connect=lambda: Database(url)).start()
    writer.open("store", lambda db: MonitorStore(db.engine))  # sqlite busy timeout 60 s > the lock
    n = 20

    def work() -> list[float]:
        durations = []
        for i in range(n):
            t0 = time.monotonic()
            writer.submit(SAMPLE, "store", lambda s, i=i: s.add_samples([(1000.0 + i, "A-B", "util", i / n)]))
            writer.submit(EVENT, "store", lambda s, i=i: s.add_event(Event(1000.0 + i, "A-B", "hot_spot")))
            durations.append(time.monotonic() - t0)
            eventlet.sleep(0.05)
        return durations

    gap, durations, pending = _run_under_lock(str(path), work, writer.pending)
    assert pending > 0, "the writer was not held up by the lock: the test did not exercise it"
    # behavioural: nothing waited for the lock (it was held for LOCK_SECONDS), not a speed target
    assert gap < LOCK_SECONDS / 3, f"a green thread was starved for {gap:.2f} s"
    assert max(durations) < LOCK_SECONDS / 3
    assert writer.flush(30.0)
    store = MonitorStore(create_engine(url))
    assert [p.value for p in store.series("A-B", "util")] == [i / n for i in range(n)]
    assert len(store.events(kind="hot_spot")) == n
    assert writer.stats()["errors"] == 0 and writer.stats()["written"] == 2 * n
    assert writer.close(5.0)


def test_contrast_writing_on_the_hub_starves_it(tmp_path) -> None:
    """The measurement above can fail: the same write done synchronously in a green thread stalls
    the ticker until sqlite's busy timeout (the lock holder, a green thread too, cannot even release it)."""
    path = tmp_path / "mon.db"
    url = f"sqlite:///{path}"
    migrate.upgrade(url)
    store = MonitorStore(create_engine(url, connect_args={"timeout": 2.0}))

    def work() -> list[float]:
        eventlet.sleep(0.1)
        t0 = time.monotonic()
        with pytest.raises(sqlalchemy.exc.OperationalError):  # the lock holder cannot run to release it
            store.add_samples([(1.0, "A-B", "util", 0.5)])
        return [time.monotonic() - t0]

    gap, durations, _ = _run_under_lock(str(path), work)
    assert gap > LOCK_SECONDS / 3 and durations[0] > LOCK_SECONDS / 3


class Recorder:
    def __init__(self) -> None:
        self.rows: list[tuple[str, object]] = []
        self.closed = False

    def write(self, kind: str, x: object) -> None:
        self.rows.append((kind, x))

    def close(self) -> None:
        self.closed = True


def test_full_queue_drops_oldest_samples_never_events_or_snapshots() -> None:
    rec = Recorder()
    writer = DbWriter(max_jobs=4)  # not started: the queue fills as if the database were stalled
    writer.open("r", lambda _db: rec)
    for i in range(3):
        writer.submit(SAMPLE, "r", lambda r, i=i: r.write("sample", i))
    writer.submit(EVENT, "r", lambda r: r.write("event", 0))  # full now: sample 0 goes
    writer.submit(SNAPSHOT, "r", lambda r: r.write("snapshot", 0))  # sample 1 goes
    writer.submit(SAMPLE, "r", lambda r: r.write("sample", 3))  # sample 2 goes
    writer.submit(RECORD, "r", lambda r: r.write("record", 0))  # sample 3 goes
    assert writer.submit(SAMPLE, "r", lambda r: r.write("sample", 4)) is False  # no sample left to drop: itself
    writer.submit(EVENT, "r", lambda r: r.write("event", 1))  # accepted over the bound
    stats = writer.stats()
    assert stats["dropped_samples"] == 5 and stats["over_bound"] == 1 and stats["queued"] == 5
    writer.start()
    assert writer.close(5.0)
    assert rec.rows == [("event", 0), ("snapshot", 0), ("record", 0), ("event", 1)]
    assert rec.closed


def test_prunes_are_coalesced() -> None:
    rec = Recorder()
    writer = DbWriter()
    writer.open("r", lambda _db: rec)
    for t in (1, 2, 3):
        writer.submit(PRUNE, "r", lambda r, t=t: r.write("prune", t))
    writer.start()
    assert writer.close(5.0)
    assert rec.rows == [("prune", 3)] and writer.stats()["dropped_prunes"] == 0  # the newest cut-off


def test_failures_are_retried_then_reported_not_raised(caplog) -> None:
    attempts: list[int] = []
    failed: list[BaseException] = []

    class Flaky:
        def write(self) -> None:
            attempts.append(1)
            raise sqlite3.OperationalError("database is locked")

    writer = DbWriter(retries=2, retry_delay=0.0).start()
    writer.open("f", lambda _db: Flaky())
    writer.submit(SNAPSHOT, "f", lambda f: f.write(), failed.append)
    writer.submit(SAMPLE, "f", lambda f: f.write())
    writer.submit(EVENT, "nowhere", lambda f: None)  # a resource nobody opened
    assert writer.flush(5.0)
    assert len(attempts) == 3 + 1  # the snapshot 1 + 2 retries, the sample once
    assert isinstance(failed[0], sqlite3.OperationalError)
    failures: list[str] = []
    with caplog.at_level(logging.ERROR):
        assert writer.pump(logging.getLogger("test.errors"), failures) == 3
    assert writer.stats()["errors"] == 3 and writer.stats()["alive"]
    assert "database is locked" in failures[0] and "nowhere" in failures[2]
    assert "Traceback" in caplog.text
    writer.close()


def test_a_failing_open_is_retried_by_the_next_job() -> None:
    calls: list[int] = []
    rec = Recorder()

    def factory(_db: object) -> Recorder:
        calls.append(1)
        if len(calls) <= 3:  # the OPEN job and its 2 retries
            raise sqlite3.OperationalError("database is locked")
        return rec

    writer = DbWriter(retries=2, retry_delay=0.0).start()
    writer.open("r", factory)
    writer.submit(EVENT, "r", lambda r: r.write("event", 1))
    assert writer.close(5.0)
    assert rec.rows == [("event", 1)] and writer.stats()["errors"] == 1


def test_one_database_for_every_resource_disposed_at_close() -> None:
    """The writer owns the engine: ``connect`` runs once, in the writer thread, and every factory
    gets what it returned; closing the writer disposes it after the resources are closed."""
    closed: list[str] = []

    class Db:
        def dispose(self) -> None:
            closed.append("db")

    class Res:
        def __init__(self, db: Db) -> None:
            self.db = db

        def close(self) -> None:
            closed.append("res")

    connects: list[Db] = []
    writer = DbWriter(connect=lambda: connects.append(Db()) or connects[-1]).start()
    seen: list[Db] = []
    for name in ("a", "b"):
        writer.open(name, Res)
        writer.submit(RECORD, name, lambda r: seen.append(r.db))
    assert writer.close(5.0)
    assert len(connects) == 1 and seen == connects * 2
    assert closed == ["res", "res", "db"]


def test_closed_writer_rejects_jobs_and_unknown_kinds_are_errors() -> None:
    writer = DbWriter().start()
    with pytest.raises(ValueError, match="unknown job kind"):
        writer.submit("open", "r", lambda r: None)
    assert writer.close(5.0)
    with pytest.raises(WriterClosed):
        writer.submit(EVENT, "r", lambda r: None)


def test_fenced_writer_claims_and_a_deposed_one_is_refused_not_retried(tmp_path, caplog) -> None:  # noqa: ANN001
    """The writer claims in queue order and checks every commit against its fence: once another
    controller claimed a newer epoch, a job is refused (rolled back), run once despite retries, counted
    in ``refused_writes``, reported once as a warning (not an error), and ``call`` raises it."""
    from app.db import fencing
    from app.db.feed import Feed
    from app.db.models import Event as EventRow

    url = f"sqlite:///{tmp_path / 'fence.db'}"
    migrate.upgrade(url)
    writer = DbWriter(retries=2, retry_delay=0.0, connect=lambda: Database(url)).start()
    other = Database(url)  # the next leader, in another process in real life
    try:
        assert writer.fence == fencing.NO_FENCE and writer.stats()["refused_writes"] == 0
        writer.open("feed", Feed)
        assert writer.claim(3, "ctl-a") == 0 and writer.fence == fencing.Fence(3, "ctl-a")
        writer.submit(EVENT, "feed", lambda f: f.event("controller.test", "under epoch 3"))
        assert writer.flush(5.0) and writer.stats()["checked_writes"] == 1
        with other.session() as s:
            fencing.claim(s, 4, "ctl-b")
        runs: list[int] = []

        def write(feed: Feed) -> None:
            runs.append(1)
            feed.event("controller.test", "under epoch 3, deposed")

        writer.submit(EVENT, "feed", write)
        writer.submit(SNAPSHOT, "feed", lambda f: f.topology({"nodes": []}))
        assert writer.flush(5.0)
        with pytest.raises(fencing.StaleEpoch, match="epoch is 4 \\(held by ctl-b\\)"):
            writer.call("feed", lambda f: f.event("controller.test", "via call"), timeout=5.0)
        with pytest.raises(fencing.StaleEpoch):
            writer.claim(2, "ctl-a", timeout=5.0)  # an older claim changes nothing
        stats = writer.stats()
        assert runs == [1] and stats["refused_writes"] == 3 and stats["errors"] == 0 and stats["epoch"] == 3
        failures: list[str] = []
        with caplog.at_level(logging.WARNING):
            assert writer.pump(logging.getLogger("test.fence"), failures) == 1
        assert failures == [] and "refused" in caplog.text
        with other.session() as s:
            assert s.execute(select(EventRow.message)).scalars().all() == ["under epoch 3"]
        writer.fence = fencing.Fence(4, "ctl-b")  # this process is elected again
        writer.submit(EVENT, "feed", lambda f: f.event("controller.test", "under epoch 4"))
        assert writer.flush(5.0) and writer.stats()["refused_writes"] == 3
        with pytest.raises(TypeError, match="Fence"):
            writer.fence = 5  # type: ignore[assignment]
    finally:
        writer.close(5.0)
        other.dispose()
