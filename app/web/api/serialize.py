"""Model → JSON (the shapes documented in :mod:`app.web.openapi`)."""
from __future__ import annotations

from typing import Any

from app.db.models import AuditEntry, Circuit, Plan, Reservation, ReservationRule, Restoration
from app.web.timeutil import to_iso


def reservation(res: Reservation) -> dict[str, Any]:
    return {
        "id": res.id,
        "name": res.name,
        "description": res.description,
        "src": res.src,
        "src_vlan": res.src_vlan,
        "dst": res.dst,
        "dst_vlan": res.dst_vlan,
        "bandwidth": res.bandwidth,
        "start": to_iso(res.start_ts),
        "end": to_iso(res.end_ts),
        "mode": res.mode,
        "protection": res.protection or "none",
        "state": res.state,
        "state_reason": res.state_reason,
        "ero": res.ero,
        "path": res.path,
        "owner": res.owner.name,
        "hold_expires": to_iso(res.hold_expires_ts),
        "created": to_iso(res.created_ts),
        "updated": to_iso(res.updated_ts),
        "provisioned_bandwidth": res.provisioned_bw,
    }


def reservation_detail(res: Reservation) -> dict[str, Any]:
    """One reservation with what the controller installed for it: its circuits (XCONs) and packet rules."""
    return {**reservation(res), "circuits": [circuit(c) for c in res.circuits], "rules": [rule(r) for r in res.rules]}


def rule(r: ReservationRule) -> dict[str, Any]:
    """A packet rule; the cookie as ``0x`` + 16 hex digits (a 64-bit value is not safe in a JSON number)."""
    return {"id": r.id, "switch": r.switch, "table": r.table_id, "priority": r.priority, "cookie": f"0x{r.cookie}",
            "match": r.match, "actions": r.actions, "installed": r.installed, "installed_at": to_iso(r.installed_ts),
            "removed_at": to_iso(r.removed_ts)}


def plan(p: Plan) -> dict[str, Any]:
    steps = [{**st, "started_at": to_iso(st.get("started_at")), "finished_at": to_iso(st.get("finished_at"))}
             for st in p.steps]
    return {"id": p.id, "kind": p.kind, "mode": p.mode, "reservation_id": p.reservation_id, "state": p.state,
            "error": p.error, "started": to_iso(p.started_at), "finished": to_iso(p.finished_at), "steps": steps}


def circuit(c: Circuit) -> dict[str, Any]:
    return {
        "id": c.id,
        "name": c.name,
        "reservation_id": c.reservation_id,
        "a_end": c.a_end,
        "z_end": c.z_end,
        "capacity": c.capacity,
        "state": c.state,
        "xcons": [{"ots": x.ots, "in_port": x.in_port, "out_port": x.out_port, "active": x.active}
                  for x in c.xcons],
        "created": to_iso(c.created_ts),
        "updated": to_iso(c.updated_ts),
    }


def event(e: dict[str, Any]) -> dict[str, Any]:
    """An event row of :func:`app.web.monitor_read.merged_events` (service or monitor)."""
    return {"id": e["id"], "time": to_iso(e["ts"]), "kind": e["kind"], "severity": e["severity"],
            "message": e["message"], "detail": e["detail"]}


def audit(a: AuditEntry) -> dict[str, Any]:
    return {"id": a.id, "time": to_iso(a.ts), "user_id": a.user_id, "action": a.action, "detail": a.detail}


def restoration(r: Restoration) -> dict[str, Any]:
    """One repair of a reservation after a failure (docs/failures.md)."""
    return {"id": r.id, "cause": r.cause, "outcome": r.outcome, "reason": r.reason, "attempt": r.attempt,
            "detected": to_iso(r.detected_ts), "started": to_iso(r.started_ts), "finished": to_iso(r.finished_ts),
            "took_s": None if r.finished_ts is None else round(r.finished_ts - r.detected_ts, 3),
            "old_path": list(r.old_path or []), "new_path": list(r.new_path or [])}
