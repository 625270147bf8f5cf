"""``/api/v1/topology`` (both layers) and ``/api/v1/circuits`` (what the controller set up)."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.web.api import serialize
from app.web.auth import require_user
from app.web.context import graph, read_session
from app.web.errors import ApiError
from app.web.models import Circuit

bp = Blueprint("api_network", __name__)

PACKET_NODES = ("packet", "host")
OPTICAL_NODES = ("optical", "oport")
PACKET_EDGES = ("packet", "access")
OPTICAL_EDGES = ("optical", "xcon")


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
    return jsonify({"graph": data, "layers": layers(data)})


@bp.get("/circuits")
def circuits():  # noqa: ANN201
    db = read_session()
    require_user(db, allow_session=True)
    for key in request.args:
        if key != "state":
            raise ApiError(f"unknown query parameter {key!r}", field=key)
    stmt = select(Circuit).options(selectinload(Circuit.xcons)).order_by(Circuit.id)
    if "state" in request.args:
        stmt = stmt.where(Circuit.state == request.args["state"])
    return jsonify({"items": [serialize.circuit(c) for c in db.execute(stmt).scalars()]})
