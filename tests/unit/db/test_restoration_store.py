"""ProvisioningStore's failure path: ACTIVE → RESTORING → ACTIVE on a new path (the old installation
recorded as removed, the new one installed, the path replaced, a restorations row) or → DEGRADED;
refused for a reservation that is not lit; bad input refused before anything is written."""
from __future__ import annotations

import pytest

from app.db.provisioning import ProvisioningError
from app.db.states import ACTIVE, CANCELLED, DEGRADED, FINISHED, PROVISIONING, RESERVED, RESTORING
from tests.unit.db.test_provisioning import CIRCUIT, PATH, RULES, T, World, w  # noqa: F401 - the fixture

NEW_CIRCUIT = {"name": "A:3-C:1 via X,Y,Z", "a_end": "A:3", "z_end": "C:1", "capacity": 10.0,
               "xcons": [("X", 1, 2), ("Y", 1, 4), ("Z", 1, 2)]}
NEW_PATH = {**PATH, "edges": ["adaptation:A:3-X:1", "xcon:X:1-X:2", "optical:X:2-Y:1", "xcon:Y:1-Y:4",
                              "optical:Y:4-Z:1", "xcon:Z:1-Z:2", "adaptation:C:1-Z:2"]}
TRY = {"cause": "fibre X:3-Z:3 failed", "detected_ts": T + 1, "started_ts": T + 1.01, "attempt": 1,
       "old_path": PATH["edges"], "new_path": NEW_PATH["edges"]}


def lit(w: World) -> int:  # noqa: F811 - w is the fixture
    rid = w.reservation(PROVISIONING)
    assert w.store.mark_active(rid, CIRCUIT, RULES, T)
    return rid


def test_restoring_then_restored_on_the_new_path(w: World) -> None:  # noqa: F811
    rid = lit(w)
    assert w.store.mark_restoring(rid, "fibre X:3-Z:3 failed", T + 1) is True
    assert w.state(rid) == (RESTORING, "fibre X:3-Z:3 failed")
    assert w.store.mark_restoring(rid, "again", T + 1) is True  # idempotent: nothing written
    assert w.state(rid)[1] == "fibre X:3-Z:3 failed"
    assert w.store.mark_restored(rid, [NEW_CIRCUIT], RULES, NEW_PATH, TRY, T + 1.5) is True
    state, reason = w.state(rid)
    assert state == ACTIVE and "restored on a new path after fibre X:3-Z:3 failed" in reason
    (inst,) = w.store.installed()
    assert [c.xcons for c in inst.circuits] == [(("X", 1, 2), ("Y", 1, 4), ("Z", 1, 2))]
    assert len(inst.rules) == len(RULES)  # the same rules re-recorded once, the old ones removed
    from sqlalchemy import select

    from app.db.models import Reservation
    with w.db.session() as s:
        assert s.execute(select(Reservation.path)).scalar_one()["edges"] == NEW_PATH["edges"]
    (row,) = w.store.restorations(rid)
    assert row["outcome"] == "restored" and row["old_path"] == PATH["edges"] and row["took_s"] == 0.5
    assert ("reservation.restoring", "warning") in w.events() and ("reservation.active", "info") in w.events()


def test_degraded_holds_nothing_and_is_retried(w: World) -> None:  # noqa: F811
    rid = lit(w)
    assert w.store.mark_restoring(rid, "fibre X:3-Z:3 failed", T + 1)
    assert w.store.mark_degraded(rid, "no path left: every fibre from X is down", {**TRY, "new_path": []}, T + 2)
    assert w.state(rid) == (DEGRADED, "no path left: every fibre from X is down")
    assert w.store.installed() == []  # the dark circuit was taken down
    assert w.store.mark_restoring(rid, "retry 2", T + 4) is True  # DEGRADED → RESTORING
    assert w.store.mark_restored(rid, [NEW_CIRCUIT], RULES, None, {**TRY, "attempt": 2}, T + 5)
    assert w.state(rid)[0] == ACTIVE
    assert [r["outcome"] for r in w.store.restorations(rid)] == ["restored", "degraded"]


def test_only_lit_reservations_are_restored(w: World) -> None:  # noqa: F811
    for state in (RESERVED, PROVISIONING, FINISHED, CANCELLED):
        rid = w.reservation(state)
        assert w.store.mark_restoring(rid, "fibre cut", T) is False
        assert w.state(rid)[0] == state
    rid = lit(w)
    assert w.store.mark_degraded(rid, "x", TRY, T) is False  # not RESTORING: nothing written
    assert w.state(rid)[0] == ACTIVE and w.store.restorations() == []


def test_cancelled_while_restoring_keeps_the_new_installation_for_release(w: World) -> None:  # noqa: F811
    rid = lit(w)
    w.store.mark_restoring(rid, "fibre cut", T + 1)
    w.cancel(rid, T + 1.2)
    assert w.store.mark_restored(rid, [NEW_CIRCUIT], RULES, NEW_PATH, TRY, T + 1.5) is False
    (inst,) = w.store.to_release()
    assert {c.xcons for c in inst.circuits} >= {(("X", 1, 2), ("Y", 1, 4), ("Z", 1, 2))}


def test_bad_restoration_input_writes_nothing(w: World) -> None:  # noqa: F811
    rid = lit(w)
    w.store.mark_restoring(rid, "fibre cut", T + 1)
    before = w.counts()
    for bad in ({**TRY, "cause": ""}, {**TRY, "bogus": 1}, {k: v for k, v in TRY.items() if k != "detected_ts"},
                {**TRY, "old_path": "X:3"}, {**TRY, "attempt": 0}):
        with pytest.raises(ProvisioningError):
            w.store.mark_restored(rid, [NEW_CIRCUIT], RULES, NEW_PATH, bad, T + 2)
    with pytest.raises(ProvisioningError):
        w.store.mark_restored(rid, [], [], NEW_PATH, TRY, T + 2)
    assert w.counts() == before and w.state(rid)[0] == RESTORING


def test_orders_and_what_to_restore(w: World) -> None:  # noqa: F811
    a, b, c = lit(w), lit(w), lit(w)
    w.store.mark_restoring(a, "fibre cut", T + 1)
    w.store.mark_restoring(b, "fibre cut", T + 1)
    w.store.mark_degraded(b, "no path", TRY, T + 2)
    assert [o.id for o in w.store.to_restore(T + 3)] == [a, b]
    assert w.store.to_restore(T + 4000) == []  # their windows ended
    (oc,) = w.store.orders([c, 99999])
    assert (oc.id, oc.src, oc.dst, oc.protection, oc.path["edges"]) == (c, "A:1", "C:3", "none", PATH["edges"])


def test_mark_active_with_the_path_lit_replaces_the_stored_one(w: World) -> None:  # noqa: F811
    from sqlalchemy import select

    from app.db.models import Reservation
    rid = w.reservation(PROVISIONING)
    assert w.store.mark_active(rid, CIRCUIT, RULES, T, NEW_PATH)
    with w.db.session() as s:
        assert s.execute(select(Reservation.path).where(Reservation.id == rid)).scalar_one()["edges"] == NEW_PATH["edges"]
    with pytest.raises(ProvisioningError):
        w.store.mark_active(rid, CIRCUIT, RULES, T, ["not", "a", "mapping"])


def test_reverted_to_the_original_path_stays_active_with_a_row_and_an_event(w: World) -> None:  # noqa: F811
    rid = lit(w)
    w.store.mark_restoring(rid, "fibre X:3-Z:3 failed", T + 1)
    assert w.store.mark_restored(rid, [NEW_CIRCUIT], RULES, {**NEW_PATH, "original": PATH}, TRY, T + 1.5)
    back = {"cause": "revert", "detected_ts": T + 10, "started_ts": T + 40, "old_path": NEW_PATH["edges"],
            "new_path": PATH["edges"]}
    assert w.store.mark_reverted(rid, [CIRCUIT], RULES, PATH, back, T + 40.5) is True
    state, reason = w.state(rid)
    assert state == ACTIVE and "reverted to its original path" in reason
    (inst,) = w.store.installed()
    assert [c.xcons for c in inst.circuits] == [(("X", 1, 3), ("Z", 3, 2))]  # the restoration path removed
    from sqlalchemy import select

    from app.db.models import Reservation
    with w.db.session() as s:
        assert s.execute(select(Reservation.path)).scalar_one() == PATH  # no "original" left
    row = w.store.restorations(rid)[0]
    assert row["outcome"] == "reverted" and row["cause"] == "revert" and row["took_s"] == 30.5
    assert ("reservation.reverted", "info") in w.events()


def test_a_refused_revert_is_a_row_and_a_warning_and_bookings_of_others_are_found(w: World) -> None:  # noqa: F811
    rid = lit(w)
    other = w.reservation(ACTIVE, start=T + 100)  # books the same PATH later in our window
    w.reservation(FINISHED)  # over: books nothing
    assert w.store.booked_elsewhere(rid, ["X:1", "Y:1"], T) == {"X:1": other}
    assert w.store.booked_elsewhere(rid, ["Y:1"], T) == {}
    back = {"cause": "revert", "detected_ts": T + 10, "started_ts": T + 40, "old_path": [], "new_path": PATH["edges"]}
    assert w.store.revert_refused(rid, f"X:1 booked by reservation {other}", back, T + 40) is True
    assert w.state(rid)[0] == ACTIVE
    row = w.store.restorations(rid)[0]
    assert row["outcome"] == "revert_failed" and "booked" in row["reason"]
    assert ("reservation.revert_failed", "warning") in w.events()
