"""Admission control: a reservation is accepted only if pce/ finds a path with enough headroom.

Capacity already booked by overlapping reservations (HELD and not expired, RESERVED, PROVISIONING,
ACTIVE) is passed to :func:`pce.reservation.compute_path` as :class:`pce.reservation.Booking`
objects, so in any instant of any window the booked bandwidth never exceeds capacity or granularity rules. Callers must
run this inside a transaction holding the admission lock (:meth:`app.db.engine.Database.lock_for_write`)
and write the reservation in the same transaction, or two racing requests could both pass.
"""
from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from app.db.models import Reservation
from app.db.states import BOOKING_STATES, HELD
from app.web.errors import ApiError, Conflict

if TYPE_CHECKING:
    from pce.protection import ProtectedPath
    from pce.reservation import Booking, PathResult
    from topology.graph import MultiLayerGraph


def overlapping(session: Session, start: float, end: float, now: float,
                exclude_id: int | None = None) -> list[Reservation]:
    """Reservations that hold capacity somewhere in ``[start, end)``."""
    stmt = select(Reservation).where(
        Reservation.state.in_(BOOKING_STATES),
        Reservation.start_ts < end,
        Reservation.end_ts > start,
        or_(Reservation.state != HELD, and_(Reservation.hold_expires_ts.is_not(None),
                                            Reservation.hold_expires_ts > now)),
    )
    if exclude_id is not None:
        stmt = stmt.where(Reservation.id != exclude_id)
    return list(session.execute(stmt).scalars())


def to_booking(res: Reservation) -> Booking:
    from pce.reservation import Booking

    path = res.path or {}
    return Booking(id=str(res.id), start=res.start_ts, end=res.end_ts, bandwidth=res.bandwidth,
                   edges=tuple(dict.fromkeys(path_elements(path, "edges"))),
                   oports=tuple(dict.fromkeys(path_elements(path, "oports"))),
                   tag=circuit_tag(res.src_vlan, res.dst_vlan))


def circuit_tag(src_vlan: int | None, dst_vlan: int | None) -> int | None:
    """The VLAN that tells a reservation apart on a shared circuit (grooming): its VLAN when both ends
    have the same one (the controller does not translate VLANs), else None (it cannot share)."""
    return src_vlan if src_vlan is not None and src_vlan == dst_vlan else None


def path_elements(path: dict[str, Any], what: str) -> list[str]:
    """The ``edges`` or ``oports`` a stored path holds, its 1+1 protection path's included."""
    return [*path.get(what, ()), *(path.get("protection") or {}).get(what, ())]


def path_to_json(result: PathResult | ProtectedPath) -> dict[str, Any]:
    """A path as stored and served; a 1+1 pair is the working path with the protection path under
    ``"protection"``."""
    from pce.protection import ProtectedPath

    if isinstance(result, ProtectedPath):
        return {**path_to_json(result.working), "protection": path_to_json(result.protection)}
    data = asdict(result)
    data["xcons"] = [list(x) for x in data.get("xcons", [])]
    return data


def find_path(graph: MultiLayerGraph, session: Session, *, src: str, dst: str, bandwidth: float, start: float,
              end: float, now: float, ero: list[str] | None = None,
              exclude_id: int | None = None, protection: str = "none", groom: bool = False,
              vlan: int | None = None) -> PathResult | ProtectedPath:
    """Compute a path (``protection`` "1+1": a working and a fibre-disjoint protection path, both
    booked) for the request against current bookings; raise an :class:`ApiError` if none.

    ``groom``: the path may ride circuits other reservations booked for an overlapping window when
    they have room (the piecewise peak of their bookings leaves it), and lights a new circuit only
    when none has (docs/pce-paths.md, grooming); the result's ``circuits`` say which. 1+1 pairs are
    not groomed. ``vlan``: the request's :func:`circuit_tag` (sharers need distinct VLANs)."""
    from pce.errors import InvalidInputError, NoPathError, PceError, UnknownTopologyError
    from pce.protection import NoProtectionError, protected_paths
    from pce.reservation import PathRequest, compute_path

    bookings = [to_booking(r) for r in overlapping(session, start, end, now, exclude_id)]
    req = PathRequest(src=src, dst=dst, bandwidth=bandwidth, start=start, end=end,
                      ero=tuple(ero) if ero else None, groom=groom and protection != "1+1", tag=vlan)
    try:
        return protected_paths(graph, req, bookings) if protection == "1+1" else compute_path(graph, req, bookings)
    except NoPathError as exc:
        field = "protection" if isinstance(exc, NoProtectionError) else "ero" if ero else "bandwidth"
        raise Conflict(f"not admitted: {exc}", field=field,
                       bottleneck=exc.bottleneck, available=exc.available) from None
    except UnknownTopologyError as exc:
        raise ApiError(str(exc), field=_field_for(str(exc), src, dst, ero)) from None
    except InvalidInputError as exc:
        raise ApiError(str(exc), field=_field_for(str(exc), src, dst, ero)) from None
    except PceError as exc:
        raise Conflict(f"not admitted: {exc}", field="bandwidth") from None


def check_on_path(graph: MultiLayerGraph, session: Session, *, path: dict[str, Any], bandwidth: float,
                  start: float, end: float, now: float, exclude_id: int, field: str,
                  what: str, vlan: int | None = None) -> PathResult:
    """Re-admit a reservation on exactly its recorded ``path`` (edge keys incl. the endpoint access
    edges, and optical ports taken whole); raise a Conflict naming the bottleneck if it no longer fits.

    Used for live reservations, whose path must not move: the PCE would route around a conflict
    (an ERO of node ids would too, over parallel edges), so the headroom of each element is checked
    here, in the same view of the window's bookings the PCE routes on.
    """
    from pce.bookings import as_calendar
    from pce.cspf import RoutingView, fits
    from pce.grooming import booked_circuits, segments
    from pce.reservation import PathResult

    bookings = [to_booking(r) for r in overlapping(session, start, end, now, exclude_id)]
    cal = as_calendar(bookings)
    view = RoutingView.build(graph, cal.usage(start, end))
    # a circuit the path may share with other reservations (grooming: ``vlan`` is its circuit_tag, the
    # others' VLANs all different) is checked as one packet link of its container, not port by port
    shared = booked_circuits(graph, cal, start, end, view.headroom)
    elems: list[str] = []
    for seg in segments(graph, [*path_elements(path, "edges")]):
        if seg.key in shared and shared[seg.key].takes(vlan):
            c = shared[seg.key]
            elems.append(c.key)
            view.headroom[c.key] = c.free
            view.why[c.key] = f"shared circuit of {c.capacity:g} Mbit/s with {c.peak:g} booked at peak by " \
                              f"{', '.join(c.holders)}"
    ridden = {o for k in elems for o in shared[k].segment.oports}
    worst: str | None = None
    worst_free = math.inf
    for elem in dict.fromkeys([*path_elements(path, "edges"), *elems,
                               *(o for o in path_elements(path, "oports") if o not in ridden)]):
        if elem not in view.headroom:
            raise Conflict(f"not admitted: {elem} on the reservation's path is no longer in the topology "
                           f"({what})", field=field, bottleneck=elem, available=0.0)
        if view.headroom[elem] < worst_free:
            worst, worst_free = elem, view.headroom[elem]
    if worst is not None and not fits(worst_free, bandwidth):
        reason = view.why.get(worst)
        raise Conflict(f"not admitted: on its current path {worst} has {worst_free:g} Mbit/s available in "
                       f"the window{f' ({reason})' if reason else ''}, {bandwidth:g} asked ({what})",
                       field=field, bottleneck=worst, available=worst_free)
    return PathResult(nodes=list(path.get("nodes", ())), edges=list(path.get("edges", ())),
                      oports=list(path.get("oports", ())),
                      xcons=[(str(a), str(b)) for a, b in path.get("xcons", ())],
                      latency=float(path.get("latency", 0.0)), available=worst_free, bottleneck=worst,
                      hops=int(path.get("hops", 0)))


def _field_for(message: str, src: str, dst: str, ero: list[str] | None) -> str:
    """Best guess of the request field a PCE input error is about."""
    for field, value in (("src", src), ("dst", dst)):
        if value in message or value.split(":")[0] in message.split():
            return field
    if ero and any(hop in message for hop in ero):
        return "ero"
    return "bandwidth"


def available(graph: MultiLayerGraph, session: Session, *, src: str, dst: str, start: float, end: float,
              now: float, protection: str = "none", groom: bool = False) -> tuple[float, PathResult | ProtectedPath | None]:
    """What-if: the most bandwidth a new reservation could get between ``src`` and ``dst`` (with
    ``protection`` "1+1": on both paths of a disjoint pair; ``groom``: riding booked circuits too)."""
    from pce.errors import InvalidInputError, UnknownTopologyError
    from pce.protection import available_protected
    from pce.reservation import available_bandwidth

    bookings = [to_booking(r) for r in overlapping(session, start, end, now)]
    try:
        if protection == "1+1":
            return available_protected(graph, src, dst, start, end, bookings)
        return available_bandwidth(graph, src, dst, start, end, bookings, groom=groom)
    except (UnknownTopologyError, InvalidInputError) as exc:
        raise ApiError(str(exc), field=_field_for(str(exc), src, dst, None)) from None


def shared_circuits(graph: MultiLayerGraph, session: Session, *, start: float, end: float,
                    now: float) -> list[dict[str, Any]]:
    """Grooming: the circuits reservations booked for part of ``[start, end)``, each with its capacity,
    the peak booked on it in the window, what is free for a new reservation and who books it."""
    from pce.bookings import BookingCalendar
    from pce.grooming import booked_circuits

    cal = BookingCalendar(to_booking(r) for r in overlapping(session, start, end, now))
    out = [c.to_dict() for c in booked_circuits(graph, cal, start, end).values()]
    return sorted(out, key=lambda d: d["circuit"])
