"""Reservation operations shared by the REST API and the web UI.

Each function runs inside the caller's transaction, which must hold the admission lock for anything
that books capacity; it validates first and raises :class:`ApiError` before writing anything.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from app.db import lifecycle
from app.db.models import Reservation, User
from app.db.states import (
    CANCELLED,
    FAILED,
    HELD,
    MODIFIABLE_STATES,
    PINNED_PATH_STATES,
    RESERVED,
    IllegalTransition,
)
from app.web import admission
from app.web.errors import ApiError, Conflict
from app.web.timeutil import to_iso
from app.web.topology_source import check_endpoint_in_graph
from app.web.validation import ReservationInput

if TYPE_CHECKING:
    from topology.graph import MultiLayerGraph


def audit(db: Session, user: User | None, action: str, res: Reservation, **detail: Any) -> None:
    lifecycle.audit(db, None if user is None else user.id, action, res, **detail)


def transition(db: Session, user: User | None, res: Reservation, target: str, reason: str, now: float) -> None:
    """Move ``res`` to ``target`` through the checked table; raise Conflict (409) if illegal."""
    try:
        lifecycle.transition(db, None if user is None else user.id, res, target, reason, now)
    except IllegalTransition as exc:
        raise Conflict(str(exc), field="state", state=res.state) from None


def create(db: Session, graph: MultiLayerGraph, user: User, inp: ReservationInput, now: float,
           hold_seconds: float, groom: bool = False) -> Reservation:
    """Admit and store a new reservation in state HELD (``groom``: it may ride circuits others booked)."""
    check_endpoint_in_graph(graph, inp.src, "src")
    check_endpoint_in_graph(graph, inp.dst, "dst")
    if inp.src.split(":")[0] == inp.dst.split(":")[0]:
        raise ApiError("src and dst are on the same switch: a local connection needs no network path",
                       field="dst")
    result = admission.find_path(graph, db, src=inp.src, dst=inp.dst, bandwidth=inp.bandwidth,
                                 start=inp.start, end=inp.end, now=now, ero=inp.ero, protection=inp.protection,
                                 groom=groom, vlan=admission.circuit_tag(inp.src_vlan, inp.dst_vlan))
    path = admission.path_to_json(result)
    res = Reservation(name=inp.name, description=inp.description, src=inp.src, src_vlan=inp.src_vlan,
                      dst=inp.dst, dst_vlan=inp.dst_vlan, bandwidth=inp.bandwidth, start_ts=inp.start,
                      end_ts=inp.end, mode=inp.mode, protection=inp.protection, state=HELD,
                      state_reason="held; commit before it expires", ero=inp.ero, path=path, owner_id=user.id,
                      hold_expires_ts=now + hold_seconds, created_ts=now, updated_ts=now)
    db.add(res)
    db.flush()
    pair = {"protection_path": path["protection"]["nodes"]} if "protection" in path else {}
    audit(db, user, "create", res, bandwidth=inp.bandwidth, src=inp.src, dst=inp.dst,
          start=to_iso(inp.start), end=to_iso(inp.end), path=path["nodes"], **pair)
    return res


def commit(db: Session, user: User, res: Reservation, now: float) -> None:
    """HELD → RESERVED, refused (409, nothing written) once the hold expired or the window ended:
    committing an ended window would book nothing and jump straight to FINISHED."""
    expired = res.state == CANCELLED and res.state_reason == lifecycle.HOLD_EXPIRED
    if expired or (res.state == HELD and res.hold_expires_ts is not None and res.hold_expires_ts <= now):
        raise Conflict(f"the hold of reservation {res.id} expired; create it again", field="state",
                       state="EXPIRED")
    if res.state == HELD and res.end_ts <= now:
        raise Conflict(f"the window of reservation {res.id} ended at {to_iso(res.end_ts)}; there is nothing "
                       "left to commit: create a reservation for a future window", field="end", state="ENDED")
    transition(db, user, res, RESERVED, "committed", now)


def cancel(db: Session, user: User, res: Reservation, now: float) -> None:
    transition(db, user, res, CANCELLED, f"cancelled by {user.name}", now)


def fail(db: Session, user: User, res: Reservation, reason: str, now: float) -> None:
    transition(db, user, res, FAILED, reason, now)


def modify(db: Session, graph: MultiLayerGraph, user: User, res: Reservation, bandwidth: float | None,
           end: float | None, now: float, groom: bool = False) -> None:
    """Change bandwidth and/or end; the new values are re-admitted against everybody else's bookings.

    A RESERVED, PROVISIONING or ACTIVE reservation keeps its path (:data:`PINNED_PATH_STATES`): the change is checked
    on exactly its recorded edges and optical ports and refused, naming the bottleneck, if it no longer
    fits there. A HELD one is re-routed like a new request (the new path is shown before commit).
    """
    if res.state not in MODIFIABLE_STATES:
        raise Conflict(f"a {res.state} reservation cannot be modified", field="state", state=res.state)
    if res.state == HELD and res.hold_expires_ts is not None and res.hold_expires_ts <= now:
        raise Conflict(f"the hold of reservation {res.id} expired", field="state", state="EXPIRED")
    new_bw = res.bandwidth if bandwidth is None else bandwidth
    new_end = res.end_ts if end is None else end
    if res.state in PINNED_PATH_STATES and res.path:
        result = admission.check_on_path(graph, db, path=res.path, bandwidth=new_bw, start=res.start_ts,
                                         end=new_end, now=now, exclude_id=res.id,
                                         field="bandwidth" if bandwidth is not None else "end",
                                         what=f"a committed ({res.state}) reservation keeps its path",
                                         vlan=admission.circuit_tag(res.src_vlan, res.dst_vlan))
        kept = {"protection": res.path["protection"]} if res.path.get("protection") else {}  # checked with it
        path = {**admission.path_to_json(result), **kept}
    else:
        result_or_pair = admission.find_path(graph, db, src=res.src, dst=res.dst, bandwidth=new_bw,
                                             start=res.start_ts, end=new_end, now=now, ero=res.ero,
                                             exclude_id=res.id, protection=res.protection or "none",
                                             groom=groom, vlan=admission.circuit_tag(res.src_vlan, res.dst_vlan))
        path = admission.path_to_json(result_or_pair)
    old = {"bandwidth": res.bandwidth, "end": to_iso(res.end_ts)}
    res.bandwidth, res.end_ts = new_bw, new_end
    res.path = path
    res.updated_ts = now
    db.flush()
    audit(db, user, "modify", res, old=old, new={"bandwidth": new_bw, "end": to_iso(new_end)})


def advance(db: Session, now: float) -> int:
    """Time-driven transitions (expired holds, started and ended windows); see :func:`app.db.lifecycle.advance`."""
    return lifecycle.advance(db, now)
