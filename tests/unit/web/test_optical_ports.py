"""An optical port is used by one reservation at a time, whatever the amount asked; bandwidth has a
documented minimum (``MIN_BANDWIDTH``), in the API and in the UI form.

Regression: reservation A (6 Mbit/s) held X:1, X:3, Z:3, Z:2; a request for 1e-9 Mbit/s got 201 on
the same ports with ``"available": 0.0``.
"""
from __future__ import annotations

import pytest

from app.web.validation import MIN_BANDWIDTH
from tests.unit.web.conftest import body, counts, login
from tests.unit.web.test_ui import _form

API = "/api/v1/reservations"


def _oports_in_use(client, users) -> dict[str, list[int]]:  # noqa: ANN001
    """Optical port -> ids of the reservations whose path holds it."""
    used: dict[str, list[int]] = {}
    for it in client.get(f"{API}?limit=500", headers=users.h("root")).get_json()["items"]:
        for op in it["path"]["oports"]:
            used.setdefault(op, []).append(it["id"])
    return used


def test_taken_optical_ports_are_never_shared(client, users, app) -> None:  # noqa: ANN001
    a = client.post(API, json=body(name="A", bandwidth=6), headers=users.h("alice"))
    assert a.status_code == 201, a.get_json()
    assert a.get_json()["path"]["oports"] == ["X:1", "X:3", "Z:3", "Z:2"]

    for tiny in (1e-9, 1e-12):  # the request of the report: now refused before admission
        before = counts(app)
        r = client.post(API, json=body(name="tiny", bandwidth=tiny), headers=users.h("bob"))
        assert r.status_code == 400, r.get_json()
        err = r.get_json()["error"]
        assert err["field"] == "bandwidth" and f"at least {MIN_BANDWIDTH:g} Mbit/s" in err["message"]
        assert counts(app) == before  # nothing written

    # the smallest request allowed takes the other optical route, never A's ports ...
    b = client.post(API, json=body(name="B", bandwidth=MIN_BANDWIDTH), headers=users.h("bob"))
    assert b.status_code == 201, b.get_json()
    assert not set(b.get_json()["path"]["oports"]) & {"X:1", "X:3", "Z:3", "Z:2"}
    assert b.get_json()["path"]["available"] > 0
    # ... and once both routes are held, it is refused naming a port booked whole
    before = counts(app)
    c = client.post(API, json=body(name="C", bandwidth=MIN_BANDWIDTH), headers=users.h("bob"))
    assert c.status_code == 409, c.get_json()
    err = c.get_json()["error"]
    assert err["bottleneck"] in {"X:1", "X:3", "Z:3", "Z:2", *b.get_json()["path"]["oports"]}
    assert err["available"] == 0.0 and "booked whole by" in err["message"]
    assert counts(app) == before
    assert all(len(ids) == 1 for ids in _oports_in_use(client, users).values())


def test_modify_below_minimum_is_refused(client, users) -> None:  # noqa: ANN001
    rid = client.post(API, json=body(), headers=users.h("alice")).get_json()["id"]
    r = client.patch(f"{API}/{rid}", json={"bandwidth": 1e-9}, headers=users.h("alice"))
    assert r.status_code == 400 and r.get_json()["error"]["field"] == "bandwidth"
    assert client.get(f"{API}/{rid}", headers=users.h("alice")).get_json()["bandwidth"] == 2.0


def test_openapi_states_the_minimum(client) -> None:  # noqa: ANN001
    schema = client.get("/api/v1/openapi.json").get_json()
    bw = schema["components"]["schemas"]["ReservationCreate"]["properties"]["bandwidth"]
    assert bw["minimum"] == MIN_BANDWIDTH and not bw.get("exclusiveMinimum")


@pytest.mark.parametrize("value", ["0.0001", "1e-9"])
def test_form_below_minimum_names_it(ui, app, value) -> None:  # noqa: ANN001, F811
    login(ui)
    before = counts(app)
    r = ui.post("/reservations/new", data=_form(ui, bandwidth=value))
    page = r.get_data(as_text=True)
    assert r.status_code == 400 and f"at least {MIN_BANDWIDTH:g} Mbit/s" in page
    assert counts(app) == before
