"""Who rides each lit circuit (grooming, issue 28): the topology page's "Sharing" table and
``GET /api/v1/circuits/sharing`` are drawn from :func:`circuit_sharing`.

With grooming several reservations ride one circuit, and the controller records it once per rider
(each reservation's installation has its own ``circuits`` row with the same XCONs). Here the rows of
one circuit (the same ends and XCONs, either direction) are one entry: its riders with their
bandwidth and VLAN, what they book together and what is free on it for another rider. A circuit no
reservation rides (the TE loop's, or one lit by ``POST /circuit``) is listed with no riders and no
free capacity: it is not open to reservations.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from app.db.models import Circuit, User
from app.db.provisioning import circuit_key
from app.web.monitor_read import link_key

LIVE_CIRCUIT_STATES = ("ACTIVE", "UP", "PLANNED")


def live_circuits(db: Session) -> list[Circuit]:
    """The circuits the controller has lit (or is lighting), with their XCONs and reservations."""
    return list(db.execute(select(Circuit).options(selectinload(Circuit.xcons), selectinload(Circuit.reservation))
                           .where(Circuit.state.in_(LIVE_CIRCUIT_STATES)).order_by(Circuit.id)).scalars())


def _visible(user: User | None, owner_id: int | None) -> bool:
    return user is not None and (bool(user.is_admin) or owner_id == user.id)


def circuit_sharing(live: Iterable[Circuit], user: User | None = None) -> list[dict[str, Any]]:
    """One entry per lit circuit, in the order of its first row: ``circuit`` (``a_end``–``z_end``),
    ``link`` (the monitor's key), ``capacity``, ``xcons``, ``rows`` (its ``circuits`` ids), ``riders``
    (``id``, ``bandwidth``, ``vlan``, ``state``, ``mode``; ``name`` only for the owner and admins),
    ``booked`` (their bandwidth together), ``free`` (capacity minus booked; None for a circuit no
    reservation rides) and ``shared`` (more than one rider)."""
    groups: dict[tuple, list[Circuit]] = {}
    for c in live:
        key = circuit_key(c.a_end, c.z_end, ((x.ots, x.in_port, x.out_port) for x in c.xcons))
        groups.setdefault(key, []).append(c)
    out = []
    for (a_end, z_end, xcons), rows in groups.items():
        riders = {c.reservation_id: c.reservation for c in rows if c.reservation is not None}
        listed = []
        for rid, r in sorted(riders.items()):
            item: dict[str, Any] = {"id": rid, "bandwidth": r.bandwidth, "vlan": r.src_vlan, "state": r.state,
                                    "mode": r.mode}
            if _visible(user, r.owner_id):
                item["name"] = r.name
            listed.append(item)
        capacity = max(c.capacity for c in rows)
        booked = round(sum(r.bandwidth for r in riders.values()), 6)
        out.append({"circuit": f"{a_end}–{z_end}", "a_end": a_end, "z_end": z_end, "link": link_key(a_end, z_end),
                    "capacity": capacity, "xcons": [list(x) for x in xcons], "rows": [c.id for c in rows],
                    "riders": listed, "booked": booked,
                    "free": round(max(capacity - booked, 0.0), 6) if riders else None,
                    "shared": len(riders) > 1})
    return out
