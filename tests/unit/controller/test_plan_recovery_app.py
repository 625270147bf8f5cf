"""The plan takeover's live side (app/controller/plan_recovery_app.py): the runner's records go through the
controller's fenced writer, a new leader recovers through it, the deposed leader's writes are refused;
read-back rules become FlowRules."""
from __future__ import annotations

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
