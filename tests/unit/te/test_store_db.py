"""The TE store in the shared database (app/te/store.py ``DbTeStore``, table ``te_records``, migration
0010), on SQLite and PostgreSQL: records round-trip, an older epoch is refused (by the store's own
check and by the controller writer's fence), two controllers on one database see each other's
records, and a new leader's TE app adopts the offload the old leader recorded — then releases it when
its elephant has gone, the record leaving the database for both."""
from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from alembic import command
from sqlalchemy import inspect

from app.controller import te_app
from app.controller.db_writer import DATABASE, DbWriter
from app.controller.plan_runner import PlanRunner
from app.controller.runtime import SETTINGS
from app.db import fencing, migrate
from app.db.engine import Database
from app.te.damping import Damper
from app.te.growth import GrowthDecider
from app.te.store import DbTeStore, FileTeStore, StaleEpoch, StoreError
from app.te.takeover import LIT, OPENING, RELEASING, TeRecord, growth_record, offload_record, with_state
from tests.unit.db.test_fencing import pg_server, url  # noqa: F401 (fixtures: SQLite and PostgreSQL)
from tests.unit.te import test_growth as fig2_direct
from tests.unit.te.test_takeover import records_for_store
from tests.unit.te.test_takeover_app import fabric, offloaded, restarted, steer_rules  # noqa: F401 (fixture)


@pytest.fixture
def dbs(url: str) -> Iterator[list[Database]]:  # noqa: F811
    """Two controllers' own engines on one migrated database."""
    first = migrate.open_migrated(url)
    out = [first, Database(url)]
    yield out
    for db in out:
        fencing.detach(db.engine)
        db.dispose()


def a_growth() -> TeRecord:
    d = GrowthDecider(Damper(min_hold_s=5.0, on=0.7, off=0.4), stable_ms=5, calm_intervals=3)
    (dec,) = d.on_event(fig2_direct.growth_event(), fig2_direct.live_graph(), now=10.0)
    return growth_record(dec.growth, state=OPENING, since=1234.5)


def js(records: list[TeRecord]) -> list[dict]:
    """Records as the store compares them (JSON: tuples and lists, 4 and 4.0 alike)."""
    return [r.to_json() for r in records]


def claim(db: Database, epoch: int, holder: str) -> None:
    with db.session() as s:
        fencing.claim(s, epoch, holder)


def test_records_round_trip(dbs):
    store = DbTeStore.direct(dbs[0])
    off, grow = records_for_store(), a_growth()  # offload 1 (LIT, epoch 3, threshold 1.0) and a growth
    assert store.load() == []
    store.put(off)
    store.put(grow)
    back = store.load()
    assert [r.to_json() for r in back] == [grow.to_json(), off.to_json()]  # (kind, ident) order
    store.put(with_state(off, RELEASING))  # the same key: updated in place
    assert [r.state for r in store.load()] == [OPENING, RELEASING]
    store.remove(grow.kind, grow.ident)
    store.remove(grow.kind, grow.ident)  # gone already: nothing to do
    assert [r.key for r in store.load()] == [off.key]


def test_an_older_epoch_is_refused_and_changes_nothing(dbs):
    store = DbTeStore.direct(dbs[0])
    rec = records_for_store()  # epoch 3
    store.put(rec)
    with pytest.raises(StaleEpoch, match="stale controller epoch 2"):
        store.put(with_state(rec, RELEASING, epoch=2))
    with pytest.raises(StaleEpoch):
        store.remove(rec.kind, rec.ident, epoch=2)
    assert js(store.load()) == js([rec])
    store.remove(rec.kind, rec.ident, epoch=4)
    assert store.load() == []
    # the records are gone, the leader's epoch is not: a new leader claimed 5, a write of 4 is refused
    claim(dbs[0], 5, "ctl-2")
    with pytest.raises(StaleEpoch, match="held by ctl-2"):
        store.put(with_state(rec, LIT, epoch=4))
    assert store.load() == []
    store.put(with_state(rec, LIT, epoch=5))
    store.put(with_state(rec, LIT, epoch=None))  # a lone controller's write (no epoch) is not checked
    assert [r.epoch for r in store.load()] == [None]


def test_two_controllers_see_each_others_records(dbs):
    one, two = DbTeStore.direct(dbs[0]), DbTeStore.direct(dbs[1])
    rec = records_for_store()
    one.put(rec)
    assert js(two.load()) == js([rec])
    two.put(with_state(rec, RELEASING, epoch=4))
    assert one.load()[0].state == RELEASING and one.load()[0].epoch == 4
    two.remove(rec.kind, rec.ident, epoch=4)
    assert one.load() == []


def test_the_writer_fence_refuses_a_deposed_leader(url, dbs):  # noqa: F811
    """Through each controller's writer thread, as the TE app writes: the old leader (epoch 3) keeps
    writing until the new one claims epoch 4; then every write of it is refused, whatever its record
    says (its fence is checked at commit), and the new leader's writes go through."""
    writers = [DbWriter(retries=0, connect=lambda: Database(url), name=f"w{i}").start() for i in (1, 2)]
    try:
        one, two = (DbTeStore(lambda fn, w=w: w.call(DATABASE, fn, timeout=30)) for w in writers)
        writers[0].claim(3, "ctl-1")
        rec = records_for_store()
        one.put(rec)
        assert js(two.load()) == js([rec])
        writers[1].claim(4, "ctl-2")
        with pytest.raises(StaleEpoch):
            one.put(with_state(rec, RELEASING))
        with pytest.raises(StaleEpoch):  # no epoch on the record: the writer's fence (3 < 4) refuses it
            one.put(with_state(rec, RELEASING, epoch=None))
        assert writers[0].guard.refused == 1
        with pytest.raises(StaleEpoch):
            one.remove(rec.kind, rec.ident, 3)
        two.put(with_state(rec, LIT, epoch=4))
        assert [(r.state, r.epoch) for r in one.load()] == [(LIT, 4)]
        writers[1].fence = fencing.Fence.standby("ctl-2")  # deposed in turn (not the leader: epoch 0)
        with pytest.raises(StaleEpoch, match="not the leader"):
            two.remove(rec.kind, rec.ident, None)
        assert len(one.load()) == 1
    finally:
        for w in writers:
            assert w.close(10.0)


def test_a_database_error_is_a_store_error(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'never-migrated.db'}")  # no te_records table
    try:
        with pytest.raises(StoreError, match="TE store \\(database\\): reading the records failed"):
            DbTeStore.direct(db).load()
    finally:
        db.dispose()


def test_migration_0010_up_and_down(url):  # noqa: F811
    db = migrate.open_migrated(url)
    try:
        assert "te_records" in inspect(db.engine).get_table_names()
        cfg = migrate.config()
        with migrate.migration_lock(db.engine) as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0009")
        assert migrate.current(db.engine) == "0009"
        assert "te_records" not in inspect(db.engine).get_table_names()
        assert migrate.upgrade(db.engine) == migrate.head()
        DbTeStore.direct(db).put(records_for_store())
    finally:
        db.dispose()


# ---- the takeover pass over the database store ----------------------------------------------------------
def test_a_new_leader_adopts_the_offload_the_old_leader_recorded(monkeypatch, fabric, url):  # noqa: F811
    """Controller 1 (epoch 1) offloaded the elephant and recorded it in the shared database; it dies.
    Controller 2 (another engine on the same database, elected with epoch 2) starts with nothing in
    memory: its takeover pass finds the record, adopts the offload (nothing on the switches touched),
    rewrites the record under epoch 2; controller 1's late write is refused; with no traffic the
    new owner releases it and the record leaves the database."""
    migrate.open_migrated(url).dispose()
    writers = [DbWriter(retries=0, connect=lambda: Database(url), name=f"ctl{i}").start() for i in (1, 2)]
    try:
        one, two = (DbTeStore(lambda fn, w=w: w.call(DATABASE, fn, timeout=30)) for w in writers)
        writers[0].claim(1, "ctl-1")
        _ctl, off = offloaded(fabric)
        rec = offload_record(off, state=LIT, since=time.time() - 4.0, threshold_mbps=0.4, epoch=1)
        one.put(rec)
        writers[1].claim(2, "ctl-2")
        app = restarted(monkeypatch, fabric, two)
        app.epoch = 2
        app._poll_once()
        assert app.adopted and list(app.decider.offloads) == [7] and app.thresholds[7] == 0.4
        assert len(steer_rules(fabric)) == 4 and fabric.far_end(("A", 4)) == ("C", 2)  # nothing touched
        assert [(r.key, r.state, r.epoch) for r in one.load()] == [(("offload", 7), LIT, 2)]
        with pytest.raises(StaleEpoch):  # the deposed leader wakes up and tries to release it
            one.put(with_state(rec, RELEASING))
        for _ in range(4):  # no traffic: its counters stay flat, the new owner releases it
            app._poll_once()
        assert app.decider.offloads == {} and steer_rules(fabric) == [] and fabric.far_end(("A", 4)) is None
        assert one.load() == [] and two.load() == []
    finally:
        for w in writers:
            assert w.close(10.0)


def test_the_te_app_opens_the_database_store_when_there_is_a_database(monkeypatch, fabric, tmp_path):  # noqa: F811
    """``[db] url`` set: the TE app's store is the shared table, through the controller's writer thread
    (a record it writes is in the database for every controller); unset: the file beside the state file."""
    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    migrate.open_migrated(shared).dispose()
    writer = DbWriter(retries=0, connect=lambda: Database(shared)).start()
    users: list[str] = []
    monkeypatch.setattr(te_app.db_writer, "shared", lambda: users.append("shared") or writer)
    monkeypatch.setattr(te_app.db_writer, "release", lambda: users.append("release"))
    monkeypatch.setattr(te_app, "hub", SimpleNamespace(spawn=lambda f, *a: f(*a), sleep=time.sleep))
    monkeypatch.setattr(SETTINGS, "te", {}, raising=False)
    monkeypatch.setattr(SETTINGS, "db_url", shared)
    try:
        app = te_app.TeApp(**fabric.contexts(), mlte_plan_runner=PlanRunner(fabric.live(), fabric.view))
        assert isinstance(app.store, DbTeStore) and app.writer is writer and users == ["shared"]
        rec = records_for_store()
        app._persist(rec)
        db = Database(shared)
        try:
            assert js(DbTeStore.direct(db).load()) == js([rec])
        finally:
            db.dispose()
        app.stop()
        assert users == ["shared", "release"] and app.writer is None
    finally:
        assert writer.close(10.0)
    monkeypatch.setattr(SETTINGS, "db_url", "")
    monkeypatch.setattr(SETTINGS, "controller", {**SETTINGS.section("controller"),
                                                 "state_file": str(tmp_path / "state.json")}, raising=False)
    app = te_app.TeApp(**fabric.contexts(), mlte_plan_runner=PlanRunner(fabric.live(), fabric.view))
    assert isinstance(app.store, FileTeStore) and app.store.path == tmp_path / "state.te.json"


def test_the_highest_te_plan_number_in_the_shared_plan_log(dbs):
    """A leader that takes over after every record was released numbers its plans above the plan log's
    (the soak: a new leader's ``offload1`` was refused by the plans table's unique uid)."""
    from app.db.models import Plan

    store = DbTeStore.direct(dbs[1])
    assert store.highest_plan_ident() == 0
    with dbs[0].session() as s:
        for uid in ("offload3", "release5", "grow2", "map1-place-5001-12.000", "placement4", "res12", None):
            s.add(Plan(kind="x", mode="ordered", state="done", started_at=1.0, steps=[], uid=uid))
        s.commit()
    assert store.highest_plan_ident() == 5  # map…, reservations' and unnamed plans do not count
