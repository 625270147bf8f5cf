"""Every rejected request: a 4xx JSON error naming the field, and nothing written (rows + audit + events)."""
from __future__ import annotations

import pytest

from tests.unit.web.conftest import T0, body, counts, iso

API = "/api/v1/reservations"

CASES = [
    # (id, request body or raw bytes, expected status, expected field)
    ("malformed-json", b'{"name": "x",', 400, "body"),
    ("nan", b'{"name": "x", "bandwidth": NaN}', 400, "body"),
    ("empty-body", b"", 400, "body"),
    ("not-an-object", [1, 2], 400, "body"),
    ("missing-name", body(name=...), 400, "name"),
    ("missing-src", body(src=...), 400, "src"),
    ("missing-dst", body(dst=...), 400, "dst"),
    ("missing-bandwidth", body(bandwidth=...), 400, "bandwidth"),
    ("missing-end", body(end=...), 400, "end"),
    ("unknown-field", body(colour="red"), 400, "colour"),
    ("empty-name", body(name=""), 400, "name"),
    ("name-not-string", body(name=5), 400, "name"),
    ("negative-bandwidth", body(bandwidth=-5), 400, "bandwidth"),
    ("zero-bandwidth", body(bandwidth=0), 400, "bandwidth"),
    ("string-bandwidth", body(bandwidth="10"), 400, "bandwidth"),
    ("bool-bandwidth", body(bandwidth=True), 400, "bandwidth"),
    ("absurd-bandwidth", body(bandwidth=1e12), 400, "bandwidth"),
    ("1-tbps-on-small-network", body(bandwidth=1e6), 409, "bandwidth"),
    ("end-before-start", body(start=iso(T0 + 4000), end=iso(T0 + 3000)), 400, "end"),
    ("end-equals-start", body(start=iso(T0 + 4000), end=iso(T0 + 4000)), 400, "end"),
    ("start-in-the-past", body(start=iso(T0 - 3600), end=iso(T0 + 3600)), 400, "start"),
    ("end-in-the-past", body(start=iso(T0 - 7200), end=iso(T0 - 3600)), 400, "end"),
    ("window-too-long", body(end=iso(T0 + 400 * 86400)), 400, "end"),
    ("bad-date", body(end="tomorrow"), 400, "end"),
    ("end-after-9999", body(end="9999-12-31T23:59:59-12:00"), 400, "end"),  # no UTC ISO form: was a 500
    ("start-far-future", body(start="9999-12-31T00:00:00Z", end="9999-12-31T01:00:00Z"), 400, "start"),
    ("bad-utc-offset", body(start="2030-03-17T18:00:00+25:00"), 400, "start"),
    ("date-not-string", body(start=12345), 400, "start"),
    ("unknown-switch", body(src="Q:1"), 400, "src"),
    ("unknown-port", body(dst="C:77"), 400, "dst"),
    ("optical-node-endpoint", body(dst="X:1"), 400, "dst"),
    ("malformed-endpoint", body(src="A-1"), 400, "src"),
    ("same-endpoints", body(dst="A:1"), 400, "dst"),
    ("same-switch", body(dst="A:2"), 400, "dst"),
    ("vlan-out-of-range", body(src_vlan=5000), 400, "src_vlan"),
    ("vlan-not-int", body(dst_vlan="10"), 400, "dst_vlan"),
    ("bad-mode", body(mode="turbo"), 400, "mode"),
    ("ero-not-list", body(ero="A X Z C"), 400, "ero"),
    ("ero-unknown-node", body(ero=["A", "NOPE", "C"]), 400, "ero"),
    ("ero-impossible", body(ero=["C", "A"]), 409, "ero"),
]


@pytest.mark.parametrize(("payload", "status", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_create_rejected(client, users, app, payload, status, field) -> None:  # noqa: ANN001
    # one committed reservation exists so "nothing written" also covers the booking tables
    ok = client.post(API, json=body(name="existing", src="A:2", dst="C:4", bandwidth=1), headers=users.h("alice"))
    assert ok.status_code == 201
    before = counts(app)
    if isinstance(payload, bytes):
        r = client.post(API, data=payload, content_type="application/json", headers=users.h("alice"))
    else:
        r = client.post(API, json=payload, headers=users.h("alice"))
    assert r.status_code == status, r.get_json()
    err = r.get_json()["error"]
    assert err["field"] == field and err["status"] == status and err["message"]
    assert counts(app) == before


def test_absurd_request_names_the_bottleneck(client, users) -> None:  # noqa: ANN001
    r = client.post(API, json=body(bandwidth=1e6), headers=users.h("alice"))
    err = r.get_json()["error"]
    assert r.status_code == 409 and err["bottleneck"] and err["available"] is not None
    assert err["bottleneck"] in err["message"]


@pytest.mark.parametrize(("headers", "ctype"), [
    ({}, "application/json"),
    ({"Authorization": "Bearer wrong"}, "application/json"),
    ({"Authorization": "Basic abc"}, "application/json"),
])
def test_auth_required(client, users, app, headers, ctype) -> None:  # noqa: ANN001
    before = counts(app)
    r = client.post(API, json=body(), headers=headers)
    assert r.status_code == 401 and r.get_json()["error"]["field"] == "Authorization"
    assert "Bearer" in r.headers["WWW-Authenticate"]
    assert counts(app) == before


def test_wrong_content_type(client, users, app) -> None:  # noqa: ANN001
    before = counts(app)
    r = client.post(API, data="name=x", content_type="application/x-www-form-urlencoded", headers=users.h("alice"))
    assert r.status_code == 415 and r.get_json()["error"]["field"] == "Content-Type"
    assert counts(app) == before


def test_session_cookie_cannot_mutate_api(client, users, app) -> None:  # noqa: ANN001
    """The API accepts cookies for reads only, so no cross-site form can create reservations."""
    with client.session_transaction() as sess:
        sess["user_id"] = 1
    assert client.get(API).status_code == 200
    before = counts(app)
    assert client.post(API, json=body()).status_code == 401
    assert counts(app) == before


@pytest.mark.parametrize(("path", "payload", "field"), [
    ("", {"bandwidth": -1}, "bandwidth"),
    ("", {"bandwidth": 1e6}, "bandwidth"),
    ("", {}, "body"),
    ("", {"end": "x"}, "end"),
    ("", {"start": iso(T0)}, "start"),
    ("", {"end": "9999-12-31T23:59:59-12:00"}, "end"),
    ("", {"bandwidth": "5"}, "bandwidth"),
    ("/commit", {"x": 1}, "body"),
    ("/fail", {"why": "x"}, "reason"),
])
def test_mutation_rejected(client, users, app, path, payload, field) -> None:  # noqa: ANN001
    rid = client.post(API, json=body(), headers=users.h("alice")).get_json()["id"]
    before = counts(app)
    who = "root" if path == "/fail" else "alice"
    method = client.patch if path == "" else client.post
    r = method(f"{API}/{rid}{path}", json=payload, headers=users.h(who))
    assert 400 <= r.status_code < 500 and r.get_json()["error"]["field"] == field, r.get_json()
    assert counts(app) == before


@pytest.mark.parametrize(("query", "field"), [
    ("state=BOGUS", "state"), ("limit=0", "limit"), ("limit=x", "limit"), ("offset=-1", "offset"),
    ("min_bandwidth=-3", "min_bandwidth"), ("from=yesterday", "from"), ("colour=red", "colour"),
    (f"from={iso(T0 + 10)}&to={iso(T0)}", "to"),
])
def test_list_rejects_bad_filters(client, users, query, field) -> None:  # noqa: ANN001
    r = client.get(f"{API}?{query}", headers=users.h("alice"))
    assert r.status_code == 400 and r.get_json()["error"]["field"] == field


def test_bidi_and_control_characters_are_refused_in_names(client, users, app) -> None:  # noqa: ANN001
    """Issue 14 item 8: a right-to-left override made a name display as something else."""
    from app.web.auth import create_user
    from app.web.errors import ApiError

    h = {"Authorization": f"Bearer {users.alice}"}
    for name in ("invoice\u202egnp.exe", "a\u2066b", "bell\x07"):
        r = client.post("/api/v1/reservations", json=body(name=name), headers=h)
        assert r.status_code == 400 and r.get_json()["error"]["field"] == "name", name
        assert "must not contain" in r.get_json()["error"]["message"]
    r = client.post("/api/v1/reservations", json=body(name="ok", description="two\nlines\tand tab"), headers=h)
    assert r.status_code == 201
    with app.extensions["mlte"].db.session() as s, pytest.raises(ApiError, match="U\\+202E"):
        create_user(s, "ad\u202emin")


@pytest.mark.parametrize("state", ["BOGUS", "active", "HELD"])
def test_circuit_list_rejects_an_unknown_state(client, users, state) -> None:  # noqa: ANN001
    """Issue 26 item 4: ``/circuits?state=BOGUS`` answered 200 with an empty list, as if none existed."""
    r = client.get(f"/api/v1/circuits?state={state}", headers=users.h("alice"))
    err = r.get_json()["error"]
    assert r.status_code == 400 and err["field"] == "state"
    assert err["message"] == f"state must be one of ACTIVE, RELEASED, got {state!r}"
    for ok in ("ACTIVE", "RELEASED"):
        assert client.get(f"/api/v1/circuits?state={ok}", headers=users.h("alice")).status_code == 200
