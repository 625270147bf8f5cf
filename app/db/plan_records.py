"""Running plan records in the shared ``plans`` table (issue 24 takeover; migration 0009).

The leader's plan runner writes a row when a plan starts (``running``, its epoch, who asked, the plan),
each step's state as it completes, and the outcome; a new leader lists the rows still running under an
older epoch (:meth:`PlanRecords.unfinished`), claims one (:meth:`claim`: a conditional UPDATE, so two
leaders never both take it) and marks the claim done with the recovery's outcome (:meth:`complete`).
Every method is one transaction; run through the controller's writer they are fenced by the epoch
(a deposed leader's write fails with :class:`app.db.fencing.StaleEpoch`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import or_, select, update

from app.db.engine import Database
from app.db.models import Plan
from app.update.recovery import RUNNING, Unfinished, claimable


class PlanRecords:
    """The plan runner's rows of the ``plans`` table (those with a ``uid``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def start(self, plan: Mapping[str, Any], *, epoch: int | None, source: str, owner: str, started_at: float,
              reservation_id: int | None = None) -> int:
        """A plan starts: its running row (``plan``: :meth:`app.update.plan.Plan.to_json`)."""
        with self.db.session() as s, s.begin():
            row = Plan(kind=str(plan["kind"])[:32], mode=str(plan["mode"]), reservation_id=reservation_id,
                       state=RUNNING, started_at=started_at, finished_at=None, steps=[], uid=str(plan["id"]),
                       epoch=epoch, source=source[:32], owner=owner[:128], body=dict(plan), step_states={})
            s.add(row)
            s.flush()
            return row.id

    def step(self, uid: str, step_id: str, state: str) -> bool:
        """A step completed (``done``) or failed (``failed``); False if the row is not running."""
        with self.db.session() as s, s.begin():
            row = s.execute(select(Plan).where(Plan.uid == uid).with_for_update()).scalar_one_or_none()
            if row is None or row.state != RUNNING:
                return False
            row.step_states = {**(row.step_states or {}), step_id: state}
            return True

    def finish(self, uid: str, record: Mapping[str, Any], *, keep: bool = True) -> bool:
        """The plan ended (``record``: :meth:`app.update.executor.PlanRecord.to_json`); ``keep`` False
        drops the row (its owner keeps the plan itself, as the reservations do). False if unknown."""
        with self.db.session() as s, s.begin():
            row = s.execute(select(Plan).where(Plan.uid == uid).with_for_update()).scalar_one_or_none()
            if row is None:
                return False
            if not keep:
                s.delete(row)
                return True
            row.state, row.error = str(record["state"]), (record.get("error") or None)
            row.finished_at = record.get("finished_at")
            row.steps = [{k: st.get(k) for k in ("id", "kind", "target", "deps", "started_at", "finished_at",
                                                 "ok", "error")} for st in record.get("steps", ())]
            return True

    def unfinished(self, epoch: int) -> list[Unfinished]:
        """The running rows the leader of ``epoch`` may take (run under an older epoch, not claimed by
        this or a newer one, claim not completed), oldest first."""
        with self.db.session() as s:
            rows = s.execute(select(Plan).where(Plan.state == RUNNING, Plan.uid.is_not(None),
                                                Plan.claim_done.is_(False)).order_by(Plan.id)).scalars()
            out = [_unfinished(r) for r in rows]
        return [u for u in out if claimable(u, epoch)]

    def claim(self, row_id: int, epoch: int) -> bool:
        """Take row ``row_id`` for the leader of ``epoch``; False if another leader has it (exactly once)."""
        with self.db.session() as s, s.begin():
            res = s.execute(update(Plan).where(
                Plan.id == row_id, Plan.state == RUNNING, Plan.claim_done.is_(False),
                or_(Plan.epoch.is_(None), Plan.epoch < epoch),
                or_(Plan.claimed_epoch.is_(None), Plan.claimed_epoch < epoch)).values(claimed_epoch=epoch))
            return bool(getattr(res, "rowcount", 0))

    def complete(self, row_id: int, epoch: int, state: str, error: str, finished_at: float) -> bool:
        """The claim of ``epoch`` on ``row_id`` is done: the row ends ``state`` (done, rolled_back, failed)."""
        with self.db.session() as s, s.begin():
            res = s.execute(update(Plan).where(Plan.id == row_id, Plan.claimed_epoch == epoch,
                                               Plan.claim_done.is_(False))
                            .values(claim_done=True, state=state, error=error or None, finished_at=finished_at))
            return bool(getattr(res, "rowcount", 0))

    def row(self, row_id: int) -> dict[str, Any] | None:
        """One row as plain data (tests, ``mlte plans``)."""
        with self.db.session() as s:
            r = s.get(Plan, row_id)
            if r is None:
                return None
            return {"id": r.id, "uid": r.uid, "state": r.state, "epoch": r.epoch, "source": r.source,
                    "owner": r.owner, "step_states": dict(r.step_states or {}), "claimed_epoch": r.claimed_epoch,
                    "claim_done": r.claim_done, "error": r.error, "finished_at": r.finished_at}


def _unfinished(r: Plan) -> Unfinished:
    return Unfinished(r.id, dict(r.body or {}), r.epoch, r.source or "", r.owner or "", dict(r.step_states or {}),
                      r.claimed_epoch, bool(r.claim_done))
