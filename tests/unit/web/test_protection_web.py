"""1+1 protection in the reservation service: REST create/modify/what-if, admission of both paths, the form."""
from __future__ import annotations

from tests.unit.web.conftest import T0, body, csrf, iso, login

API = "/api/v1"


def create(client, users, **over):  # noqa: ANN001, ANN003, ANN201
    return client.post(f"{API}/reservations", json=body(**over), headers=users.h("alice"))


def test_a_1_plus_1_reservation_stores_and_books_both_paths(client, users) -> None:  # noqa: ANN001
    r = create(client, users, protection="1+1")
    assert r.status_code == 201, r.get_json()
    res = r.get_json()
    assert res["protection"] == "1+1"
    work, prot = res["path"], res["path"]["protection"]
    assert work["nodes"][0] == prot["nodes"][0] == "A" and work["nodes"][-1] == prot["nodes"][-1] == "C"
    assert not set(work["oports"]) & set(prot["oports"])  # no OTS port (hence no fibre) in common
    assert {e for e in work["edges"] if e.startswith("adaptation:A:")} != {
        e for e in prot["edges"] if e.startswith("adaptation:A:")}
    got = client.get(f"{API}/reservations/{res['id']}", headers=users.h("alice")).get_json()
    assert got["path"]["protection"] == prot
    # both paths are booked: A's two uplinks are held, so nothing else fits from A to C in the window
    r = create(client, users, src="A:2", dst="C:4", bandwidth=1.0)
    assert r.status_code == 409, r.get_json()
    hist = client.get(f"{API}/reservations/{res['id']}/history", headers=users.h("alice")).get_json()["items"]
    assert hist[0]["detail"]["protection_path"] == prot["nodes"]


def test_unprotected_is_the_default_and_bad_values_are_400(client, users) -> None:  # noqa: ANN001
    res = create(client, users).get_json()
    assert res["protection"] == "none" and "protection" not in res["path"]
    for bad in ("1:1", "", None, 2, "1+1 "):
        r = create(client, users, protection=bad)
        assert r.status_code == 400, bad
        err = r.get_json()["error"]
        assert err["field"] == "protection" and "protection must be one of 'none', '1+1'" in err["message"]


def test_no_disjoint_protection_is_a_409_naming_protection(client, users) -> None:  # noqa: ANN001
    assert create(client, users, src="A:2", dst="C:4", bandwidth=1.0).status_code == 201  # takes one uplink of A
    r = create(client, users, protection="1+1")
    assert r.status_code == 409
    err = r.get_json()["error"]
    assert err["field"] == "protection" and "1+1 protection" in err["message"]
    assert create(client, users).status_code == 201  # unprotected still fits


def test_modify_of_a_committed_pair_keeps_and_checks_both_paths(client, users) -> None:  # noqa: ANN001
    res = create(client, users, protection="1+1").get_json()
    client.post(f"{API}/reservations/{res['id']}/commit", headers=users.h("alice"))
    r = client.patch(f"{API}/reservations/{res['id']}", json={"bandwidth": 4.0}, headers=users.h("alice"))
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["path"]["protection"] == res["path"]["protection"]
    r = client.patch(f"{API}/reservations/{res['id']}", json={"bandwidth": 50.0}, headers=users.h("alice"))
    assert r.status_code == 409


def test_what_if_reports_both_paths(client, users) -> None:  # noqa: ANN001
    q = f"{API}/available?src=A:1&dst=C:3&start={iso(T0 + 600)}&end={iso(T0 + 4200)}"
    d = client.get(q + "&protection=1%2B1", headers=users.h("alice")).get_json()
    assert d["available"] == 10.0 and d["path"]["protection"]["nodes"][0] == "A"
    assert "protection" not in client.get(q, headers=users.h("alice")).get_json()["path"]
    assert create(client, users, src="A:2", dst="C:4", bandwidth=1.0).status_code == 201
    d = client.get(q + "&protection=1%2B1", headers=users.h("alice")).get_json()
    assert d["available"] == 0.0 and d["path"] is None
    r = client.get(q + "&protection=2", headers=users.h("alice"))
    assert r.status_code == 400 and r.get_json()["error"]["field"] == "protection"


def test_the_form_asks_for_protection_and_the_page_shows_both_paths(ui) -> None:  # noqa: ANN001
    login(ui)
    page = ui.get("/reservations/new").get_data(as_text=True)
    assert 'name="protection"' in page and 'value="1+1"' in page
    data = {"name": "prot", "src": "A:1", "dst": "C:3", "bandwidth": "3", "start": "2030-03-17T18:00",
            "end": "2030-03-17T19:00", "mode": "static", "protection": "1+1", "csrf_token": csrf(page)}
    r = ui.post("/reservations/new", data=data)
    assert r.status_code == 302, r.get_data(as_text=True)
    detail = ui.get(r.headers["Location"]).get_data(as_text=True)
    assert "Working path" in detail and 'id="res-protection-path">A → X:4' in detail
    clone = ui.get(r.headers["Location"].replace("/reservations/", "/reservations/new?clone=")).get_data(as_text=True)
    assert '<option selected value="1+1">' in clone
