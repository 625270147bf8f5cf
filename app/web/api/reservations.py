"""``/api/v1/reservations``: hold → commit → cancel, modify, get, list, history, and the what-if query."""
from __future__ import annotations

from flask import Blueprint, jsonify, request
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Reservation, Restoration, User
from app.web import admission, service
from app.web.api import serialize
from app.web.auth import check_owner, require_user
from app.web.context import advance_if_due, graph, json_body, now, read_session, state, write_tx
from app.web.errors import ApiError, Forbidden, NotFound
from app.web.listing import history, list_page
from app.web.timeutil import to_iso
from app.web.topology_source import check_endpoint_in_graph
from app.web.validation import (
    check_endpoint,
    check_protection,
    check_string,
    check_time,
    check_window,
    parse_create,
    parse_list,
    parse_modify,
)

bp = Blueprint("api_reservations", __name__)
MAX_ID = 2**31 - 1


def load_reservation(db: Session, res_id: int, user: User) -> Reservation:
    """The reservation if ``user`` may see it; 404 / 403 otherwise."""
    res = db.get(Reservation, res_id) if 0 < res_id <= MAX_ID else None
    if res is None:
        raise NotFound(f"no reservation {res_id}", field="id")
    check_owner(user, res)
    return res


@bp.post("/reservations")
def create_reservation():  # noqa: ANN201
    """Create a reservation in state HELD (admission-checked); commit it before the hold expires."""
    user = require_user(read_session())
    inp = parse_create(json_body(), now())
    with write_tx() as db:
        res = service.create(db, graph(db), user, inp, now(), state().hold_seconds, state().grooming)
        db.flush()
        body = serialize.reservation(res)
    resp = jsonify(body)
    resp.status_code = 201
    resp.headers["Location"] = f"/api/v1/reservations/{body['id']}"
    return resp


@bp.get("/reservations")
def list_reservations():  # noqa: ANN201
    """List with filters (state, endpoint, time range, bandwidth) and pagination; users see their own."""
    user = require_user(read_session(), allow_session=True)
    q = parse_list(request.args.to_dict())
    advance_if_due()
    rows, total = list_page(read_session(), user, q)
    return jsonify({"items": [serialize.reservation(r) for r in rows], "total": total,
                    "limit": q.limit, "offset": q.offset})


@bp.get("/reservations/<int:res_id>")
def get_reservation(res_id: int):  # noqa: ANN201
    """The reservation with its circuits (and XCONs) and packet rules, as the controller recorded them."""
    user = require_user(read_session(), allow_session=True)
    advance_if_due()
    return jsonify(serialize.reservation_detail(load_reservation(read_session(), res_id, user)))


@bp.get("/reservations/<int:res_id>/history")
def reservation_history(res_id: int):  # noqa: ANN201
    """The audit log of one reservation (every change, who made it)."""
    user = require_user(read_session(), allow_session=True)
    db = read_session()
    load_reservation(db, res_id, user)
    rows = history(db, res_id)
    return jsonify({"items": [serialize.audit(a) for a in rows]})


@bp.get("/reservations/<int:res_id>/restorations")
def reservation_restorations(res_id: int):  # noqa: ANN201
    """How the controller repaired this reservation after failures: cause, times, old → new path."""
    user = require_user(read_session(), allow_session=True)
    db = read_session()
    load_reservation(db, res_id, user)
    rows = db.execute(select(Restoration).where(Restoration.reservation_id == res_id)
                      .order_by(Restoration.id.desc())).scalars()
    return jsonify({"items": [serialize.restoration(r) for r in rows]})


def _mutate(res_id: int, action: str):  # noqa: ANN202
    user = require_user(read_session())
    body = None
    if action in ("modify", "fail"):
        body = json_body()
    elif request.get_data(cache=True).strip() not in (b"", b"{}"):
        raise ApiError(f"{action} takes no request body", field="body")
    with write_tx() as db:
        res = load_reservation(db, res_id, user)
        t = now()
        if action == "commit":
            service.commit(db, user, res, t)
        elif action == "cancel":
            service.cancel(db, user, res, t)
        elif action == "fail":
            if not user.is_admin:
                raise Forbidden("only admins (or the controller) mark reservations FAILED", field="Authorization")
            if not isinstance(body, dict) or set(body) - {"reason"}:
                raise ApiError("body must be {\"reason\": \"...\"}", field="reason")
            reason = check_string(body.get("reason", "network failure"), "reason", min_len=1, max_len=500)
            service.fail(db, user, res, reason, t)
        else:
            bandwidth, end = parse_modify(body, res.start_ts, t)
            service.modify(db, graph(db), user, res, bandwidth, end, t, groom=state().grooming)
        db.flush()
        out = serialize.reservation(res)
    return jsonify(out)


@bp.post("/reservations/<int:res_id>/commit")
def commit_reservation(res_id: int):  # noqa: ANN201
    """HELD → RESERVED (409 if the hold expired or the state does not allow it)."""
    return _mutate(res_id, "commit")


@bp.post("/reservations/<int:res_id>/cancel")
def cancel_reservation(res_id: int):  # noqa: ANN201
    return _mutate(res_id, "cancel")


@bp.post("/reservations/<int:res_id>/fail")
def fail_reservation(res_id: int):  # noqa: ANN201
    return _mutate(res_id, "fail")


@bp.patch("/reservations/<int:res_id>")
def modify_reservation(res_id: int):  # noqa: ANN201
    """Change bandwidth and/or end time; re-checked by admission control against all other bookings."""
    return _mutate(res_id, "modify")


@bp.get("/available")
def what_if():  # noqa: ANN201
    """The most bandwidth a new reservation between two ports could get over a window."""
    db = read_session()
    require_user(db, allow_session=True)
    args = request.args.to_dict()
    for key in args:
        if key not in ("src", "dst", "start", "end", "protection"):
            raise ApiError(f"unknown query parameter {key!r}", field=key)
    for key in ("src", "dst", "end"):
        if key not in args:
            raise ApiError(f"missing query parameter {key!r}", field=key)
    src = check_endpoint(args["src"], "src")
    dst = check_endpoint(args["dst"], "dst")
    if src == dst:
        raise ApiError("dst must differ from src", field="dst")
    protection = check_protection(args.get("protection", "none"))
    t = now()
    start = check_time(args["start"], "start") if "start" in args else t
    end = check_time(args["end"], "end")
    check_window(start, end, t)  # the same window rules as create: a what-if answers only a valid request
    g = graph(db)
    check_endpoint_in_graph(g, src, "src")
    check_endpoint_in_graph(g, dst, "dst")
    advance_if_due()
    groom = state().grooming
    bw, path = admission.available(g, db, src=src, dst=dst, start=start, end=end, now=t, protection=protection,
                                   groom=groom)
    extra = {"circuits": admission.shared_circuits(g, db, start=start, end=end, now=t)} if groom else {}
    return jsonify({"src": src, "dst": dst, "start": to_iso(start), "end": to_iso(end), "available": bw,
                    "path": None if path is None else admission.path_to_json(path), **extra})
