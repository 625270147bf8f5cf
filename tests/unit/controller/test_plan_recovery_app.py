"""The plan takeover's live side (app/controller/plan_recovery_app.py): the runner's records go through the
controller's fenced writer, a new leader recovers through it, the deposed leader's writes are refused;
read-back rules become FlowRules."""
from __future__ import annotations

import time

import pytest

from app.controller.db_writer import DbWriter
from app.controller.plan_recovery_app import RESOURCE, WriterPlanStore, rule_of
from app.db.migrate import open_migrated
from app.db.plan_records import PlanRecords
from app.update.executor import ROLLED_BACK
from app.update.recovery import ROLLBACK, RUNNING
from tests.unit.controller.test_plan_recovery import (  # noqa: F401 - the fixture
    RULE,
    Died,
    Dying,
    held,
    leader,
    net,
    plan,
)


def writer_for(url: str, epoch: int) -> tuple[DbWriter, WriterPlanStore]:
    w = DbWriter(connect=lambda: open_migrated(url), retries=0).start()
    w.open(RESOURCE, PlanRecords)
    w.claim(epoch, f"leader{epoch}")
    return w, WriterPlanStore(w)


def test_recovery_through_fenced_writers(net, tmp_path):  # noqa: F811
    url = f"sqlite:///{tmp_path / 'mlte.db'}"
    w3, s3 = writer_for(url, 3)
    try:
        with pytest.raises(Died):
            leader(net, s3, 3, Dying(net, 2)).run(plan(commit=False), "plan:p1", "api")  # type: ignore[arg-type]
        assert w3.flush(5.0)
        w4, s4 = writer_for(url, 4)  # the new leader raises the stored epoch: leader 3 is fenced off
        try:
            ((d, state),) = leader(net, s4, 4).recover(s4, 4, held(net), lambda r: True)  # type: ignore[arg-type]
            assert d.action == ROLLBACK and state == ROLLED_BACK and net.all_xcons() == set()
            assert s4.unfinished(5) == []
            assert s3.start(plan(commit=False, pid="late").to_json(), epoch=3, source="api", owner="plan:x",
                            started_at=1.0) is None  # refused: the deposed leader records nothing
            assert w3.stats()["refused_writes"] >= 1
            rows = s4.writer.call(RESOURCE, lambda r: [r.row(i) for i in range(1, 4)])
            assert [(r["uid"], r["state"], r["claimed_epoch"]) for r in rows if r] == [("p1", ROLLED_BACK, 4)]
            assert all(r is None or r["state"] != RUNNING for r in rows)
        finally:
            w4.close()
    finally:
        w3.close()


def test_rule_of_reads_back_packet_rules_only():
    r = rule_of("A", RULE.cookie, RULE.priority, RULE.table, dict(RULE.match), (RULE.out_port,))
    assert r is not None and r.key() == RULE.key() and r.out_port == RULE.out_port
    assert rule_of("A", RULE.cookie, RULE.priority, RULE.table, dict(RULE.match), (3, 4)) is None  # two outputs
    assert rule_of("A", 0, 0, 0, {}, (1,)) is None  # no band (e.g. a table-miss rule)


def test_the_app_recovers_over_the_fake_flow_tables_once_the_switches_are_read_back(monkeypatch, tmp_path):
    """Fig. 2 as fake OpenFlow tables under the real southbound and view (tests/lib/offabric.py): leader 3
    dies after the XCONs of a plan; the app of leader 4, elected, reads the switches back and rolls back."""
    from types import SimpleNamespace

    from app.controller import events
    from app.controller import plan_recovery_app as pra
    from app.controller.plan_runner import PlanRunner
    from tests.lib.offabric import OFFabric
    from tests.unit.controller.test_openflow_fabric import Controller
    from topology.spec import fig2_testbed

    fabric = OFFabric(fig2_testbed())
    Controller(fabric, [])  # the OTS driver (XCONs), forwarding and LLDP of a running controller
    monkeypatch.setattr(pra, "hub", SimpleNamespace(spawn=lambda f, *a: f(*a), sleep=time.sleep))
    url = f"sqlite:///{tmp_path / 'mlte.db'}"
    w3, s3 = writer_for(url, 3)
    w4: DbWriter | None = None
    try:
        dead = PlanRunner(Dying(fabric.live(), 3), fabric.view)  # type: ignore[arg-type]
        dead.store, dead.epoch = s3, 3
        with pytest.raises(Died):
            dead.run(plan(commit=False), "plan:p1", "api")
        assert w3.flush(5.0)
        w4, s4 = writer_for(url, 4)
        xcons = {fabric.switch(o).name: dict(fabric.view.xcons.get(fabric.dpid(o), {})) for o in "XYZ"}
        assert xcons == {"X": {1: 2, 2: 1}, "Y": {1: 4, 4: 1}, "Z": {1: 2, 2: 1}}  # both directions
        app = pra.PlanRecoveryApp(**fabric.contexts(), mlte_plan_runner=PlanRunner(fabric.live(), fabric.view))
        app.store = s4
        due: list[float] = []
        app._due = SimpleNamespace(push=due.append, stop=lambda: None)  # type: ignore[assignment]
        app._mastership(events.EventMastership(True, 4, "elected"))
        assert app.runner.epoch == 4 and app.pending is not None and due
        app.last_enter = time.monotonic() - 60.0
        app._recover_due(pra.EventRecoverDue())
        assert app.pending is None
        assert not any(fabric.view.xcons.get(fabric.dpid(o)) for o in "XYZ")
        assert s4.unfinished(5) == [] and s4.writer.call(RESOURCE, lambda r: r.row(1))["state"] == ROLLED_BACK
        app._mastership(events.EventMastership(False, 4, "deposed"))
        assert app.runner.store is None and app.runner.epoch is None
    finally:
        if w4 is not None:
            w4.close()
        w3.close()
