"""``/api/v1/utilization`` (per-circuit series of the controller's monitor, ``mon_samples``) and
``/api/v1/events`` (service events merged with the monitor's ``mon_events``)."""
from __future__ import annotations

import re

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


_CIRCUIT_LINK = re.compile(r"packet:([^:\s]+):\d+-([^:\s]+):\d+")


def _in_topology(db, link: str) -> bool:  # noqa: ANN001
    """Whether ``link`` is an edge key of the current graph, or the key a circuit between two of its
    packet switches would get (``packet:A:3-B:1``, monitored once lit); False with no graph yet."""
    from app.web.context import graph
    from app.web.topology_source import TopologyUnavailable, node_kind

    try:
        g = graph(db)
    except TopologyUnavailable:
        return False
    m = _CIRCUIT_LINK.fullmatch(link)
    if m and node_kind(g, m.group(1)) == node_kind(g, m.group(2)) == "packet":
        return True
    return any(k == link for _u, _v, k in g.g.edges(keys=True))


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
    unknown = monitor_read.unsampled(db, [link for link in dict.fromkeys(links) if not _in_topology(db, link)])
    if unknown:
        raise ApiError(f"unknown link {unknown[0]!r}: not an edge key of the topology nor a circuit "
                       f"between two of its packet switches (e.g. packet:A:3-B:1), and never sampled", field="link")
    rows = monitor_read.utilization(db, since, links, limit)
    series: dict[str, list[dict]] = {link: [] for link in links}
    for link, points in rows.items():
        series[link] = [{"time": to_iso(t), "mbps": mbps, "utilization": util} for t, mbps, util in points]
    return jsonify({"since": to_iso(since), "as_of": to_iso(now()), "series": series})


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
