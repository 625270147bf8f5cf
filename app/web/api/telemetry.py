"""``/api/v1/utilization`` (per-circuit series of the controller's monitor, ``mon_samples``) and
``/api/v1/events`` (service events merged with the monitor's ``mon_events``)."""
from __future__ import annotations

from flask import Blueprint, jsonify, request

from app.web import monitor_read
from app.web.api import serialize
from app.web.auth import require_user
from app.web.context import now, read_session
from app.web.errors import ApiError
from app.web.timeutil import to_iso
from app.web.validation import check_time

bp = Blueprint("api_telemetry", __name__)


def _limit(default: int, hi: int) -> int:
    raw = request.args.get("limit")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError("limit must be an integer", field="limit") from None
    if not 1 <= value <= hi:
        raise ApiError(f"limit must be in 1..{hi}", field="limit")
    return value


def _only(allowed: set[str]) -> None:
    for key in request.args:
        if key not in allowed:
            raise ApiError(f"unknown query parameter {key!r}", field=key)


@bp.get("/utilization")
def utilization():  # noqa: ANN201
    """Samples per monitored link since ``since`` (default: the last 5 minutes); ``link`` may repeat."""
    db = read_session()
    require_user(db, allow_session=True)
    _only({"link", "since", "limit"})
    since = check_time(request.args["since"], "since") if "since" in request.args else now() - 300
    links = request.args.getlist("link")
    for link in links:
        if not 1 <= len(link) <= 128:
            raise ApiError("link must be an edge key of 1..128 characters", field="link")
    limit = _limit(2000, 20000)
    rows = monitor_read.utilization(db, since, links, limit)
    series: dict[str, list[dict]] = {link: [] for link in links}
    for link, points in rows.items():
        series[link] = [{"time": to_iso(t), "mbps": mbps, "utilization": util} for t, mbps, util in points]
    return jsonify({"since": to_iso(since), "series": series})


@bp.get("/events")
def events():  # noqa: ANN201
    db = read_session()
    require_user(db, allow_session=True)
    _only({"since", "kind", "limit"})
    since = check_time(request.args["since"], "since") if "since" in request.args else None
    rows = monitor_read.merged_events(db, since, request.args.get("kind"), _limit(100, 1000))
    return jsonify({"items": [serialize.event(e) for e in rows]})


@bp.get("/me")
def me():  # noqa: ANN201
    user = require_user(read_session(), allow_session=True)
    if request.args:
        raise ApiError(f"unknown query parameter {next(iter(request.args))!r}", field=next(iter(request.args)))
    return jsonify({"id": user.id, "name": user.name, "admin": user.is_admin})
