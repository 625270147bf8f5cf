"""Read-only view of the monitor's tables (``mon_samples``, ``mon_events``) for the web service.

The controller's monitor app is the only writer of utilization series and monitoring events
(:class:`monitor.store.MonitorStore`, bounded retention); the web service never copies them into
tables of its own, it reads them here. A monitor sample row is one metric of one circuit (a packet
link of the multi-layer graph, keyed by its edge key) at one tick; ``util`` and ``mbps`` of the same
tick share a timestamp, so a utilization point is the pair joined on ``(point, t)``.
"""
from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from monitor.store import MonEvent, MonSample
from topology.errors import TopologyError
from topology.graph import edge_key

KIND_PREFIX = "monitor."
_INFO_KINDS = {"hot_spot_cleared", "elephant_gone", "latency_shift"}  # the others ask an operator to look


def link_key(a_end: str, z_end: str) -> str:
    """The key the monitor stores a packet link's series under (``packet:A:3-B:1``).

    The monitor keys a circuit by the graph's edge key of the packet link LLDP finds over it
    (``monitor.core.circuits_from_graph``), which is this key of its two switch ports; a circuit the
    controller recorded (``a_end``, ``z_end``) is therefore monitored under the same key, either way.
    """
    return edge_key("packet", a_end, z_end)


def path_links(graph: Any, edges: list[str]) -> list[str]:
    """The monitored links of a reservation's path: keys the monitor writes, in path order.

    A path is a list of the PCE graph's edges (access, adaptation, XCON, fibre, packet), but the
    monitor samples only packet links: a packet edge on the path is one as it is, and every stretch
    through the optical layer — from the adaptation where the path leaves a switch port to the one
    where it re-enters the packet layer — is the circuit between those two switch ports. Host links
    (access) are not monitored and are left out; edges no longer in the graph are skipped.
    """
    out: list[str] = []
    leave: str | None = None  # the switch port where the path entered the optical layer
    for key in edges:
        try:
            data = graph.edge(key)
        except TopologyError:
            continue
        if data.get("kind") == "packet":
            out.append(key)
        elif data.get("kind") == "adaptation":
            (sw, port), = (data.get("ports") or {}).items()
            here = f"{sw}:{port}"
            if leave is None:
                leave = here
            else:
                out.append(link_key(leave, here))
                leave = None
    return list(dict.fromkeys(out))


def utilization(session: Session, since: float, links: list[str], limit: int) -> dict[str, list[tuple]]:
    """``{edge key: [(t, mbps, utilization), ...]}`` oldest first, the newest ``limit`` points overall."""
    q = select(MonSample.point, MonSample.t, MonSample.value).where(MonSample.metric == "util", MonSample.t >= since)
    if links:
        q = q.where(MonSample.point.in_(links))
    util = list(session.execute(q.order_by(MonSample.t.desc(), MonSample.id.desc()).limit(limit)))
    if not util:
        return {}
    oldest = min(t for _p, t, _v in util)
    mq = select(MonSample.point, MonSample.t, MonSample.value).where(
        MonSample.metric == "mbps", MonSample.t >= oldest, MonSample.point.in_({p for p, _t, _v in util}))
    mbps = {(p, t): v for p, t, v in session.execute(mq)}
    out: dict[str, list[tuple]] = {}
    for point, t, value in reversed(util):
        if (point, t) in mbps:  # a tick's metrics are written in one transaction; never half a point
            out.setdefault(point, []).append((t, mbps[(point, t)], value))
    return out


def unsampled(session: Session, links: list[str]) -> list[str]:
    """The ``links`` of which the monitor has no sample at all (any age), in the given order."""
    if not links:
        return []
    seen = set(session.execute(select(MonSample.point).where(MonSample.point.in_(links)).distinct()).scalars())
    return [link for link in links if link not in seen]


def events(session: Session, since: float | None, kind: str | None, limit: int) -> list[dict[str, Any]]:
    """Monitor events in the web's event shape (``kind`` prefixed ``monitor.``), newest first."""
    q = select(MonEvent)
    if since is not None:
        q = q.where(MonEvent.t >= since)
    if kind is not None:
        if not kind.startswith(KIND_PREFIX):
            return []
        q = q.where(MonEvent.kind == kind[len(KIND_PREFIX):])
    out = []
    for e in session.execute(q.order_by(MonEvent.t.desc(), MonEvent.id.desc()).limit(limit)).scalars():
        flows = json.loads(e.flows)
        detail = {"circuit": e.circuit, "flows": flows, **json.loads(e.detail)}
        text = e.kind.replace("_", " ")
        message = f"{text} on circuit {e.circuit}" + (f" ({len(flows)} flow(s))" if flows else "")
        out.append({"id": e.id, "ts": e.t, "kind": KIND_PREFIX + e.kind, "message": message, "detail": detail,
                    "severity": "info" if e.kind in _INFO_KINDS else "warning"})
    return out


def merged_events(session: Session, since: float | None, kind: str | None, limit: int) -> list[dict[str, Any]]:
    """Service/controller events (web ``events`` table) and monitor events, newest first."""
    from app.db.models import Event

    q = select(Event)
    if since is not None:
        q = q.where(Event.ts >= since)
    if kind is not None:
        q = q.where(Event.kind == kind)
    rows = [{"id": e.id, "ts": e.ts, "kind": e.kind, "severity": e.severity, "message": e.message,
             "detail": e.detail}
            for e in session.execute(q.order_by(Event.id.desc()).limit(limit)).scalars()]
    rows += events(session, since, kind, limit)
    rows.sort(key=lambda r: r["ts"], reverse=True)
    return rows[:limit]
