"""Plans a dead leader left half-done (issue 24 item 2): recorded with their epoch and step states as they
run (app/db/plan_records.py, migration 0009), finished or rolled back by the next leader exactly once
(app/update/recovery.py, PlanRunner.recover), over the fake network and a migrated SQLite database."""
from __future__ import annotations

import itertools

import pytest
from sqlalchemy import text

from app.controller.plan_log import PlanLog
from app.controller.plan_runner import PlanRunner
from app.db.migrate import open_migrated
from app.db.plan_records import PlanRecords
from app.update.executor import DONE, FAILED, ROLLED_BACK, sequential
from app.update.model import FlowRule, XconSpec
from app.update.plan import ADD, FlowStep, Plan, XconStep
from app.update.recovery import FINISH, OWNER, ROLLBACK, RUNNING, Held, Unfinished, claimable, decide
from tests.lib.fake_network import FakeNetwork
from tests.lib.postgres import find_bindir, postgres_server
from tests.unit.controller.test_plan_runner import Book
from topology.spec import fig2_testbed

BYPASS = [XconSpec("X", 1, 2), XconSpec("Y", 1, 4), XconSpec("Z", 1, 2)]  # lights A:3 - C:1
RULE = FlowRule("A", "reservation", 7, 30000, {"in_port": 1, "eth_dst": "00:00:00:00:00:03"}, 3)


class Died(BaseException):
    """The leader's process ends mid-plan (not an Exception: the executor must not catch it)."""


class Dying:
    """The fake network's southbound, dead after ``budget`` changes (what it applied stays applied)."""

    def __init__(self, net: FakeNetwork, budget: int) -> None:
        self.net, self.budget = net, budget

    def __getattr__(self, name: str):  # noqa: ANN204
        fn = getattr(self.net, name)
        if not name.startswith(("install_", "remove_", "set_")):
            return fn

        def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            if self.budget <= 0:
                raise Died(name)
            self.budget -= 1
            return fn(*args, **kwargs)
        return call


def plan(commit: bool, pid: str = "p1") -> Plan:
    """Three XCONs then a rule on A that depends on them; ``commit``: the XCONs are the commit point."""
    xs = tuple(XconStep(id=f"x{i}", op=ADD, xcon=x) for i, x in enumerate(BYPASS))
    rule = FlowStep(id="rule", op=ADD, rule=RULE, deps=frozenset(s.id for s in xs))
    return Plan((*xs, rule), "provision", id=pid, commit=frozenset(s.id for s in xs) if commit else frozenset())


@pytest.fixture
def net():
    n = FakeNetwork.from_spec(fig2_testbed(), xcon_delay_s=0.0)
    yield n
    n.close()


_names = itertools.count()


@pytest.fixture(scope="module")
def pg_server():
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb/pg_ctl) are not installed: apt-get install postgresql")
    with postgres_server(bindir) as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'mlte.db'}"
    else:
        url = request.getfixturevalue("pg_server").create_database(f"plans_{next(_names)}")
    db = open_migrated(url)
    yield PlanRecords(db)
    db.engine.dispose()


def leader(net: FakeNetwork, store: PlanRecords, epoch: int | None, southbound: object | None = None) -> PlanRunner:
    r = PlanRunner(southbound or net, Book(), run_parallel=sequential, log=PlanLog())  # type: ignore[arg-type]
    r.store, r.epoch = store, epoch
    return r


def held(net: FakeNetwork) -> Held:
    return Held({o: net.xcon[o] for o in net.ots}, {s: list(net.tables[s].values()) for s in net.switches})


def die_mid_plan(net: FakeNetwork, store: PlanRecords, p: Plan, budget: int, epoch: int = 3) -> int:
    """The leader of ``epoch`` runs ``p`` and dies after ``budget`` changes: the row it left."""
    with pytest.raises(Died):
        leader(net, store, epoch, Dying(net, budget)).run(p, "plan:p1", "api")
    (row,) = store.unfinished(epoch + 1)
    return row.row


def test_step_states_are_recorded_as_the_plan_runs(net, store):
    row = die_mid_plan(net, store, plan(commit=False), budget=3)  # the XCONs' round, then died at the rule
    r = store.row(row)
    assert r["state"] == RUNNING and r["epoch"] == 3 and r["source"] == "api" and r["owner"] == "plan:p1"
    assert r["step_states"] == {"x0": "done", "x1": "done", "x2": "done"} and r["finished_at"] is None
    assert net.all_xcons() == set(BYPASS) and net.tables["A"] == {}  # half applied


def test_a_half_applied_plan_is_rolled_back_by_the_next_leader_exactly_once(net, store):
    """Died inside the XCONs' round: no step recorded done, but X and Y applied; the switches tell."""
    row = die_mid_plan(net, store, plan(commit=False), budget=2)
    assert store.row(row)["step_states"] == {}
    l4 = leader(net, store, 4)
    ((d, state),) = l4.recover(store, 4, held(net), lambda r: True)
    assert d.action == ROLLBACK and "commit point not reached" in d.reason and state == ROLLED_BACK
    assert d.applied == {"x0", "x1"} and net.all_xcons() == set() and net.tables["A"] == {}
    r = store.row(row)
    assert r["state"] == ROLLED_BACK and r["claimed_epoch"] == 4 and r["claim_done"] and r["finished_at"]
    changes = len(net.changes)
    assert l4.recover(store, 4, held(net), lambda r: True) == []  # a second pass does nothing
    assert leader(net, store, 5).recover(store, 5, held(net), lambda r: True) == []  # a third leader: done
    assert len(net.changes) == changes and store.row(row)["claimed_epoch"] == 4


def test_a_plan_past_its_commit_point_is_finished(net, store):
    row = die_mid_plan(net, store, plan(commit=True), budget=3)  # every XCON, not the rule
    ((d, state),) = leader(net, store, 4).recover(store, 4, held(net), lambda r: True)
    assert d.action == FINISH and [s.id for s in d.plan.steps] == ["rule"] and state == DONE
    assert net.all_xcons() == set(BYPASS) and list(net.tables["A"].values()) == [RULE]
    assert store.row(row)["state"] == DONE


def test_finishing_needs_the_owner_and_the_switches_to_agree(net, store):
    """Past the commit point, but the owner no longer wants it, or a recorded XCON is gone: rolled back."""
    die_mid_plan(net, store, plan(commit=True), budget=3)
    ((d, _),) = leader(net, store, 4).recover(store, 4, held(net), lambda r: False)
    assert d.action == ROLLBACK and "no longer wants" in d.reason and net.all_xcons() == set()
    die_mid_plan(net, store, plan(commit=True, pid="p2"), budget=3, epoch=5)
    net.remove_xcon(BYPASS[1])  # someone took Y's XCON down since
    ((d, state),) = leader(net, store, 6).recover(store, 6, held(net), lambda r: True)
    assert d.action == ROLLBACK and "not on the switches" in d.reason and state == ROLLED_BACK
    assert net.all_xcons() == set()


def test_a_record_of_the_current_epoch_is_left_alone(net, store):
    row = die_mid_plan(net, store, plan(commit=False), budget=2, epoch=4)
    assert leader(net, store, 4).recover(store, 4, held(net), lambda r: True) == []
    assert store.row(row)["state"] == RUNNING and len(net.all_xcons()) == 2


def test_an_unfinished_claim_is_taken_by_a_newer_leader_only(net, store):
    """Leader 4 claimed the record and died before completing it: leader 4 again no, leader 5 yes."""
    row = die_mid_plan(net, store, plan(commit=False), budget=2)
    assert store.claim(row, 4) and not store.claim(row, 4) and not store.claim(row, 3)
    assert store.unfinished(4) == []
    ((d, state),) = leader(net, store, 5).recover(store, 5, held(net), lambda r: True)
    assert d.action == ROLLBACK and state == ROLLED_BACK and store.row(row)["claimed_epoch"] == 5


def test_reservation_and_te_plans_are_left_to_their_owners(net, store):
    with pytest.raises(Died):
        leader(net, store, 3, Dying(net, 2)).run(plan(commit=False), "reservation:5", "reservations")
    ((d, state),) = leader(net, store, 4).recover(store, 4, held(net), lambda r: True)
    assert d.action == OWNER and d.plan is None and state == FAILED
    assert len(net.all_xcons()) == 2  # the reservations app re-adopts or releases them itself
    assert store.unfinished(5) == []


def test_a_single_controller_records_nothing_while_it_runs(net, store):
    r = leader(net, store, None)
    assert r.run(plan(commit=False), "plan:p1", "api").state == DONE
    with pytest.raises(Died):
        leader(net, store, None, Dying(net, 1)).run(plan(commit=False, pid="p2"), "plan:p2", "api")
    with store.db.session() as s:
        assert s.execute(text("SELECT count(*) FROM plans")).scalar() == 0


def test_a_finished_plan_keeps_its_record_and_a_reservation_plan_drops_it(net, store):
    assert leader(net, store, 3).run(plan(commit=False), "plan:p1", "api").state == DONE
    assert store.unfinished(9) == []
    leader(net, store, 3).run(Plan(plan(commit=False).undo(["x0", "x1", "x2", "rule"]).steps, "release", id="p3"),
                              "reservation:5", "reservations")
    with store.db.session() as s:
        rows = s.execute(text("SELECT uid, state, epoch FROM plans")).all()
    assert [tuple(r) for r in rows] == [("p1", DONE, 3)]


def test_claimable_and_unread_switches_roll_back():
    rec = Unfinished(1, plan(commit=True).to_json(), 3, "api", "plan:p1", {"x0": "done"})
    assert claimable(rec, 4) and not claimable(rec, 3) and not claimable(rec, 2)
    assert not claimable(Unfinished(1, rec.plan, 3, "api", claimed_epoch=4), 4)
    assert claimable(Unfinished(1, rec.plan, 3, "api", claimed_epoch=4), 5)
    assert not claimable(Unfinished(1, rec.plan, 3, "api", claimed_epoch=4, claim_done=True), 5)
    d = decide(rec, Held(xcons={"X": {1: 2}}), lambda r: True)  # Y, Z and A not read back
    assert d.action == ROLLBACK and "not read back" in d.reason
    assert {s.xcon.ots for s in d.plan.steps if isinstance(s, XconStep)} == {"X", "Y", "Z"}


def test_migration_0009_up_and_down(tmp_path):
    """0009 adds the running-record columns and makes finished_at optional; down drops running rows."""
    from alembic import command
    from sqlalchemy import inspect

    from app.db import migrate

    db = open_migrated(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        cols = {c["name"]: c for c in inspect(db.engine).get_columns("plans")}
        assert {"uid", "epoch", "source", "owner", "body", "step_states", "claimed_epoch", "claim_done"} <= set(cols)
        assert cols["finished_at"]["nullable"]
        PlanRecords(db).start(plan(commit=False).to_json(), epoch=3, source="api", owner="plan:p1", started_at=1.0)
        cfg = migrate.config()
        with migrate.migration_lock(db.engine) as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0008")
        assert migrate.current(db.engine) == "0008"
        assert "uid" not in {c["name"] for c in inspect(db.engine).get_columns("plans")}
        with db.session() as s:
            assert s.execute(text("SELECT count(*) FROM plans")).scalar() == 0
        assert migrate.upgrade(db.engine) == migrate.head()
    finally:
        db.engine.dispose()


def test_an_unreadable_record_is_closed_not_replayed():
    d = decide(Unfinished(7, {"id": "p9", "steps": [{"tag": "nonsense"}]}, 3, "api"), Held(), lambda r: True)
    assert d.action == OWNER and d.plan is None and "unreadable" in d.reason
