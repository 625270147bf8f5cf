"""The reservation list query shared by ``GET /api/v1/reservations`` and the UI's list page.

One function so the two cannot drift apart: ``endpoint=A`` matches every port of switch ``A``,
``endpoint=A:1`` exactly port 1 (not ``A:10``); the time range keeps reservations whose window
overlaps ``[from, to)``; users see their own reservations, admins everybody's.
"""
from __future__ import annotations

from sqlalchemy import Select, func, or_, select
from sqlalchemy.orm import Session, selectinload

from app.db.models import AuditEntry, Reservation, User
from app.web.validation import ListQuery


def reservations_query(user: User, q: ListQuery) -> Select[tuple[Reservation]]:
    """The filtered (not yet paginated) select for ``q`` as seen by ``user``."""
    stmt = select(Reservation).options(selectinload(Reservation.owner))
    if not user.is_admin:
        stmt = stmt.where(Reservation.owner_id == user.id)
    if q.states:
        stmt = stmt.where(Reservation.state.in_(q.states))
    if q.endpoint:
        ep = q.endpoint
        if ":" in ep:
            stmt = stmt.where(or_(Reservation.src == ep, Reservation.dst == ep))
        else:
            stmt = stmt.where(or_(Reservation.src.startswith(ep + ":", autoescape=True),
                                  Reservation.dst.startswith(ep + ":", autoescape=True)))
    if q.time_from is not None:
        stmt = stmt.where(Reservation.end_ts > q.time_from)
    if q.time_to is not None:
        stmt = stmt.where(Reservation.start_ts < q.time_to)
    if q.min_bandwidth is not None:
        stmt = stmt.where(Reservation.bandwidth >= q.min_bandwidth)
    if q.max_bandwidth is not None:
        stmt = stmt.where(Reservation.bandwidth <= q.max_bandwidth)
    return stmt


def list_page(db: Session, user: User, q: ListQuery) -> tuple[list[Reservation], int]:
    """One page (newest first) and the total number of matches."""
    stmt = reservations_query(user, q)
    total = db.execute(select(func.count()).select_from(stmt.subquery())).scalar_one()
    rows = list(db.execute(stmt.order_by(Reservation.id.desc()).limit(q.limit).offset(q.offset)).scalars())
    return rows, total


def history(db: Session, res_id: int) -> list[AuditEntry]:
    """The audit log of one reservation, oldest first."""
    return list(db.execute(select(AuditEntry).where(AuditEntry.entity == "reservation",
                                                    AuditEntry.entity_id == res_id)
                           .order_by(AuditEntry.id)).scalars())
