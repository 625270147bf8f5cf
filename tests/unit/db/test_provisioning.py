"""ProvisioningStore, the controller's side of the database: preconditions, idempotence, audit and
events of every change, bad input refused before anything is written, and cancel racing mark_active."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import func, select

from app.db import lifecycle, migrate
from app.db.models import AuditEntry, Circuit, Event, Plan, Reservation, ReservationRule, User, Xcon
from app.db.provisioning import (
    Installation,
    InstalledCircuit,
    InstalledRule,
    ProvisioningError,
    ProvisioningStore,
    ReservationOrder,
)
from app.db.states import ACTIVE, CANCELLED, FAILED, FINISHED, HELD, PROVISIONING, RESERVED

T = 1_900_000_000.0
PATH = {"nodes": ["A", "X:1", "X:3", "Z:3", "Z:2", "C"],
        "edges": ["access:A:1-h1", "adaptation:A:3-X:1", "xcon:X:1-X:3", "optical:X:3-Z:3", "xcon:Z:2-Z:3",
                  "adaptation:C:1-Z:2", "access:C:3-h3"],
        "oports": ["X:1", "X:3", "Z:3", "Z:2"], "xcons": [["X:1", "X:3"], ["Z:3", "Z:2"]], "latency": 0.0,
        "available": 10.0, "bottleneck": "Z:2", "hops": 5}
CIRCUIT = {"name": "A:3-C:1 via X,Z", "a_end": "A:3", "z_end": "C:1", "capacity": 10.0,
           "xcons": [("X", 1, 3), ("Z", 3, 2)]}
RULES = [{"switch": "A", "table": 0, "priority": 300, "cookie": 0x4D4C544500000140,
          "match": {"in_port": 1, "vlan_vid": 100}, "actions": [{"output": 3}]},
         {"switch": "C", "priority": 300, "cookie": 2**64 - 1, "match": {"in_port": 1},
          "actions": [{"output": 3}]}]


class World:
    """A database with one user and helpers to make reservations in any state."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.db = migrate.open_migrated(url)
        self.store = ProvisioningStore(self.db)
        with self.db.session() as s, s.begin():
            s.add(User(id=1, name="alice", is_admin=False, created_at=0.0))

    def reservation(self, state: str, start: float = T - 10, end: float = T + 3600, **over: Any) -> int:
        with self.db.session() as s, s.begin():
            res = Reservation(name=over.pop("name", "r"), description="", src="A:1", src_vlan=100, dst="C:3",
                              dst_vlan=200, bandwidth=2.0, start_ts=start, end_ts=end, mode=over.pop("mode", "static"), state=state,
                              state_reason="", ero=["A", "C"], path=PATH, owner_id=1, created_ts=0.0, updated_ts=0.0,
                              **over)
            s.add(res)
            s.flush()
            return res.id

    def state(self, rid: int) -> tuple[str, str]:
        with self.db.session() as s:
            res = s.get(Reservation, rid)
            return res.state, res.state_reason

    def cancel(self, rid: int, now: float = T) -> None:
        """What the web service's cancel does: the checked transition under the same write lock."""
        with self.db.locked() as s:
            lifecycle.transition(s, 1, s.get(Reservation, rid), CANCELLED, "cancelled by alice", now)

    def counts(self) -> tuple[int, ...]:
        with self.db.session() as s:
            return tuple(s.execute(select(func.count()).select_from(m)).scalar_one()
                         for m in (Circuit, Xcon, ReservationRule, AuditEntry, Event, Plan))

    def history(self, rid: int) -> list[tuple[str, dict]]:
        with self.db.session() as s:
            return [(a.action, a.detail) for a in s.execute(
                select(AuditEntry).where(AuditEntry.entity_id == rid).order_by(AuditEntry.id)).scalars()]

    def events(self) -> list[tuple[str, str]]:
        with self.db.session() as s:
            return [(e.kind, e.severity) for e in s.execute(select(Event).order_by(Event.id)).scalars()]

    def close(self) -> None:
        self.db.dispose()


@pytest.fixture
def w(tmp_path) -> World:  # noqa: ANN001
    world = World(f"sqlite:///{tmp_path / 'prov.db'}")
    yield world
    world.close()


# ---- due ----------------------------------------------------------------------------------------------

def test_due_starts_windows_and_lists_what_to_light(w: World) -> None:
    started = w.reservation(RESERVED)
    later = w.reservation(RESERVED, start=T + 100)
    ended = w.reservation(RESERVED, start=T - 100, end=T - 1)
    waiting = w.reservation(PROVISIONING, start=T - 50)
    lit = w.reservation(ACTIVE)
    expired = w.reservation(HELD, hold_expires_ts=T - 1)
    orders = w.store.due(T)
    assert [o.id for o in orders] == [waiting, started]  # oldest start first
    assert orders[1] == ReservationOrder(id=started, name="r", src="A:1", src_vlan=100, dst="C:3", dst_vlan=200,
                                         bandwidth=2.0, mode="static", start=T - 10, end=T + 3600, path=PATH,
                                         ero=["A", "C"])
    assert w.state(started) == (PROVISIONING, lifecycle.START_REACHED)
    assert w.state(later)[0] == RESERVED and w.state(lit)[0] == ACTIVE
    assert w.state(ended) == (FINISHED, lifecycle.END_REACHED)
    assert w.state(expired) == (CANCELLED, lifecycle.HOLD_EXPIRED)
    assert ("transition", {"from": RESERVED, "to": PROVISIONING, "reason": lifecycle.START_REACHED}) \
        in w.history(started)
    assert ("reservation.provisioning", "info") in w.events()
    before = w.counts()
    assert [o.id for o in w.store.due(T)] == [waiting, started]  # nothing more to advance: nothing written
    assert w.counts() == before
    assert [o.id for o in w.store.due(T + 3600)] == []  # the end: all of them finished
    assert w.state(started)[0] == FINISHED and w.state(waiting)[0] == FINISHED


# ---- mark_active --------------------------------------------------------------------------------------

def test_mark_active_records_the_installation_and_lights_it(w: World) -> None:
    rid = w.reservation(PROVISIONING)
    assert w.store.mark_active(rid, CIRCUIT, RULES, T + 1) is True
    assert w.state(rid) == (ACTIVE, "lit by the controller")
    (inst,) = w.store.installed()
    assert inst == Installation(rid, ACTIVE, (InstalledCircuit(inst.circuits[0].id, "A:3-C:1 via X,Z", "A:3", "C:1",
                                                               10.0, (("X", 1, 3), ("Z", 3, 2))),),
                                (InstalledRule(inst.rules[0].id, "A", 0, 300, 0x4D4C544500000140,
                                               {"in_port": 1, "vlan_vid": 100}, [{"output": 3}]),
                                 InstalledRule(inst.rules[1].id, "C", 0, 300, 2**64 - 1, {"in_port": 1},
                                               [{"output": 3}])))
    with w.db.session() as s:
        (c,) = s.execute(select(Circuit)).scalars()
        assert (c.reservation_id, c.state, [x.active for x in c.xcons]) == (rid, "ACTIVE", [True, True])
        assert [r.cookie for r in s.execute(select(ReservationRule)).scalars()] == ["4d4c544500000140",
                                                                                  "ffffffffffffffff"]
    action, detail = w.history(rid)[-1]
    assert action == "transition" and detail == {"from": PROVISIONING, "to": ACTIVE, "reason": "lit by the controller",
                                                 "circuits": ["A:3-C:1 via X,Z"], "rules": 2, "by": "controller"}
    assert w.events()[-1] == ("reservation.active", "info")
    assert w.store.to_release() == []
    assert w.store.due(T + 1) == []


def test_mark_active_is_idempotent(w: World) -> None:
    """A retried call (the writer thread retries a job whose commit answer was lost) changes nothing,
    and a circuit reported from its other end is the same circuit."""
    rid = w.reservation(PROVISIONING)
    assert w.store.mark_active(rid, [CIRCUIT], RULES, T) is True
    before = w.counts()
    assert w.store.mark_active(rid, [CIRCUIT], RULES, T + 5) is True
    reverse = {**CIRCUIT, "a_end": "C:1", "z_end": "A:3", "xcons": [("Z", 2, 3), ("X", 3, 1)]}
    assert w.store.mark_active(rid, reverse, list(reversed(RULES)), T + 6) is True
    assert w.counts() == before
    twice = w.reservation(PROVISIONING)
    assert w.store.mark_active(twice, [CIRCUIT, reverse], RULES + RULES, T) is True  # repeated in one call
    (inst,) = [i for i in w.store.installed() if i.reservation_id == twice]
    assert len(inst.circuits) == 1 and len(inst.rules) == 2


def test_a_packet_only_path_needs_no_circuit(w: World) -> None:
    rid = w.reservation(PROVISIONING)
    assert w.store.mark_active(rid, None, RULES[:1], T) is True
    (inst,) = w.store.installed()
    assert inst.circuits == () and len(inst.rules) == 1


def test_cancelled_meanwhile_is_refused_but_recorded_for_release(w: World) -> None:
    rid = w.reservation(PROVISIONING)
    w.cancel(rid)
    assert w.store.mark_active(rid, CIRCUIT, RULES, T + 1) is False
    assert w.state(rid)[0] == CANCELLED  # no transition out of a final state
    (inst,) = w.store.to_release()
    assert inst.reservation_id == rid and inst.state == CANCELLED and len(inst.circuits) == 1 and len(inst.rules) == 2
    action, detail = w.history(rid)[-1]
    assert action == "install" and detail["state"] == CANCELLED and detail["by"] == "controller"
    assert w.events()[-1] == ("reservation.installed_late", "warning")
    before = w.counts()
    assert w.store.mark_active(rid, CIRCUIT, RULES, T + 2) is False  # a retry records nothing twice
    assert w.counts() == before


@pytest.mark.parametrize("circuits, rules, message", [
    ({**CIRCUIT, "xcons": []}, RULES, "xcons must be a non-empty list"),
    ({**CIRCUIT, "xcons": [("X", 1)]}, RULES, r"xcon 0 must be \(ots, in_port, out_port\)"),
    ({**CIRCUIT, "xcons": [("X", -1, 2)]}, RULES, "in_port must be an integer"),
    ({**CIRCUIT, "capacity": -1}, RULES, "capacity must be >= 0"),
    ({**CIRCUIT, "capacity": float("nan")}, RULES, "capacity must be a finite number"),
    ({**CIRCUIT, "colour": "red"}, RULES, r"unknown field\(s\) colour"),
    ({k: v for k, v in CIRCUIT.items() if k != "a_end"}, RULES, r"missing field\(s\) a_end"),
    ("A:3-C:1", RULES, "must be a mapping"),
    (CIRCUIT, [{**RULES[0], "cookie": 2**64}], "cookie must be an integer"),
    (CIRCUIT, [{**RULES[0], "priority": 70000}], "priority must be an integer"),
    (CIRCUIT, [{**RULES[0], "priority": True}], "priority must be an integer"),
    (CIRCUIT, [{**RULES[0], "match": [1]}], "match must be a mapping"),
    (CIRCUIT, [{**RULES[0], "actions": "output:3"}], "actions must be a list"),
    (CIRCUIT, [{**RULES[0], "match": {"eth_src": b"\x00\x01"}}], "match must be plain JSON"),
    (CIRCUIT, [{**RULES[0], "actions": [{"output": float("inf")}]}], "actions must be plain JSON"),
    (CIRCUIT, [{**RULES[0], "switch": ""}], "switch must be a string"),
    (CIRCUIT, RULES[0], "rules must be a list"),
    (None, [], "nothing installed"),
])
def test_mark_active_bad_input_writes_nothing(w: World, circuits: Any, rules: Any, message: str) -> None:
    rid = w.reservation(PROVISIONING)
    before = w.counts()
    with pytest.raises(ProvisioningError, match=message):
        w.store.mark_active(rid, circuits, rules, T)
    assert w.counts() == before and w.state(rid)[0] == PROVISIONING


def test_unknown_reservation(w: World) -> None:
    for call in (lambda: w.store.mark_active(999, CIRCUIT, RULES, T), lambda: w.store.mark_failed(999, "x", T),
                 lambda: w.store.mark_released(999, T)):
        with pytest.raises(ProvisioningError, match="no reservation 999"):
            call()
    with pytest.raises(ProvisioningError, match="reservation id must be an integer"):
        w.store.mark_failed(0, "x", T)


# ---- mark_failed --------------------------------------------------------------------------------------

def test_a_long_failure_reason_is_clipped_not_refused(w: World) -> None:
    """A verify step's error lists every rule it waited for: 36 on an 18-switch path (germany50)."""
    from app.db.provisioning import REASON_MAX

    rid = w.reservation(PROVISIONING)
    long = "provisioning failed at step verify (" + "; ".join(f"s{i}/reservation#104 p30001" for i in range(40)) + ")"
    assert len(long) > REASON_MAX
    assert w.store.mark_failed(rid, long, T) is True
    state, reason = w.state(rid)
    assert state == FAILED and len(reason) == REASON_MAX and reason == long[:REASON_MAX - 1] + "…"
    with pytest.raises(ProvisioningError, match="reason must be a non-empty string"):
        w.store.mark_failed(w.reservation(PROVISIONING), "", T)


def test_mark_failed(w: World) -> None:
    rid = w.reservation(PROVISIONING)
    assert w.store.mark_failed(rid, "no free port on OTS Y", T) is True
    assert w.state(rid) == (FAILED, "no free port on OTS Y")
    assert w.history(rid)[-1][1] == {"from": PROVISIONING, "to": FAILED, "reason": "no free port on OTS Y",
                                     "by": "controller"}
    assert w.events()[-1] == ("reservation.failed", "error")
    before = w.counts()
    assert w.store.mark_failed(rid, "again", T + 1) is True  # already FAILED: nothing written
    assert w.counts() == before and w.state(rid)[1] == "no free port on OTS Y"
    done = w.reservation(FINISHED)
    assert w.store.mark_failed(done, "late", T) is False and w.state(done)[0] == FINISHED
    lit = w.reservation(PROVISIONING)
    with pytest.raises(ProvisioningError, match="now must be a finite number"):
        w.store.mark_active(lit, CIRCUIT, RULES, "soon")  # type: ignore[arg-type]
    w.store.mark_active(lit, CIRCUIT, RULES, T)
    assert w.store.mark_failed(lit, "fibre X-Z cut", T + 9) is True  # a lit reservation can break
    assert [i.reservation_id for i in w.store.to_release()] == [lit]
    for bad in ("", 5, None):  # an over-long one is clipped (above)
        with pytest.raises(ProvisioningError, match="reason must be a non-empty string"):
            w.store.mark_failed(done, bad, T)


# ---- release ------------------------------------------------------------------------------------------

def test_release_after_the_end(w: World) -> None:
    rid = w.reservation(PROVISIONING, end=T + 100)
    w.store.mark_active(rid, CIRCUIT, RULES, T)
    assert w.store.mark_released(rid, T + 1) is False  # still running: nothing released
    assert [i.reservation_id for i in w.store.installed()] == [rid]
    w.store.due(T + 100)  # the end time: ACTIVE → FINISHED
    (inst,) = w.store.to_release()
    assert inst.state == FINISHED and inst.circuits[0].xcons == (("X", 1, 3), ("Z", 3, 2))
    assert w.store.to_release(but=[rid]) == []  # being released already: not loaded again
    assert w.store.to_release(but=[rid + 1]) == [inst]
    with pytest.raises(ProvisioningError, match="reservation id"):
        w.store.to_release(but=["x"])  # type: ignore[list-item]
    assert w.store.mark_released(rid, T + 101) is True
    assert w.store.to_release() == [] and w.store.installed() == []
    with w.db.session() as s:
        (c,) = s.execute(select(Circuit)).scalars()
        assert (c.state, c.updated_ts, [x.active for x in c.xcons]) == ("RELEASED", T + 101, [False, False])
        assert {(r.installed, r.removed_ts) for r in s.execute(select(ReservationRule)).scalars()} == {(False, T + 101)}
    action, detail = w.history(rid)[-1]
    assert action == "release" and detail == {"circuits": ["A:3-C:1 via X,Z"], "rules": 2, "by": "controller"}
    assert w.events()[-1] == ("reservation.released", "info")
    before = w.counts()
    assert w.store.mark_released(rid, T + 102) is True  # nothing left: nothing written
    assert w.counts() == before


def test_a_restarted_controller_finds_what_is_installed(w: World) -> None:
    a, b = w.reservation(PROVISIONING, name="a"), w.reservation(PROVISIONING, name="b")
    w.store.mark_active(a, CIRCUIT, RULES, T)
    w.store.mark_active(b, None, RULES[1:], T)
    w.cancel(b)
    again = ProvisioningStore(migrate.open_migrated(w.url))
    try:
        assert [(i.reservation_id, i.state) for i in again.installed()] == [(a, ACTIVE), (b, CANCELLED)]
        assert [i.reservation_id for i in again.to_release()] == [b]
    finally:
        again.db.dispose()


# ---- cancel racing mark_active ------------------------------------------------------------------------

def test_cancel_racing_mark_active_never_loses_the_installation(w: World) -> None:
    """Both take the write lock: whoever is first decides. Either way the reservation ends CANCELLED,
    the history is consistent, and the installation is listed for release."""
    for _ in range(12):  # (both orders occur; which one wins is up to the scheduler)
        rid = w.reservation(PROVISIONING)
        go = threading.Barrier(2)
        result: dict[str, Any] = {}

        def light(rid: int = rid, go: threading.Barrier = go, result: dict = result) -> None:
            go.wait()
            result["lit"] = w.store.mark_active(rid, CIRCUIT, RULES, T)

        def cancel(rid: int = rid, go: threading.Barrier = go) -> None:
            go.wait()
            w.cancel(rid)

        threads = [threading.Thread(target=light), threading.Thread(target=cancel)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert w.state(rid)[0] == CANCELLED
        moves = [(d.get("from"), d.get("to")) for a, d in w.history(rid) if a == "transition"]
        if result["lit"]:
            assert moves == [(PROVISIONING, ACTIVE), (ACTIVE, CANCELLED)]
        else:
            assert moves == [(PROVISIONING, CANCELLED)] and w.history(rid)[-1][0] == "install"
        assert rid in {i.reservation_id for i in w.store.to_release()}
        assert w.store.mark_released(rid, T) is True


# ---- plans --------------------------------------------------------------------------------------------

def _plan(**over: Any) -> dict[str, Any]:
    steps = [{"id": 1, "kind": "xcon", "target": "X:1-X:3", "deps": [], "started_at": T, "finished_at": T + 0.2,
              "ok": True, "error": None},
             {"id": 2, "kind": "flow", "target": "A", "deps": [1], "started_at": T + 0.2, "finished_at": T + 0.3,
              "ok": True, "error": None}]
    plan = {"kind": "provision", "mode": "ordered", "reservation_id": None, "state": "done", "error": None,
            "started_at": T, "finished_at": T + 0.3, "steps": steps}
    plan.update(over)
    return plan


def test_a_plan_is_recorded_while_another_process_writes(w: World) -> None:
    """The web service (another process) holds the write lock while the controller records a plan: the
    record waits for it. Begun as a read, its write found a newer commit and failed at once with
    "database is locked" (germany50 with reservations arriving: two plans lost, their reservations FAILED)."""
    import sqlite3
    import threading

    rid = w.reservation(PROVISIONING)
    held, go = threading.Event(), threading.Event()

    def other_process() -> None:
        con = sqlite3.connect(w.url.removeprefix("sqlite:///"), timeout=10)
        con.execute("BEGIN IMMEDIATE")
        con.execute("UPDATE reservations SET description = 'booked elsewhere' WHERE id = ?", (rid,))
        held.set()
        go.wait(10)
        con.commit()
        con.close()

    th = threading.Thread(target=other_process)
    th.start()
    assert held.wait(10)
    threading.Timer(0.3, go.set).start()  # the other writer commits while the record waits
    try:
        plan_id = w.store.record_plan(_plan(reservation_id=rid))
    finally:
        go.set()
        th.join(10)
    assert [p["id"] for p in w.store.plans(reservation_id=rid)] == [plan_id]


def test_plans_are_recorded_and_listed(w: World) -> None:
    rid = w.reservation(PROVISIONING)
    first = w.store.record_plan(_plan(reservation_id=rid))
    steps = _plan()["steps"]
    steps[1] = {**steps[1], "ok": False, "error": "barrier timeout"}
    second = w.store.record_plan(_plan(reservation_id=rid, state="rolled_back", error="flow on A failed",
                                       steps=steps, mode="one_shot"))
    other = w.store.record_plan(_plan(kind="move"))
    assert [p["id"] for p in w.store.plans()] == [other, second, first]
    got = w.store.plans(limit=5, reservation_id=rid)
    assert [p["id"] for p in got] == [second, first]
    assert got[0] == {"id": second, "kind": "provision", "mode": "one_shot", "reservation_id": rid,
                      "state": "rolled_back", "error": "flow on A failed", "started_at": T, "finished_at": T + 0.3,
                      "steps": steps}
    assert [p["id"] for p in w.store.plans(limit=1)] == [other]
    assert w.events()[-1] == ("plan.rolled_back", "warning")  # done plans are no event, the others are
    assert [k for k, _ in w.events()].count("plan.rolled_back") == 1 and "plan.done" not in dict(w.events())


@pytest.mark.parametrize("over, message", [
    ({"mode": "stepwise"}, "plan mode must be one of ordered, one_shot"),
    ({"state": "half"}, "plan state must be one of done, failed, rolled_back"),
    ({"state": "failed"}, "plan error .*required for a failed plan"),
    ({"kind": ""}, "plan kind must be a string"),
    ({"finished_at": T - 1}, "finished_at is before started_at"),
    ({"started_at": "now"}, "started_at must be a finite number"),
    ({"reservation_id": 999}, "no reservation 999"),
    ({"colour": 1}, r"unknown field\(s\) colour"),
    ({"steps": "all"}, "steps must be a list"),
    ({"steps": [{"id": 1}]}, r"missing field\(s\)"),
    ({"steps": [*_plan()["steps"], _plan()["steps"][0]]}, "id must be a unique"),
    ({"steps": [{**_plan()["steps"][1], "deps": [7]}]}, r"deps name unknown step\(s\) \[7\]"),
    ({"steps": [{**_plan()["steps"][0], "ok": "yes"}]}, "ok must be true, false or null"),
    ({"started_at": float("nan")}, "started_at must be a finite number"),
])
def test_bad_plans_write_nothing(w: World, over: dict[str, Any], message: str) -> None:
    before = w.counts()
    with pytest.raises(ProvisioningError, match=message):
        w.store.record_plan(_plan(**over))
    assert w.counts() == before


def test_plans_limit_is_checked(w: World) -> None:
    for bad in (0, 1001, "5"):
        with pytest.raises(ProvisioningError, match="limit must be an integer in 1..1000"):
            w.store.plans(limit=bad)  # type: ignore[arg-type]


# ---- set_provisioned (elastic reservations) ------------------------------------------------------------

def test_set_provisioned_records_the_current_bandwidth_never_beyond_the_grant(w: World) -> None:
    rid = w.reservation(ACTIVE, mode="elastic")  # bandwidth 2.0 admitted
    assert w.store.set_provisioned(rid, 1.25, T) is True
    assert w.store.set_provisioned(rid, 2.0, T + 1) is True
    before = w.counts()
    assert w.store.set_provisioned(rid, 2.0, T + 2) is True and w.counts() == before  # unchanged: nothing written
    with w.db.session() as s:
        assert s.get(Reservation, rid).provisioned_bw == 2.0
    assert [e for e in w.events() if e[0] == "reservation.resized"] == [("reservation.resized", "info")] * 2
    with pytest.raises(ProvisioningError, match="admitted bandwidth"):
        w.store.set_provisioned(rid, 2.5, T + 3)
    with pytest.raises(ProvisioningError):
        w.store.set_provisioned(rid, 0.0, T + 3)
    done = w.reservation(FINISHED, mode="elastic")
    assert w.store.set_provisioned(done, 1.0, T) is False
