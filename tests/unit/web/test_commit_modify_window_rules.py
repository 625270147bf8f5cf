"""Review fixes of the reservation life cycle: no commit after the window ended, a committed
reservation keeps its path on modify, and the what-if query applies the same window rules as create."""
from __future__ import annotations

import pytest

from tests.lib.provisioning import light
from tests.unit.web.conftest import T0, body, counts, iso

API = "/api/v1/reservations"
DAY = 86400.0


def _create(client, users, **over):  # noqa: ANN001, ANN003, ANN201
    r = client.post(API, json=body(**over), headers=users.h("alice"))
    assert r.status_code == 201, r.get_json()
    return r.get_json()


def _commit(client, users, rid: int):  # noqa: ANN001, ANN202
    return client.post(f"{API}/{rid}/commit", headers=users.h("alice"))


# ---------------------------------------------------------------- 1. commit after the window ended
@pytest.mark.parametrize("after_end", [0.0, 60.0])
def test_commit_after_the_window_ended_is_refused(client, users, clock, app, after_end: float) -> None:  # noqa: ANN001
    """The hold (300 s) outlives a short window: committing then would book nothing and go
    RESERVED → FINISHED. It is a 409 saying why, and nothing is written."""
    res = _create(client, users, start=iso(T0), end=iso(T0 + 120))
    clock.t = T0 + 120 + after_end  # hold still valid (expires at T0 + 300); [start, end) is over
    before = counts(app)
    r = _commit(client, users, res["id"])
    assert r.status_code == 409, r.get_json()
    err = r.get_json()["error"]
    assert err["state"] == "ENDED" and err["field"] == "end"
    assert "ended" in err["message"] and iso(T0 + 120) in err["message"]
    assert counts(app) == before
    got = client.get(f"{API}/{res['id']}", headers=users.h("alice")).get_json()
    assert got["state"] == "HELD"
    history = client.get(f"{API}/{res['id']}/history", headers=users.h("alice")).get_json()["items"]
    assert [h["action"] for h in history] == ["create"]


def test_commit_just_before_the_end_still_works(client, users, clock) -> None:  # noqa: ANN001
    res = _create(client, users, start=iso(T0), end=iso(T0 + 120))
    clock.t = T0 + 119
    r = _commit(client, users, res["id"])
    assert r.status_code == 200 and r.get_json()["state"] == "RESERVED"


def test_commit_after_hold_expiry_is_still_expired(client, users, clock, app) -> None:  # noqa: ANN001
    """Hold lapsed and window ended: the hold is the first reason given."""
    res = _create(client, users, start=iso(T0), end=iso(T0 + 120))
    clock.t = T0 + 301
    before = counts(app)
    r = _commit(client, users, res["id"])
    assert r.status_code == 409 and r.get_json()["error"]["state"] == "EXPIRED"
    assert counts(app) == before


# ---------------------------------------------------------------- 2. a committed reservation keeps its path
def _route_taken_later(client, users) -> tuple[dict, dict]:  # noqa: ANN001
    """r1 (committed, [T0+600, T0+4200)) and r2 (committed, right after it) on the same optical route;
    the other route out of A is free throughout, so a re-routing PCE could move r1 there."""
    r1 = _create(client, users, name="r1")
    assert _commit(client, users, r1["id"]).status_code == 200
    r2 = _create(client, users, name="r2", start=iso(T0 + 4200), end=iso(T0 + 8000))
    assert _commit(client, users, r2["id"]).status_code == 200
    assert r2["path"]["oports"] == r1["path"]["oports"]  # back to back, so the same (shortest) route
    return r1, r2


@pytest.mark.parametrize("state, t", [("RESERVED", T0 + 100), ("PROVISIONING", T0 + 700), ("ACTIVE", T0 + 700)])
def test_modify_of_committed_reservation_is_checked_on_its_current_path(client, users, clock, app, state: str,  # noqa: ANN001
                                                                       t: float) -> None:
    r1, r2 = _route_taken_later(client, users)
    clock.t = t
    if state == "ACTIVE":
        assert light(app.config["DATABASE"], r1["id"], t)
    assert client.get(f"{API}/{r1['id']}", headers=users.h("alice")).get_json()["state"] == state
    before = counts(app)
    r = client.patch(f"{API}/{r1['id']}", json={"end": iso(T0 + 6000)}, headers=users.h("alice"))
    assert r.status_code == 409, r.get_json()  # before the fix: 200, moved to the other route
    err = r.get_json()["error"]
    assert err["field"] == "end" and err["bottleneck"] in r1["path"]["oports"] and err["available"] == 0
    assert f"booked whole by {r2['id']}" in err["message"] and "keeps its path" in err["message"]
    assert counts(app) == before
    got = client.get(f"{API}/{r1['id']}", headers=users.h("alice")).get_json()
    assert got["path"]["edges"] == r1["path"]["edges"] and got["end"] == r1["end"] and got["state"] == state


def test_modify_of_active_reservation_that_fits_keeps_the_same_path(client, users, clock, app) -> None:  # noqa: ANN001
    r1, _ = _route_taken_later(client, users)
    clock.t = T0 + 700
    assert light(app.config["DATABASE"], r1["id"], clock.t)
    r = client.patch(f"{API}/{r1['id']}", json={"bandwidth": 9}, headers=users.h("alice"))
    assert r.status_code == 200, r.get_json()
    got = r.get_json()
    assert got["bandwidth"] == 9 and got["state"] == "ACTIVE"
    for key in ("nodes", "edges", "oports", "xcons"):
        assert got["path"][key] == r1["path"][key]
    assert got["path"]["available"] == pytest.approx(r1["path"]["available"])  # its own booking not counted


def test_modify_of_active_reservation_beyond_its_path_names_the_element(client, users, clock, app) -> None:  # noqa: ANN001
    """Adaptation links and optical ports of Fig. 2 carry 10 Mbit/s (lab scale): growing past that on
    the current path is refused naming one of its own elements, with the request's bandwidth field."""
    r1 = _create(client, users, name="r1")
    _commit(client, users, r1["id"])
    clock.t = T0 + 700
    before = counts(app)
    r = client.patch(f"{API}/{r1['id']}", json={"bandwidth": 11}, headers=users.h("alice"))
    assert r.status_code == 409
    err = r.get_json()["error"]
    assert err["field"] == "bandwidth"
    assert err["bottleneck"] in r1["path"]["edges"] + r1["path"]["oports"]
    assert err["available"] == pytest.approx(10)
    assert counts(app) == before


def test_modify_of_held_reservation_may_reroute(client, users) -> None:  # noqa: ANN001
    """A HELD reservation is still a draft: a modify is admitted like a new request and the new path
    is shown before it is committed (documented in docs/rest.md)."""
    r1 = _create(client, users, name="r1")
    r2 = _create(client, users, name="r2", start=iso(T0 + 4200), end=iso(T0 + 8000))
    assert r2["path"]["oports"] == r1["path"]["oports"]
    r = client.patch(f"{API}/{r1['id']}", json={"end": iso(T0 + 6000)}, headers=users.h("alice"))
    assert r.status_code == 200, r.get_json()
    assert not set(r.get_json()["path"]["oports"]) & set(r2["path"]["oports"])


# ---------------------------------------------------------------- 3. what-if uses the create window rules
WINDOWS = {
    "end before start": (T0 + 7200, T0 + 3600, "end"),
    "end in the past": (T0 - 200, T0 - 100, "end"),
    "longer than 366 days": (T0 + 600, T0 + 600 + 367 * DAY, "end"),
    "start too far in the past": (T0 - 1000, T0 + 600, "start"),
}


@pytest.mark.parametrize("case", sorted(WINDOWS))
def test_what_if_rejects_the_windows_create_rejects(client, users, app, case: str) -> None:  # noqa: ANN001
    start, end, field = WINDOWS[case]
    before = counts(app)
    created = client.post(API, json=body(start=iso(start), end=iso(end)), headers=users.h("alice"))
    what_if = client.get("/api/v1/available", headers=users.h("alice"),
                         query_string={"src": "A:1", "dst": "C:3", "start": iso(start), "end": iso(end)})
    assert created.status_code == 400 and what_if.status_code == 400, what_if.get_json()
    assert what_if.get_json()["error"]["field"] == field
    assert what_if.get_json()["error"]["message"] == created.get_json()["error"]["message"]
    assert counts(app) == before


def test_what_if_accepts_a_valid_window(client, users) -> None:  # noqa: ANN001
    r = client.get("/api/v1/available", headers=users.h("alice"),
                   query_string={"src": "A:1", "dst": "C:3", "end": iso(T0 + 366 * DAY)})
    assert r.status_code == 200 and r.get_json()["available"] > 0
