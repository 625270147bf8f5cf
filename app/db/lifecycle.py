"""State changes of a reservation, written the same way by the web service and the controller's store.

Every change goes through :func:`transition`: checked against :data:`app.db.states.TRANSITIONS`,
recorded in ``audit_log`` (who, from, to, why) and as an ``events`` row (``reservation.<state>``).
:func:`advance` applies the changes that time alone causes. Callers run these inside a transaction
that holds the write lock (:meth:`app.db.engine.Database.lock_for_write`).
"""
from __future__ import annotations

import time
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from app.db.models import AuditEntry, Event, Reservation
from app.db.states import (
    ACTIVE,
    CANCELLED,
    DEGRADED,
    FAILED,
    FINISHED,
    HELD,
    PROVISIONING,
    RESERVED,
    RESTORING,
    check_transition,
)

HOLD_EXPIRED = "hold expired"
START_REACHED = "start time reached; waiting for the controller to light it"
END_REACHED = "end time reached"
#: states that end when the window ends
_RUNNING = (RESERVED, PROVISIONING, ACTIVE, RESTORING, DEGRADED)


def audit(session: Session, user_id: int | None, action: str, res: Reservation, **detail: Any) -> None:
    """One ``audit_log`` row about ``res`` (``user_id`` None: the system or the controller)."""
    session.add(AuditEntry(ts=time.time(), user_id=user_id, action=action, entity="reservation",
                           entity_id=res.id, detail=detail))


def transition(session: Session, user_id: int | None, res: Reservation, target: str, reason: str,
               now: float, **detail: Any) -> str:
    """Move ``res`` to ``target`` (raises :class:`app.db.states.IllegalTransition` if not allowed);
    writes the audit entry and the event. Returns the previous state."""
    check_transition(res.state, target)
    old = res.state
    res.state = target
    res.state_reason = reason
    res.updated_ts = now
    if target != HELD:
        res.hold_expires_ts = None
    session.flush()
    audit(session, user_id, "transition", res, **{"from": old, "to": target, "reason": reason, **detail})
    session.add(Event(ts=now, kind=f"reservation.{target.lower()}",
                      severity="error" if target == FAILED else "warning" if target in (RESTORING, DEGRADED) else "info",
                      message=f"reservation {res.id} ({res.name}) {old} → {target}: {reason}",
                      detail={"reservation": res.id}))
    return old


def due_condition(now: float) -> ColumnElement[bool]:
    """Reservations for which :func:`advance` has something to do at ``now``."""
    return or_(
        and_(Reservation.state == HELD, Reservation.hold_expires_ts <= now),
        and_(Reservation.state.in_(_RUNNING), Reservation.end_ts <= now),
        and_(Reservation.state == RESERVED, Reservation.start_ts <= now),
    )


def advance(session: Session, now: float) -> int:
    """Time-driven transitions: expire holds, move started windows to PROVISIONING and ended ones
    (RESERVED, PROVISIONING, ACTIVE, RESTORING, DEGRADED) to FINISHED. Returns how many changed."""
    changed = 0
    for res in list(session.execute(select(Reservation).where(due_condition(now))
                                    .order_by(Reservation.id)).scalars()):
        if res.state == HELD:
            transition(session, None, res, CANCELLED, HOLD_EXPIRED, now)
        elif res.end_ts <= now:
            transition(session, None, res, FINISHED, END_REACHED, now)
        else:
            transition(session, None, res, PROVISIONING, START_REACHED, now)
        changed += 1
    return changed
