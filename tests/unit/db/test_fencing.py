"""Database fencing (issue 24): a new leader's claim raises the stored epoch; a writer with an older
epoch is refused inside its transaction and nothing it wrote remains; on PostgreSQL the old and new
leader interleave (a transaction open before the claim, a claim in progress, a frozen writer holding
the row); no fence behaves as before; migration 0008 goes up and down. SQLite and PostgreSQL."""
from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import exc as sa_exc
from sqlalchemy import func, inspect, select, text
from sqlalchemy.orm import Session

from app.db import fencing, migrate
from app.db.engine import Database
from app.db.feed import Feed
from app.db.models import ControllerEpoch, Event, Reservation
from app.db.states import PROVISIONING
from monitor.store import MonitorStore
from tests.lib.postgres import find_bindir, postgres_server
from tests.lib.webserver import ROOT
from tests.unit.db.test_provisioning import CIRCUIT, RULES, T, World

_names = itertools.count()


@pytest.fixture(scope="module")
def pg_server() -> Iterator[object]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb/pg_ctl) are not installed: apt-get install postgresql")
    with postgres_server(bindir) as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path) -> str:  # noqa: ANN001
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fence.db'}"
    server = request.getfixturevalue("pg_server")
    return server.create_database(f"fence_{next(_names)}")


@pytest.fixture
def pg_url(pg_server) -> str:  # noqa: ANN001
    return pg_server.create_database(f"fence_{next(_names)}")


@pytest.fixture
def world(url: str) -> Iterator[World]:
    w = World(url)
    yield w
    fencing.detach(w.db.engine)
    w.db.dispose()


def stored(db: Database) -> tuple[int, str, float]:
    with db.session() as s:
        return fencing.read(s)


def claim(db: Database, epoch: int, holder: str, **kw: float) -> int:
    with db.session() as s:
        return fencing.claim(s, epoch, holder, **kw)


def snapshot(w: World, rid: int) -> tuple:
    """Everything a refused mark_active could have touched: the reservation's state and the row counts."""
    return w.state(rid), w.counts()


# ---- claim ------------------------------------------------------------------------------------------------
def test_claim_raises_the_epoch_and_refuses_an_older_one(world: World) -> None:
    db = world.db
    assert stored(db) == (0, "", 0.0)  # the migration's row: no leader yet
    assert claim(db, 5, "ctl-a", now=100.0) == 0
    assert stored(db) == (5, "ctl-a", 100.0)
    assert claim(db, 5, "ctl-a", now=101.0) == 5  # a retried claim of the same epoch
    assert claim(db, 9, "ctl-b", now=102.0) == 5
    with pytest.raises(fencing.StaleEpoch, match="stale controller epoch 7: the database's epoch is 9 "
                                                 r"\(held by ctl-b\)") as err:
        claim(db, 7, "ctl-a")
    assert (err.value.ours, err.value.stored) == (7, 9)
    assert stored(db) == (9, "ctl-b", 102.0)  # the refused claim wrote nothing


@pytest.mark.parametrize("epoch", [0, -1, True, 2**63, "3"])
def test_claim_rejects_a_bad_epoch(world: World, epoch: object) -> None:
    with pytest.raises(fencing.FenceError, match="epoch must be an integer"):
        claim(world.db, epoch, "x")  # type: ignore[arg-type]
    assert stored(world.db)[0] == 0


def test_claim_needs_a_session_of_its_own(world: World) -> None:
    with world.db.session() as s:
        s.execute(select(1))
        with pytest.raises(fencing.FenceError, match="without an open transaction"):
            fencing.claim(s, 1, "x")


def test_claim_recreates_a_deleted_row(world: World) -> None:
    with world.db.session() as s, s.begin():
        s.execute(ControllerEpoch.__table__.delete())
    assert claim(world.db, 3, "ctl") == 0 and stored(world.db)[:2] == (3, "ctl")


# ---- a writer with an older epoch ---------------------------------------------------------------------------
def test_a_stale_writer_is_refused_and_nothing_is_half_written(world: World) -> None:
    """The old leader's mark_active (audit, event, circuits, rules, the state change: one transaction)
    is refused once a newer leader claimed; nothing of it remains; the guard counts it."""
    rid = world.reservation(PROVISIONING)
    guard = fencing.attach(world.db.engine, fencing.Guard(fencing.Fence(1, "old")))
    claim(world.db, 1, "old")
    other = world.reservation(PROVISIONING, name="other")
    assert world.store.mark_active(other, CIRCUIT, RULES, T) is True  # epoch 1 is current: written
    assert guard.checked >= 1 and guard.refused == 0
    claim(world.db, 2, "new")
    before = snapshot(world, rid)
    with pytest.raises(fencing.StaleEpoch, match="stale controller epoch 1: the database's epoch is 2"):
        world.store.mark_active(rid, CIRCUIT, RULES, T)
    assert snapshot(world, rid) == before and world.state(rid)[0] == PROVISIONING
    with pytest.raises(fencing.StaleEpoch):
        world.store.mark_failed(other, "broke", T)  # every store write, not only mark_active
    with pytest.raises(fencing.StaleEpoch):
        Feed(world.db).event("controller.test", "from the deposed leader")
    with pytest.raises(fencing.StaleEpoch):
        MonitorStore(world.db.engine).add_samples([(T, "A:1", "util", 0.5)])  # samples are fenced too
    assert snapshot(world, rid) == before
    assert guard.refused == 4 and "epoch is 2 (held by new)" in guard.last_refusal
    guard.fence = fencing.Fence(2, "new")  # the same process elected again: writes go through
    assert world.store.mark_active(rid, CIRCUIT, RULES, T) is True


def test_a_standby_controller_writes_nothing_even_before_any_claim(world: World) -> None:
    rid = world.reservation(PROVISIONING)
    fencing.attach(world.db.engine, fencing.Guard(fencing.Fence.standby("ctl-b")))
    before = snapshot(world, rid)
    with pytest.raises(fencing.StaleEpoch, match="not the leader"):
        world.store.mark_active(rid, CIRCUIT, RULES, T)
    assert snapshot(world, rid) == before


def test_reads_are_not_fenced(world: World) -> None:
    rid = world.reservation(PROVISIONING)
    fencing.attach(world.db.engine, fencing.Guard(fencing.Fence.standby()))
    assert [o.id for o in world.store.due(T)] == [rid]  # a standby keeps its view warm from the database
    assert world.store.installed() == [] and Feed(world.db).latest_topology() is None


def test_no_fence_behaves_as_before(world: World) -> None:
    """``Fence()`` (one controller, no etcd): nothing is read or checked — writes go through under a
    newer stored epoch, and even on a database whose epoch table is gone."""
    rid = world.reservation(PROVISIONING)
    guard = fencing.attach(world.db.engine, fencing.Guard())
    claim(world.db, 7, "someone")
    assert world.store.mark_active(rid, CIRCUIT, RULES, T) is True
    with world.db.session() as s, s.begin():
        s.execute(text("DROP TABLE controller_epoch"))
    Feed(world.db).event("controller.test", "still written")
    assert guard.checked == guard.refused == 0
    fencing.detach(world.db.engine)  # and an engine without a guard: the web service's
    assert fencing.guard_of(world.db.engine) is None
    assert world.store.mark_failed(rid, "broke", T) is True


# ---- PostgreSQL: old and new leader interleaved -------------------------------------------------------------
class Leaders:
    """The old leader's and the new leader's engines (separate processes in real life), a reservation
    in PROVISIONING, the old leader's claim of epoch 1; sessions opened here are closed at the end."""

    def __init__(self, url: str) -> None:
        w = World(url)
        self.old, self.new = w.db, Database(url)
        fencing.attach(self.old.engine, fencing.Guard(fencing.Fence(1, "old")))
        fencing.attach(self.new.engine, fencing.Guard(fencing.Fence(2, "new")))
        claim(self.old, 1, "old")
        self.rid = w.reservation(PROVISIONING)
        self.sessions: list[Session] = []

    def session(self, db: Database) -> Session:
        s = db.session()
        self.sessions.append(s)
        return s

    def state(self) -> str:
        with self.new.session() as s:
            res = s.get(Reservation, self.rid)
            assert res is not None
            return res.state

    def close(self) -> None:
        for s in self.sessions:
            s.close()
        for db in (self.old, self.new):
            fencing.detach(db.engine)
            db.dispose()


@pytest.fixture
def leaders(pg_url: str) -> Iterator[Leaders]:
    two = Leaders(pg_url)
    yield two
    two.close()


def _events(db: Database) -> int:
    with db.session() as s:
        return s.execute(select(func.count()).select_from(Event)).scalar_one()


def test_pg_a_transaction_open_before_the_claim_is_refused_at_commit(leaders: Leaders) -> None:
    """The old leader's transaction has changed the reservation row before the new leader claims;
    the claim does not wait for it (it holds no lock on the epoch row yet) and its commit is refused."""
    s = leaders.session(leaders.old)
    res = s.get(Reservation, leaders.rid)
    assert res is not None
    res.state, res.state_reason = "ACTIVE", "lit by the old leader"
    s.add(Event(ts=T, kind="controller.test", severity="info", message="old", detail={}))
    s.flush()  # written, not committed
    events = _events(leaders.new)
    assert claim(leaders.new, 2, "new") == 1
    with pytest.raises(fencing.StaleEpoch, match="epoch 1: the database's epoch is 2"):
        s.commit()
    assert leaders.state() == PROVISIONING and _events(leaders.new) == events


def test_pg_a_write_that_passed_its_check_commits_before_the_claim(leaders: Leaders) -> None:
    """FOR SHARE: a write that checked before the claim holds the row, the claim waits for it, so it
    is ordered under the old epoch; the old leader's next write is refused."""
    s = leaders.session(leaders.old)
    s.add(Event(ts=T, kind="controller.test", severity="info", message="before the claim", detail={}))
    s.flush()
    assert fencing.check(s, 1) == 1  # holds the row FOR SHARE until commit
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(claim(leaders.new, 2, "new")), daemon=True)
    t.start()
    t.join(0.5)
    try:
        assert done == [] and t.is_alive()  # the claim waits for the writer that holds the row
    finally:
        s.commit()  # the old leader's write lands (before the claim, under epoch 1)
        t.join(30)
    assert done == [1] and stored(leaders.new)[:2] == (2, "new")
    with pytest.raises(fencing.StaleEpoch):
        Feed(leaders.old).event("controller.test", "after the claim")
    with leaders.new.session() as r:
        assert r.execute(select(Event.message).where(Event.kind == "controller.test")).scalars().all() \
            == ["before the claim"]
    assert leaders.state() == PROVISIONING


def test_pg_a_write_racing_a_claim_in_progress_waits_and_is_refused(leaders: Leaders) -> None:
    """The new leader's claim has updated the row but not committed; the old leader's commit checks
    meanwhile: it waits for the claim, then re-reads the row (READ COMMITTED) and is refused."""
    claimer = leaders.session(leaders.new)
    claimer.execute(text("UPDATE controller_epoch SET epoch = 2, holder = 'new' WHERE id = 1"))  # in progress
    s = leaders.session(leaders.old)
    res = s.get(Reservation, leaders.rid)
    assert res is not None
    res.state = "ACTIVE"
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            s.commit()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 (the outcome is asserted below)
            outcome.append(exc)

    t = threading.Thread(target=commit, daemon=True)
    t.start()
    t.join(0.5)
    try:
        assert outcome == [] and t.is_alive()  # blocked on the claim's row lock
    finally:
        claimer.commit()
        t.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], fencing.StaleEpoch)
    assert leaders.state() == PROVISIONING


def test_pg_a_frozen_writer_does_not_stall_the_claim(leaders: Leaders) -> None:
    """A leader frozen (SIGSTOP) between its check and its commit holds the row FOR SHARE: the server
    ends its session after the guard's idle-in-transaction timeout, the claim goes through, and the
    frozen leader's commit fails when it wakes up: nothing of it remains."""
    guard = fencing.guard_of(leaders.old.engine)
    assert guard is not None
    guard.idle_tx_timeout_s = 0.5
    s = leaders.session(leaders.old)
    res = s.get(Reservation, leaders.rid)
    assert res is not None
    res.state = "ACTIVE"
    s.flush()
    fencing.check(s, 1)  # ... and then the process is frozen: the transaction stays open, idle
    t0 = time.monotonic()
    assert claim(leaders.new, 2, "new", wait_s=20) == 1
    waited = time.monotonic() - t0
    with pytest.raises(sa_exc.DBAPIError):  # the server terminated the frozen session
        s.commit()
    assert leaders.state() == PROVISIONING and stored(leaders.new)[:2] == (2, "new")
    print(f"claim waited {waited:.2f} s for the frozen writer (idle timeout 0.5 s)")


_FROZEN_CHILD = """
import sys, time
from app.db import fencing
from app.db.engine import Database
from app.db.models import Reservation
db = Database(sys.argv[1])
fencing.attach(db.engine, fencing.Guard(fencing.Fence(1, "old")))  # the default idle timeout
s = db.session()
s.get(Reservation, int(sys.argv[2])).state = "ACTIVE"
s.flush()
fencing.check(s, 1)
print("checked", flush=True)
time.sleep(1.0)  # the parent stops this process here, then lets it go on
try:
    s.commit()
    print("committed", flush=True)
except Exception as exc:
    print("failed", type(exc).__name__, flush=True)
"""


def test_pg_a_leader_stopped_by_sigstop_changes_nothing(leaders: Leaders) -> None:
    """A real process, frozen with SIGSTOP after its check and before its commit (it holds the row
    FOR SHARE): the new leader's claim goes through once the server ended the frozen session
    (idle-in-transaction timeout); after SIGCONT the old leader's commit fails, the row is unchanged."""
    url = leaders.new.engine.url.render_as_string(hide_password=False)
    child = subprocess.Popen([sys.executable, "-c", _FROZEN_CHILD, url, str(leaders.rid)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "checked"
        os.kill(child.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        assert claim(leaders.new, 2, "new", wait_s=20) == 1
        waited = time.monotonic() - t0
        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert out.split()[0] == "failed", out  # its session was ended: nothing committed
        assert leaders.state() == PROVISIONING and stored(leaders.new)[:2] == (2, "new")
        print(f"claim waited {waited:.2f} s for the SIGSTOPped leader ({out.strip()})")
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.communicate(timeout=30)


def test_pg_a_claim_gives_up_on_a_row_held_too_long(pg_url: str) -> None:
    """An unguarded session (no idle timeout) holding the row: the claim gives up after ``wait_s``
    with a clear error, nothing written."""
    db, other = migrate.open_migrated(pg_url), Database(pg_url)
    try:
        with other.session() as holder:
            holder.execute(text("SELECT 1 FROM controller_epoch FOR SHARE"))  # and never commits
            with pytest.raises(fencing.FenceError, match="stayed locked for 0.3 s"):
                claim(db, 4, "new", wait_s=0.3)
        assert stored(db)[0] == 0
    finally:
        db.dispose()
        other.dispose()


# ---- migration 0008 ----------------------------------------------------------------------------------------
def test_migration_0008_up_and_down(url: str) -> None:
    db = migrate.open_migrated(url)
    try:
        assert migrate.current(db.engine) == migrate.head() >= "0008"
        assert stored(db) == (0, "", 0.0)
        cfg = migrate.config()
        with migrate.migration_lock(db.engine) as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0007")
        assert migrate.current(db.engine) == "0007"
        assert "controller_epoch" not in inspect(db.engine).get_table_names()
        assert migrate.upgrade(db.engine) == migrate.head()
        assert stored(db) == (0, "", 0.0)  # the row is back, once
        with db.session() as s:
            assert s.execute(select(func.count()).select_from(ControllerEpoch)).scalar_one() == 1
    finally:
        db.dispose()
