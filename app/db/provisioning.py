"""The database side of provisioning: what the controller reads and records when it lights reservations.

Plain, synchronous SQLAlchemy (no Flask, no os-ken): the controller calls it from its database
writer thread (docs/controller.md, "Database writes"). The cycle, per reservation:

1. the window starts: RESERVED → PROVISIONING (time-driven, :func:`app.db.lifecycle.advance`; the web
   service's sweeper does it, and :meth:`ProvisioningStore.due` does it too, so the controller does
   not depend on the web service running);
2. the controller asks :meth:`~ProvisioningStore.due` what to light, installs XCONs and packet rules,
   then reports :meth:`~ProvisioningStore.mark_active` (PROVISIONING → ACTIVE, with what it installed)
   or :meth:`~ProvisioningStore.mark_failed` (→ FAILED, with the reason);
3. when the reservation is final (FINISHED, CANCELLED, FAILED) :meth:`~ProvisioningStore.to_release`
   lists what is still installed; the controller removes it and reports
   :meth:`~ProvisioningStore.mark_released`;
4. after a restart :meth:`~ProvisioningStore.installed` lists everything installed, to re-adopt it;
5. a failure breaks a lit reservation's path (docs/failures.md): :meth:`~ProvisioningStore.mark_restoring`
   (ACTIVE or DEGRADED → RESTORING), then :meth:`~ProvisioningStore.mark_restored` (→ ACTIVE on the new
   path: the broken installation recorded as removed, the new one as installed) or
   :meth:`~ProvisioningStore.mark_degraded` (→ DEGRADED: nothing lit, retried); each try is a
   ``restorations`` row (:meth:`~ProvisioningStore.restorations`).

The database always knows what the controller put into the network: ``mark_active`` records the
installation even when the reservation was cancelled (or ended) in the meantime — it then answers
False and ``to_release`` lists the installation, so removing it takes the normal path. State changes
take the same write lock as the web service's (:meth:`app.db.engine.Database.lock_for_write`), so a
cancel racing ``mark_active`` is decided by whoever locks first, and each one writes an audit entry
and an ``events`` row. Executed update plans are kept with :meth:`~ProvisioningStore.record_plan`.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from sqlalchemy import func, insert, or_, select, tuple_, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session, selectinload

from app.db import lifecycle
from app.db.engine import Database
from app.db.models import Circuit, Event, Plan, Reservation, ReservationRule, Restoration, Xcon
from app.db.states import (
    ACTIVE,
    BOOKING_STATES,
    DEGRADED,
    FAILED,
    FINAL_STATES,
    HELD,
    PROVISIONING,
    RESTORING,
)

INSTALLED, RELEASED = "ACTIVE", "RELEASED"  # Circuit.state of an installed / removed circuit
PLAN_MODES = ("ordered", "one_shot")
PLAN_STATES = ("done", "failed", "rolled_back")
STEP_KEYS = frozenset({"id", "kind", "target", "deps", "started_at", "finished_at", "ok", "error"})
PLAN_KEYS = frozenset({"kind", "mode", "reservation_id", "state", "error", "started_at", "finished_at", "steps"})
CIRCUIT_KEYS = frozenset({"name", "a_end", "z_end", "capacity", "xcons"})
RULE_KEYS = frozenset({"switch", "table", "priority", "cookie", "match", "actions"})
RESTORATION_KEYS = frozenset({"cause", "detected_ts", "started_ts", "attempt", "old_path", "new_path", "reason"})
MAX_PLANS = 1000
MAX_ID = 2**31 - 1  # ids are 32-bit INTEGER columns on PostgreSQL
BY_CONTROLLER = {"by": "controller"}
_T = TypeVar("_T")


class ProvisioningError(ValueError):
    """Malformed input (a circuit, rule or plan record), or a reservation that does not exist."""


@dataclass(frozen=True)
class ReservationOrder:
    """A reservation the controller should light: endpoints, VLANs, bandwidth, window and the path
    admission control pinned (``path`` is ``pce.reservation.PathResult.to_dict()``: nodes, edges,
    oports, xcons as ``[in_oport, out_oport]`` pairs, latency, available, bottleneck, hops)."""

    id: int
    name: str
    src: str
    src_vlan: int | None
    dst: str
    dst_vlan: int | None
    bandwidth: float  # Mbit/s
    mode: str  # static | elastic
    start: float
    end: float
    path: dict[str, Any] | None
    ero: list[str] | None
    protection: str = "none"  # "none" | "1+1"


@dataclass(frozen=True)
class InstalledCircuit:
    id: int
    name: str
    a_end: str
    z_end: str
    capacity: float
    xcons: tuple[tuple[str, int, int], ...]  # (ots, in_port, out_port)


@dataclass(frozen=True)
class InstalledRule:
    id: int
    switch: str
    table: int
    priority: int
    cookie: int
    match: dict[str, Any]
    actions: list[Any]


@dataclass(frozen=True)
class Installation:
    """What is installed in the network for one reservation (circuits and packet rules)."""

    reservation_id: int
    state: str
    circuits: tuple[InstalledCircuit, ...]
    rules: tuple[InstalledRule, ...]


# ---- input checks (before anything is written) ---------------------------------------------------

def _text(value: Any, what: str, max_len: int) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= max_len:
        raise ProvisioningError(f"{what} must be a string of 1..{max_len} characters, got {value!r}")
    return value


REASON_MAX = 500  # characters of a state reason (the column's width)


def _reason(value: Any) -> str:
    """A state reason, clipped to :data:`REASON_MAX` with an ellipsis: a failed plan's error lists every
    rule it was waiting for (36 on an 18-switch path), and the whole of it is in the plan's record; a
    reason too long to store left the reservation PROVISIONING with an error logged instead of FAILED."""
    if not isinstance(value, str) or not value:
        raise ProvisioningError(f"reason must be a non-empty string, got {value!r}")
    return value if len(value) <= REASON_MAX else value[:REASON_MAX - 1] + "…"


def _int(value: Any, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ProvisioningError(f"{what} must be an integer in {lo}..{hi}, got {value!r}")
    return value


def _number(value: Any, what: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProvisioningError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _finite(value: Any, what: str) -> float:
    t = _number(value, what)
    assert t is not None
    return t


def _json(value: Any, what: str) -> Any:
    """``value`` if it is plain JSON (stored in a JSON column), else ProvisioningError."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ProvisioningError(f"{what} must be plain JSON: {exc}") from None
    return value


def _keys(d: Any, allowed: frozenset[str], required: frozenset[str], what: str) -> Mapping[str, Any]:
    if not isinstance(d, Mapping):
        raise ProvisioningError(f"{what} must be a mapping, got {type(d).__name__}")
    if unknown := set(d) - allowed:
        raise ProvisioningError(f"{what}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    if missing := required - set(d):
        raise ProvisioningError(f"{what}: missing field(s) {', '.join(sorted(missing))}")
    return d


_CheckedCircuit = tuple[str, str, str, float, tuple[tuple[str, int, int], ...]]
_CheckedRule = tuple[str, int, int, int, dict[str, Any], list[Any]]


def _check_circuit(c: Any, n: int) -> _CheckedCircuit:
    what = f"circuit {n}"
    d = _keys(c, CIRCUIT_KEYS, CIRCUIT_KEYS - {"name"}, what)
    a_end = _text(d["a_end"], f"{what}: a_end", 64)
    z_end = _text(d["z_end"], f"{what}: z_end", 64)
    capacity = _finite(d["capacity"], f"{what}: capacity")
    if capacity < 0:
        raise ProvisioningError(f"{what}: capacity must be >= 0 Mbit/s, got {capacity!r}")
    raw = d["xcons"]
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence) or not raw:
        raise ProvisioningError(f"{what}: xcons must be a non-empty list of (ots, in_port, out_port)")
    xcons = []
    for k, x in enumerate(raw):
        if isinstance(x, (str, bytes)) or not isinstance(x, Sequence) or len(x) != 3:
            raise ProvisioningError(f"{what}: xcon {k} must be (ots, in_port, out_port), got {x!r}")
        xcons.append((_text(x[0], f"{what}: xcon {k} ots", 64), _int(x[1], f"{what}: xcon {k} in_port", 0, 2**32),
                      _int(x[2], f"{what}: xcon {k} out_port", 0, 2**32)))
    ots = ",".join(dict.fromkeys(o for o, _i, _p in xcons))
    name = _text(d.get("name", f"{a_end}-{z_end} via {ots}")[:128], f"{what}: name", 128)
    return name, a_end, z_end, capacity, tuple(xcons)


def _check_rule(r: Any, n: int) -> _CheckedRule:
    what = f"rule {n}"
    d = _keys(r, RULE_KEYS, RULE_KEYS - {"table"}, what)
    switch = _text(d["switch"], f"{what}: switch", 64)
    table = _int(d.get("table", 0), f"{what}: table", 0, 254)
    priority = _int(d["priority"], f"{what}: priority", 0, 65535)
    cookie = _int(d["cookie"], f"{what}: cookie", 0, 2**64 - 1)
    if not isinstance(d["match"], Mapping):
        raise ProvisioningError(f"{what}: match must be a mapping of OpenFlow match fields")
    if isinstance(d["actions"], (str, bytes)) or not isinstance(d["actions"], Sequence):
        raise ProvisioningError(f"{what}: actions must be a list")
    return (switch, table, priority, cookie, _json(dict(d["match"]), f"{what}: match"),
            _json(list(d["actions"]), f"{what}: actions"))


def circuit_key(a_end: str, z_end: str, xcons: Iterable[tuple[str, int, int]]) -> tuple:
    """The same key for a circuit read in either direction (an XCON joins its two ports both ways)."""
    fwd = (a_end, z_end, tuple((o, int(i), int(p)) for o, i, p in xcons))
    rev = (z_end, a_end, tuple((o, p, i) for o, i, p in reversed(fwd[2])))
    return min(fwd, rev)


def _rule_key(switch: str, table: int, priority: int, cookie: int, match: Mapping[str, Any]) -> tuple:
    """A rule recorded once: switch, table, priority and match (OpenFlow's strict identity) plus cookie."""
    return switch, table, priority, cookie, tuple(sorted((str(k), repr(v)) for k, v in match.items()))


def _unseen(items: list[_T], key: Callable[[_T], tuple], seen: set[tuple]) -> list[_T]:
    """``items`` whose key is not in ``seen`` (nor repeated among them), in order."""
    out = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


def _steps(raw: Any) -> list[dict[str, Any]]:
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise ProvisioningError("plan steps must be a list")
    out: list[dict[str, Any]] = []
    ids: set[Any] = set()
    for n, step in enumerate(raw):
        what = f"plan step {n}"
        d = _keys(step, STEP_KEYS, STEP_KEYS, what)
        if isinstance(d["id"], bool) or not isinstance(d["id"], (int, str)) or d["id"] in ids:
            raise ProvisioningError(f"{what}: id must be a unique string or integer, got {d['id']!r}")
        ids.add(d["id"])
        deps = d["deps"]
        if isinstance(deps, (str, bytes)) or not isinstance(deps, Sequence):
            raise ProvisioningError(f"{what}: deps must be a list of step ids")
        if d["ok"] is not None and not isinstance(d["ok"], bool):
            raise ProvisioningError(f"{what}: ok must be true, false or null (not run), got {d['ok']!r}")
        if d["error"] is not None and not isinstance(d["error"], str):
            raise ProvisioningError(f"{what}: error must be a string or null")
        out.append({"id": d["id"], "kind": _text(d["kind"], f"{what}: kind", 64),
                    "target": _text(d["target"], f"{what}: target", 256), "deps": _json(list(deps), f"{what}: deps"),
                    "started_at": _number(d["started_at"], f"{what}: started_at", optional=True),
                    "finished_at": _number(d["finished_at"], f"{what}: finished_at", optional=True),
                    "ok": d["ok"], "error": d["error"]})
    for step in out:
        if unknown := [dep for dep in step["deps"] if dep not in ids]:
            raise ProvisioningError(f"plan step {step['id']!r}: deps name unknown step(s) {unknown!r}")
    return out


def _order(r: Reservation) -> ReservationOrder:
    return ReservationOrder(id=r.id, name=r.name, src=r.src, src_vlan=r.src_vlan, dst=r.dst, dst_vlan=r.dst_vlan,
                            bandwidth=r.bandwidth, mode=r.mode, start=r.start_ts, end=r.end_ts, path=r.path,
                            ero=r.ero, protection=r.protection or "none")


def _installation(circuits: Any, rules: Any) -> tuple[list[_CheckedCircuit], list[_CheckedRule]]:
    """Checked circuits (one mapping or a list) and rules of an installation; at least one of them."""
    if circuits is None:
        circuits = []
    elif isinstance(circuits, Mapping):
        circuits = [circuits]
    if isinstance(rules, (str, bytes, Mapping)) or not isinstance(rules, Sequence):
        raise ProvisioningError("rules must be a list of rule mappings")
    cs = [_check_circuit(c, n) for n, c in enumerate(circuits)]
    rs = [_check_rule(r, n) for n, r in enumerate(rules)]
    if not cs and not rs:
        raise ProvisioningError("nothing installed: an installation needs at least one circuit or rule")
    return cs, rs


def _restoration(d: Any) -> dict[str, Any]:
    """The fields of one ``restorations`` row, checked (cause, times, attempt, old and new path)."""
    d = _keys(d, RESTORATION_KEYS, frozenset({"cause", "detected_ts", "started_ts"}), "restoration")
    paths = {}
    for key in ("old_path", "new_path"):
        edges = d.get(key) or []
        if isinstance(edges, (str, bytes)) or not isinstance(edges, Sequence):
            raise ProvisioningError(f"restoration {key} must be a list of edge keys")
        paths[key] = [_text(e, f"restoration {key} edge", 200) for e in edges]
    return {"cause": _text(d["cause"], "restoration cause", 500), "detected_ts": _finite(d["detected_ts"], "detected_ts"),
            "started_ts": _finite(d["started_ts"], "started_ts"), "attempt": _int(d.get("attempt", 1), "attempt", 1, MAX_ID),
            "reason": _text(d["reason"], "restoration reason", 500) if d.get("reason") else "", **paths}


def restoration_dict(r: Restoration) -> dict[str, Any]:
    """A ``restorations`` row as the REST API and the web show it."""
    return {"id": r.id, "reservation_id": r.reservation_id, "cause": r.cause, "detected_ts": r.detected_ts,
            "started_ts": r.started_ts, "finished_ts": r.finished_ts, "outcome": r.outcome, "reason": r.reason,
            "attempt": r.attempt, "old_path": list(r.old_path or []), "new_path": list(r.new_path or []),
            "took_s": None if r.finished_ts is None else round(r.finished_ts - r.detected_ts, 3)}


def plan_dict(p: Plan) -> dict[str, Any]:
    """A plan row as a plain dict (epoch-second times)."""
    return {"id": p.id, "kind": p.kind, "mode": p.mode, "reservation_id": p.reservation_id, "state": p.state,
            "error": p.error, "started_at": p.started_at, "finished_at": p.finished_at, "steps": p.steps}


# ---- the store ------------------------------------------------------------------------------------

class ProvisioningStore:
    """Reads due reservations and records what the controller installed, removed and planned."""

    def __init__(self, db: Database) -> None:
        self.db = db  # migrated and disposed by its owner (the process's entry point)

    # -- reading -----------------------------------------------------------------------------------
    def due(self, now: float) -> list[ReservationOrder]:
        """Reservations in PROVISIONING whose window is running at ``now``, oldest start first.

        Time-driven transitions due at ``now`` are applied first (the lock is taken only when one is
        due), so a window that has just started is listed even if no web service runs."""
        def running(s: Session) -> list[ReservationOrder]:
            rows = s.execute(select(Reservation).where(Reservation.state == PROVISIONING, Reservation.end_ts > now,
                                                       Reservation.start_ts <= now)
                             .order_by(Reservation.start_ts, Reservation.id)).scalars()
            return [_order(r) for r in rows]

        with self.db.session() as s:  # asked every second: one session when nothing is due
            pending = s.execute(select(func.count()).select_from(Reservation)
                                .where(lifecycle.due_condition(now))).scalar_one()
            if not pending:
                return running(s)
        with self.db.locked() as s:
            lifecycle.advance(s, now)
        with self.db.session() as s:
            return running(s)

    def orders(self, ids: Iterable[int]) -> list[ReservationOrder]:
        """The reservations ``ids`` (those that exist), by id: what a restoration needs to re-route one."""
        ids = sorted({_int(i, "reservation id", 1, MAX_ID) for i in ids})
        with self.db.session() as s:
            return [_order(r) for r in s.execute(select(Reservation).where(Reservation.id.in_(ids))
                                                  .order_by(Reservation.id)).scalars()]

    def to_restore(self, now: float) -> list[ReservationOrder]:
        """RESTORING and DEGRADED reservations whose window is still running (to retry, or to resume
        after a controller restart), oldest first."""
        with self.db.session() as s:
            return [_order(r) for r in s.execute(
                select(Reservation).where(Reservation.state.in_((RESTORING, DEGRADED)), Reservation.end_ts > now)
                .order_by(Reservation.id)).scalars()]

    def installed(self) -> list[Installation]:
        """Everything installed for reservations, whatever their state (to re-adopt after a restart)."""
        with self.db.session() as s:
            return self._installations(s, final_only=False)

    def to_release(self, but: Iterable[int] = ()) -> list[Installation]:
        """Installations of reservations that are FINISHED, CANCELLED or FAILED: to be removed. ``but``: the
        reservations not to load (those being released already: the controller asks every second, and
        loading a long path's circuits and rules again each time while its release runs was 4 % of its
        CPU on germany50 with reservations arriving)."""
        skip = {_int(r, "reservation id", 1, MAX_ID) for r in but}
        with self.db.session() as s:
            return self._installations(s, final_only=True, but=skip)

    def xcons_in_use(self, xcons: Iterable[tuple[str, int, int]], res_id: int, *also: int) -> list[tuple[str, int, int]]:
        """Which of ``xcons`` (ots, in_port, out_port; in either direction) a circuit recorded as installed for any reservation
        but ``res_id`` (and ``also``: the riders of a shared circuit restored together) holds (grooming:
        several reservations record the same shared circuit; it goes only with the last of them). Asked
        about the circuit to release only: reading every installed XCON for each release was 2.4 % of the
        controller's CPU on germany50 with reservations arriving."""
        but = {_int(r, "res_id", 1, MAX_ID) for r in (res_id, *also)}
        asked = sorted({x for o, i, p in xcons for x in ((str(o), int(i), int(p)), (str(o), int(p), int(i)))})  # either way
        if not asked:
            return []
        with self.db.session() as s:
            rows = s.execute(select(Xcon.ots, Xcon.in_port, Xcon.out_port).distinct()
                             .join(Circuit, Xcon.circuit_id == Circuit.id)
                             .where(tuple_(Xcon.ots, Xcon.in_port, Xcon.out_port).in_(asked),
                                    Circuit.state == INSTALLED, Circuit.reservation_id.is_not(None),
                                    Circuit.reservation_id.not_in(but)))
            return sorted({(str(o), int(i), int(p)) for o, i, p in rows})

    def plans(self, limit: int = 50, reservation_id: int | None = None) -> list[dict[str, Any]]:
        """Recorded update plans, newest first (optionally of one reservation)."""
        _int(limit, "limit", 1, MAX_PLANS)
        stmt = select(Plan).order_by(Plan.id.desc()).limit(limit)
        if reservation_id is not None:
            stmt = stmt.where(Plan.reservation_id == _int(reservation_id, "reservation_id", 1, MAX_ID))
        with self.db.session() as s:
            return [plan_dict(p) for p in s.execute(stmt).scalars()]

    # -- recording ---------------------------------------------------------------------------------
    def mark_active(self, res_id: int, circuits: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
                    rules: Sequence[Mapping[str, Any]], now: float, path: Mapping[str, Any] | None = None) -> bool:
        """Record what the controller installed for ``res_id`` and move it PROVISIONING → ACTIVE.

        ``circuits``: one circuit or a list (a path can cross the optical layer more than once), each
        ``{name?, a_end, z_end, capacity, xcons: [(ots, in_port, out_port), ...]}``; ``rules``: packet
        rules ``{switch, table?, priority, cookie, match, actions}``. An item already recorded as
        installed for this reservation is not recorded twice.

        Returns True if the reservation is ACTIVE with this installation (also for a retried call);
        False if it was no longer PROVISIONING (cancelled, ended or failed meanwhile): the installation
        is recorded all the same and :meth:`to_release` lists it once the reservation is final.
        Raises :class:`ProvisioningError` for malformed input or an unknown reservation (nothing written).
        ``path``: the path lit, when it is not the stored one (the stored one was taken): it replaces it.
        """
        cs, rs = _installation(circuits, rules)
        if path is not None and not isinstance(path, Mapping):
            raise ProvisioningError("path must be a mapping (a PathResult) or None")
        now = _finite(now, "now")
        with self.db.locked() as s:
            res = self._get(s, res_id)
            new_c, new_r = self._record_installation(s, res, cs, rs, now)
            if not new_c and not new_r:  # a retry of a call that was recorded
                return res.state == ACTIVE
            detail = {"circuits": [c[0] for c in new_c], "rules": len(new_r), **BY_CONTROLLER}
            if path is not None:
                res.path = json.loads(json.dumps(dict(path)))
            if res.state == PROVISIONING:
                lifecycle.transition(s, None, res, ACTIVE, "lit by the controller", now, **detail)
                return True
            s.flush()
            lifecycle.audit(s, None, "install", res, state=res.state, **detail)
            s.add(Event(ts=now, kind="reservation.installed_late", severity="warning",
                        message=f"reservation {res.id} ({res.name}) was {res.state} when the controller reported "
                                "it lit: what was installed is recorded and will be released",
                        detail={"reservation": res.id, **detail}))
            return False

    def mark_failed(self, res_id: int, reason: str, now: float) -> bool:
        """Move ``res_id`` to FAILED with ``reason`` (from PROVISIONING, or a lit ACTIVE reservation that
        broke). True if it is FAILED afterwards (already FAILED: nothing written); False if it had
        already FINISHED or been CANCELLED."""
        reason = _reason(reason)
        now = _finite(now, "now")
        with self.db.locked() as s:
            res = self._get(s, res_id)
            if res.state == FAILED:
                return True
            if res.state in FINAL_STATES:
                return False
            lifecycle.transition(s, None, res, FAILED, reason, now, **BY_CONTROLLER)
            return True

    def mark_released(self, res_id: int, now: float) -> bool:
        """Record that everything installed for ``res_id`` was removed from the network.

        Only for a final reservation (FINISHED, CANCELLED, FAILED): True (also when nothing was left
        installed); False, nothing written, for one that is still running."""
        now = _finite(now, "now")
        with self.db.locked() as s:
            res = self._get(s, res_id)
            if res.state not in FINAL_STATES:
                return False
            circuits, rules = self._release_rows(s, res_id, now)
            if not circuits and not rules:
                return True
            detail = {"circuits": [c.name for c in circuits], "rules": rules, **BY_CONTROLLER}
            lifecycle.audit(s, None, "release", res, **detail)
            s.add(Event(ts=now, kind="reservation.released", severity="info",
                        message=f"reservation {res.id} ({res.name}): {len(circuits)} circuit(s) and {rules} "
                                "rule(s) removed from the network", detail={"reservation": res.id, **detail}))
            return True

    # -- failures (docs/failures.md) ---------------------------------------------------------------
    def mark_restoring(self, res_id: int, cause: str, now: float) -> bool:
        """ACTIVE or DEGRADED → RESTORING: a failure broke its path (or a DEGRADED one is retried).

        True if it is RESTORING afterwards (already RESTORING: nothing written); False for one that is
        not lit (not yet ACTIVE, or final): there is nothing to restore."""
        cause = _text(cause, "cause", 500)
        now = _finite(now, "now")
        with self.db.locked() as s:
            res = self._get(s, res_id)
            if res.state == RESTORING:
                return True
            if res.state not in (ACTIVE, DEGRADED):
                return False
            lifecycle.transition(s, None, res, RESTORING, cause, now, **BY_CONTROLLER)
            return True

    def mark_restored(self, res_id: int, circuits: Sequence[Mapping[str, Any]], rules: Sequence[Mapping[str, Any]],
                      path: Mapping[str, Any] | None, restoration: Mapping[str, Any], now: float) -> bool:
        """RESTORING → ACTIVE on a new path: what was installed before is recorded as removed, the new
        ``circuits`` and ``rules`` (as :meth:`mark_active`) as installed, ``path`` (when given) replaces
        the stored one, and the try is a ``restorations`` row (outcome "restored").

        False if it is no longer RESTORING (cancelled or ended meanwhile): the new installation is
        recorded all the same, so :meth:`to_release` lists it and it is removed the normal way."""
        cs, rs = _installation(circuits, rules)
        row = _restoration(restoration)
        if path is not None and not isinstance(path, Mapping):
            raise ProvisioningError("path must be a mapping (a PathResult) or None")
        now = _finite(now, "now")
        with self.db.locked() as s:
            res = self._get(s, res_id)
            ok = res.state == RESTORING
            new_c, new_r = self._swap_installation(s, res, ok, cs, rs, Restoration(outcome="restored", **row), now)
            if not ok:
                lifecycle.audit(s, None, "install", res, state=res.state, circuits=[c[0] for c in new_c],
                                rules=len(new_r), **BY_CONTROLLER)
                return False
            if path is not None:
                res.path = json.loads(json.dumps(dict(path)))
            old = " → ".join(row["old_path"][:1] + row["old_path"][-1:])
            lifecycle.transition(s, None, res, ACTIVE, f"restored on a new path after {row['cause']}", now,
                                 circuits=[c[0] for c in new_c], rules=len(new_r), old_path=old, **BY_CONTROLLER)
            return True

    def _swap_installation(self, s: Session, res: Reservation, ok: bool, cs: list[_CheckedCircuit],
                           rs: list[_CheckedRule], row: Restoration,
                           now: float) -> tuple[list[_CheckedCircuit], list[_CheckedRule]]:
        """A new path's installation recorded (and, when ``ok``, the old one as removed) with its
        ``restorations`` row: a restoration and a revert end the same way."""
        if ok:
            self._release_rows(s, res.id, now)
        new = self._record_installation(s, res, cs, rs, now)
        row.reservation_id, row.finished_ts = res.id, now
        s.add(row)
        return new

    def mark_degraded(self, res_id: int, reason: str, restoration: Mapping[str, Any], now: float) -> bool:
        """RESTORING → DEGRADED: no path now (or lighting it failed); nothing of it stays installed
        (the broken installation is recorded as removed) and the controller retries with back-off
        while the failure lasts. One ``restorations`` row (outcome "degraded"). False if it is no
        longer RESTORING."""
        reason = _reason(reason)
        row = _restoration({**restoration, "reason": reason})
        now = _finite(now, "now")
        with self.db.locked() as s:
            res = self._get(s, res_id)
            if res.state != RESTORING:
                return False
            self._release_rows(s, res_id, now)
            s.add(Restoration(reservation_id=res.id, finished_ts=now, outcome="degraded", **row))
            lifecycle.transition(s, None, res, DEGRADED, reason, now, **BY_CONTROLLER)
            return True

    # -- revert to the original path (docs/failures.md, "Revert") ----------------------------------
    def mark_reverted(self, res_id: int, circuits: Sequence[Mapping[str, Any]], rules: Sequence[Mapping[str, Any]],
                      path: Mapping[str, Any], restoration: Mapping[str, Any], now: float) -> bool:
        """ACTIVE on a restoration path → ACTIVE on its original path again (make-before-break: it never
        left ACTIVE): the restoration path's installation recorded as removed, the original's as
        installed, ``path`` stored, a ``restorations`` row (outcome "reverted"), an audit entry and an
        events row. False if it is no longer ACTIVE (the installation is recorded all the same)."""
        cs, rs = _installation(circuits, rules)
        row = _restoration(restoration)
        if not isinstance(path, Mapping):
            raise ProvisioningError("path must be a mapping (a PathResult)")
        now = _finite(now, "now")
        with self.db.locked() as s:
            res = self._get(s, res_id)
            ok = res.state == ACTIVE
            new_c, new_r = self._swap_installation(s, res, ok, cs, rs, Restoration(outcome="reverted", **row), now)
            detail = {"circuits": [c[0] for c in new_c], "rules": len(new_r), **BY_CONTROLLER}
            lifecycle.audit(s, None, "revert" if ok else "install", res, state=res.state, **detail)
            if not ok:
                return False
            res.path = json.loads(json.dumps(dict(path)))
            res.state_reason, res.updated_ts = "reverted to its original path after the repair", now
            s.add(Event(ts=now, kind="reservation.reverted", severity="info",
                        message=f"reservation {res.id} ({res.name}) reverted to its original path "
                                f"{round(now - row['detected_ts'], 1)} s after the repair",
                        detail={"reservation": res.id, **detail}))
            return True

    def revert_refused(self, res_id: int, reason: str, restoration: Mapping[str, Any], now: float) -> bool:
        """A revert that did not happen (the original path is taken, booked, or its plan failed and was
        rolled back): the reservation stays on its restoration path; a ``restorations`` row (outcome
        "revert_failed") and a warning in the events. False for an unknown-state (final) reservation."""
        reason = _reason(reason)
        row = _restoration({**restoration, "reason": reason})
        now = _finite(now, "now")
        with self.db.locked() as s:
            res = self._get(s, res_id)
            if res.state in FINAL_STATES:
                return False
            s.add(Restoration(reservation_id=res.id, finished_ts=now, outcome="revert_failed", **row))
            s.add(Event(ts=now, kind="reservation.revert_failed", severity="warning",
                        message=f"reservation {res.id} ({res.name}) stays on its restoration path: {reason}",
                        detail={"reservation": res.id, "reason": reason}))
            return True

    def booked_elsewhere(self, res_id: int, oports: Iterable[str], now: float) -> dict[str, int]:
        """Which of ``oports`` (optical ports, taken whole) another reservation books in the rest of
        ``res_id``'s window: port → that reservation (a revert must not take them)."""
        want = {_text(p, "optical port", 64) for p in oports}
        now = _finite(now, "now")
        with self.db.session() as s:
            res = self._get(s, res_id)
            rows = s.execute(select(Reservation).where(
                Reservation.id != res.id, Reservation.state.in_(BOOKING_STATES), Reservation.start_ts < res.end_ts,
                Reservation.end_ts > now, or_(Reservation.state != HELD, Reservation.hold_expires_ts > now))).scalars()
            out: dict[str, int] = {}
            for other in rows:
                path = other.path or {}
                for p in [*path.get("oports", ()), *(path.get("protection") or {}).get("oports", ())]:
                    if p in want:
                        out.setdefault(p, other.id)
            return out

    def restorations(self, reservation_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Recorded restorations, newest first (optionally of one reservation)."""
        _int(limit, "limit", 1, MAX_PLANS)
        stmt = select(Restoration).order_by(Restoration.id.desc()).limit(limit)
        if reservation_id is not None:
            stmt = stmt.where(Restoration.reservation_id == _int(reservation_id, "reservation_id", 1, MAX_ID))
        with self.db.session() as s:
            return [restoration_dict(r) for r in s.execute(stmt).scalars()]

    def set_provisioned(self, res_id: int, mbps: float, now: float) -> bool:
        """Record the bandwidth the controller now gives ``res_id`` (an elastic reservation's meter).

        Never more than its admitted bandwidth (ProvisioningError: the controller must not exceed the
        grant). True if written; False for a reservation that is no longer lit or being lit."""
        mbps = _finite(mbps, "provisioned bandwidth")
        now = _finite(now, "now")
        with self.db.locked() as s:
            res = self._get(s, res_id)
            if not 0 < mbps <= res.bandwidth + 1e-9:
                raise ProvisioningError(f"reservation {res_id}: provisioned {mbps:g} Mbit/s outside "
                                        f"(0, {res.bandwidth:g}] (the admitted bandwidth)")
            if res.state not in (PROVISIONING, ACTIVE):
                return False
            if res.provisioned_bw is not None and abs(res.provisioned_bw - mbps) < 1e-9:
                return True
            before, res.provisioned_bw, res.updated_ts = res.provisioned_bw, mbps, now
            s.add(Event(ts=now, kind="reservation.resized", severity="info",
                        message=f"reservation {res.id} ({res.name}): provisioned {mbps:g} of {res.bandwidth:g} Mbit/s",
                        detail={"reservation": res.id, "before": before, "after": mbps, **BY_CONTROLLER}))
            return True

    def record_plan(self, record: Mapping[str, Any]) -> int:
        """Store an executed update plan; returns its id.

        ``record``: ``kind`` (e.g. provision, release, move), ``mode`` (ordered | one_shot),
        ``reservation_id`` (or None), ``state`` (done | failed | rolled_back), ``error`` (required
        unless done), ``started_at``, ``finished_at`` and ``steps`` (each ``{id, kind, target, deps,
        started_at, finished_at, ok, error}``). A plan that failed or was rolled back is also an event.
        """
        d = _keys(record, PLAN_KEYS, PLAN_KEYS - {"reservation_id", "error"}, "plan")
        kind = _text(d["kind"], "plan kind", 32)
        if d["mode"] not in PLAN_MODES:
            raise ProvisioningError(f"plan mode must be one of {', '.join(PLAN_MODES)}, got {d['mode']!r}")
        if d["state"] not in PLAN_STATES:
            raise ProvisioningError(f"plan state must be one of {', '.join(PLAN_STATES)}, got {d['state']!r}")
        error = d.get("error")
        if d["state"] != "done":
            error = _text(error, f"plan error (required for a {d['state']} plan)", 4000)
        elif error is not None:
            error = _text(error, "plan error", 4000)
        started = _finite(d["started_at"], "plan started_at")
        finished = _finite(d["finished_at"], "plan finished_at")
        if finished < started:
            raise ProvisioningError("plan finished_at is before started_at")
        steps = _steps(d["steps"])
        res_id = d.get("reservation_id")
        # the write lock first, as every other write here: a transaction that read and then writes fails at
        # once with "database is locked" on SQLite when another process (the web service) wrote between
        # (germany50 with reservations arriving: two plans' records lost, their reservations FAILED)
        with self.db.locked() as s:
            if res_id is not None:
                self._get(s, _int(res_id, "plan reservation_id", 1, MAX_ID))
            plan = Plan(kind=kind, mode=d["mode"], reservation_id=res_id, state=d["state"], error=error,
                        started_at=started, finished_at=finished, steps=steps)
            s.add(plan)
            s.flush()
            if d["state"] != "done":
                s.add(Event(ts=finished, kind=f"plan.{d['state']}",
                            severity="error" if d["state"] == "failed" else "warning",
                            message=f"{kind} plan {plan.id}{f' of reservation {res_id}' if res_id else ''} "
                                    f"{d['state'].replace('_', ' ')}: {error}",
                            detail={"plan": plan.id, "reservation": res_id}))
            return plan.id

    # -- helpers -----------------------------------------------------------------------------------
    @staticmethod
    def _get(s: Session, res_id: int) -> Reservation:
        _int(res_id, "reservation id", 1, MAX_ID)
        res = s.get(Reservation, res_id)
        if res is None:
            raise ProvisioningError(f"no reservation {res_id}")
        return res

    @staticmethod
    def _circuit_rows(s: Session, res_id: int) -> list[Circuit]:
        return list(s.execute(select(Circuit).options(selectinload(Circuit.xcons))
                              .where(Circuit.reservation_id == res_id, Circuit.state == INSTALLED)
                              .order_by(Circuit.id)).scalars())

    @staticmethod
    def _installed_rules(s: Session, res_id: int) -> list[InstalledRule]:
        """The rules installed for ``res_id``, read as plain rows: loading them as ORM objects (and
        adding and updating them one object at a time) made recording an arrival's ~24 rules and
        releasing them ~18 ms of the controller's database thread on germany50."""
        rr = ReservationRule
        return [InstalledRule(i, sw, t, p, int(c, 16), m, a) for i, sw, t, p, c, m, a in s.execute(
            select(rr.id, rr.switch, rr.table_id, rr.priority, rr.cookie, rr.match, rr.actions)
            .where(rr.reservation_id == res_id, rr.installed.is_(True)).order_by(rr.id))]

    def _record_installation(self, s: Session, res: Reservation, cs: list[_CheckedCircuit], rs: list[_CheckedRule],
                             now: float) -> tuple[list[_CheckedCircuit], list[_CheckedRule]]:
        """Add the circuits and rules not yet recorded as installed for ``res``; returns those added."""
        have_c = {circuit_key(c.a_end, c.z_end, [(x.ots, x.in_port, x.out_port) for x in c.xcons])
                  for c in self._circuit_rows(s, res.id)}
        have_r = {_rule_key(r.switch, r.table, r.priority, r.cookie, r.match) for r in self._installed_rules(s, res.id)}
        new_c = _unseen(cs, lambda c: circuit_key(c[1], c[2], c[4]), have_c)
        new_r = _unseen(rs, lambda r: _rule_key(*r[:5]), have_r)
        for name, a_end, z_end, capacity, xcons in new_c:
            s.add(Circuit(reservation_id=res.id, name=name, a_end=a_end, z_end=z_end, capacity=capacity,
                          state=INSTALLED, created_ts=now, updated_ts=now,
                          xcons=[Xcon(ots=o, in_port=i, out_port=p, active=True) for o, i, p in xcons]))
        if new_r:  # one executemany (the ORM's bulk insert), not an object per rule
            s.execute(insert(ReservationRule), [
                {"reservation_id": res.id, "switch": switch, "table_id": table, "priority": priority,
                 "cookie": f"{cookie:016x}", "match": match, "actions": actions, "installed": True,
                 "installed_ts": now} for switch, table, priority, cookie, match, actions in new_r])
        return new_c, new_r

    def _release_rows(self, s: Session, res_id: int, now: float) -> tuple[list[Circuit], int]:
        """Record every installed circuit and rule of ``res_id`` as removed; returns the circuits and
        how many rules (one UPDATE for the rules)."""
        circuits = self._circuit_rows(s, res_id)
        for c in circuits:
            c.state, c.updated_ts = RELEASED, now
            for x in c.xcons:
                x.active = False
        rr = ReservationRule
        rules = cast(CursorResult, s.execute(
            update(rr).where(rr.reservation_id == res_id, rr.installed.is_(True))
            .values(installed=False, removed_ts=now).execution_options(synchronize_session=False))).rowcount
        return circuits, int(rules or 0)

    def _installations(self, s: Session, *, final_only: bool, but: Set[int] = frozenset()) -> list[Installation]:
        with_circuit = select(Circuit.reservation_id).where(Circuit.reservation_id.is_not(None),
                                                            Circuit.state == INSTALLED)
        with_rule = select(ReservationRule.reservation_id).where(ReservationRule.installed.is_(True))
        stmt = select(Reservation.id, Reservation.state).where(or_(Reservation.id.in_(with_circuit),
                                                                   Reservation.id.in_(with_rule)))
        if final_only:
            stmt = stmt.where(Reservation.state.in_(FINAL_STATES))
        if but:
            stmt = stmt.where(Reservation.id.not_in(sorted(but)))
        out = []
        for res_id, state in s.execute(stmt.order_by(Reservation.id)).all():
            circuits = tuple(InstalledCircuit(c.id, c.name, c.a_end, c.z_end, c.capacity,
                                              tuple((x.ots, x.in_port, x.out_port) for x in c.xcons))
                             for c in self._circuit_rows(s, res_id))
            out.append(Installation(res_id, state, circuits, tuple(self._installed_rules(s, res_id))))
        return out
