"""``/api/v1/topology`` (both layers), ``/api/v1/circuits`` and ``/api/v1/plans`` (what the controller
set up, and the update plans it executed)."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.db.models import Circuit, Plan, Reservation
from app.db.provisioning import INSTALLED, RELEASED
from app.web.api import serialize
from app.web.api.reservations import MAX_ID, load_reservation
from app.web.auth import require_user
from app.web.context import graph, now, read_session, state
from app.web.errors import ApiError
from app.web.sharing import circuit_sharing, live_circuits

bp = Blueprint("api_network", __name__)

PACKET_NODES = ("packet", "host")
OPTICAL_NODES = ("optical", "oport")
PACKET_EDGES = ("packet", "access")
OPTICAL_EDGES = ("optical", "xcon")
#: ``Circuit.state`` values the controller records: the ``?state=`` filter of /circuits takes these only
CIRCUIT_STATES = (INSTALLED, RELEASED)


def layers(data: dict[str, Any]) -> dict[str, Any]:
    """Split node-link JSON into the packet layer, the optical layer and the adaptation links between them."""
    out: dict[str, Any] = {"packet": {"nodes": [], "links": []}, "optical": {"nodes": [], "links": []},
                           "adaptation": {"links": []}}
    for n in data.get("nodes", []):
        layer = "optical" if n.get("kind") in OPTICAL_NODES else "packet"
        out[layer]["nodes"].append(n["id"])
    for e in data.get("links", []):
        kind = e.get("kind")
        layer = "optical" if kind in OPTICAL_EDGES else "adaptation" if kind == "adaptation" else "packet"
        out[layer]["links"].append(e.get("key"))
    return out


@bp.get("/topology")
def topology():  # noqa: ANN201
    """The multi-layer graph (node-link JSON, docs/graph-model.md) plus its split into layers."""
    db = read_session()
    require_user(db, allow_session=True)
    if request.args:
        raise ApiError(f"unknown query parameter {next(iter(request.args))!r}", field=next(iter(request.args)))
    data = graph(db).to_dict()
    return jsonify({"graph": data, "layers": layers(data), "source": state().topology.describe(db, now())})


@bp.get("/circuits")
def circuits():  # noqa: ANN201
    db = read_session()
    require_user(db, allow_session=True)
    for key in request.args:
        if key != "state":
            raise ApiError(f"unknown query parameter {key!r}", field=key)
    stmt = select(Circuit).options(selectinload(Circuit.xcons)).order_by(Circuit.id)
    if "state" in request.args:
        wanted = request.args["state"]
        if wanted not in CIRCUIT_STATES:  # a typo must not look like "no circuits"
            raise ApiError(f"state must be one of {', '.join(CIRCUIT_STATES)}, got {wanted[:40]!r}", field="state")
        stmt = stmt.where(Circuit.state == wanted)
    return jsonify({"items": [serialize.circuit(c) for c in db.execute(stmt).scalars()]})


@bp.get("/circuits/sharing")
def circuits_sharing():  # noqa: ANN201
    """Per lit circuit, the reservations riding it and what is free on it (grooming; app/web/sharing.py)."""
    db = read_session()
    user = require_user(db, allow_session=True)
    if request.args:
        raise ApiError(f"unknown query parameter {next(iter(request.args))!r}", field=next(iter(request.args)))
    return jsonify({"items": circuit_sharing(live_circuits(db), user)})


def _int_arg(name: str, lo: int, hi: int, default: int | None = None) -> int | None:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or not lo <= int(raw) <= hi:
        raise ApiError(f"{name} must be an integer in {lo}..{hi}", field=name)
    return int(raw)


@bp.get("/plans")
def plans():  # noqa: ANN201
    """Update plans the controller executed, newest first: of one reservation (``reservation``), or all
    the caller may see (admins: every plan; users: those of their own reservations)."""
    db = read_session()
    user = require_user(db, allow_session=True)
    for key in request.args:
        if key not in ("reservation", "limit"):
            raise ApiError(f"unknown query parameter {key!r}", field=key)
    res_id = _int_arg("reservation", 1, MAX_ID)
    limit = _int_arg("limit", 1, 500, 50)
    stmt = select(Plan).order_by(Plan.id.desc()).limit(limit)
    if res_id is not None:
        load_reservation(db, res_id, user)
        stmt = stmt.where(Plan.reservation_id == res_id)
    elif not user.is_admin:
        stmt = stmt.where(Plan.reservation_id.in_(select(Reservation.id).where(Reservation.owner_id == user.id)))
    return jsonify({"items": [serialize.plan(p) for p in db.execute(stmt).scalars()]})
