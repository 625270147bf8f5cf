"""The server-rendered UI through the Flask test client: login, CSRF, form validation, pages."""
from __future__ import annotations

import re

import pytest

from app.web.auth import create_user
from app.web.feed import Feed
from tests.unit.web.conftest import T0, counts


@pytest.fixture
def ui(app):  # noqa: ANN001, ANN201
    with app.extensions["mlte"].db.session() as s:
        create_user(s, "dora", password="dora-pw")
        create_user(s, "eve", password="eve-pw")
        s.commit()
    return app.test_client()


def csrf(html: str) -> str:
    m = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html)
    assert m, "no CSRF token in form"
    return m.group(1)


def login(c, name: str = "dora") -> None:  # noqa: ANN001
    page = c.get("/login").get_data(as_text=True)
    r = c.post("/login", data={"username": name, "password": f"{name}-pw", "csrf_token": csrf(page)})
    assert r.status_code == 302


def test_pages_need_login(ui) -> None:  # noqa: ANN001
    for path in ("/reservations", "/reservations/new", "/topology", "/events"):
        r = ui.get(path)
        assert r.status_code == 302 and "/login" in r.headers["Location"]


def test_login_wrong_password(ui) -> None:  # noqa: ANN001
    page = ui.get("/login").get_data(as_text=True)
    r = ui.post("/login", data={"username": "dora", "password": "nope", "csrf_token": csrf(page)})
    assert r.status_code == 401 and "wrong user name or password" in r.get_data(as_text=True)


def test_forms_need_csrf(ui, app) -> None:  # noqa: ANN001
    r = ui.post("/login", data={"username": "dora", "password": "dora-pw"})
    assert r.status_code == 400
    login(ui)
    before = counts(app)
    r = ui.post("/reservations/new", data={"name": "x", "src": "A:1", "dst": "C:3", "bandwidth": "1",
                                           "end": "2030-03-18T10:00"})
    assert r.status_code == 400 and counts(app) == before


def _form(ui, **over) -> dict:  # noqa: ANN001, ANN003
    page = ui.get("/reservations/new").get_data(as_text=True)
    data = {"name": "ui-res", "src": "A:1", "dst": "C:3", "bandwidth": "3", "start": "2030-03-17T18:00",
            "end": "2030-03-17T19:00", "mode": "static", "csrf_token": csrf(page)}
    data.update(over)
    return data


def test_create_commit_cancel_through_forms(ui, app) -> None:  # noqa: ANN001
    login(ui)
    r = ui.post("/reservations/new", data=_form(ui))
    assert r.status_code == 302, r.get_data(as_text=True)
    detail_url = r.headers["Location"]
    page = ui.get(detail_url).get_data(as_text=True)
    assert "HELD" in page and 'class="edge' in page and "on-path" in page
    listing = ui.get("/reservations").get_data(as_text=True)
    assert "ui-res" in listing
    ui.post(detail_url + "/commit", data={"csrf_token": csrf(page)})
    page = ui.get(detail_url).get_data(as_text=True)
    assert 'id="res-state">RESERVED' in page
    ui.post(detail_url + "/cancel", data={"csrf_token": csrf(page)})
    assert 'id="res-state">CANCELLED' in ui.get(detail_url).get_data(as_text=True)


@pytest.mark.parametrize(("over", "message"), [
    ({"bandwidth": "-1"}, "Number must be"),
    ({"src": "nonsense"}, "SWITCH:PORT"),
    ({"end": "2030-03-17T17:00"}, "end must be after start"),
    ({"dst": "Q:1"}, "unknown switch"),
    ({"bandwidth": "5000"}, "not admitted"),
])
def test_form_validation_shows_field_errors(ui, app, over, message) -> None:  # noqa: ANN001
    login(ui)
    before = counts(app)
    r = ui.post("/reservations/new", data=_form(ui, **over))
    assert r.status_code == 400 and message in r.get_data(as_text=True)
    assert counts(app) == before


def test_users_see_only_their_own(ui, app) -> None:  # noqa: ANN001
    login(ui, "dora")
    detail_url = ui.post("/reservations/new", data=_form(ui)).headers["Location"]
    other = app.test_client()
    login(other, "eve")
    assert other.get(detail_url).status_code == 403
    assert "ui-res" not in other.get("/reservations").get_data(as_text=True)


def test_topology_and_events_pages(ui, app, clock) -> None:  # noqa: ANN001
    feed = Feed(app.config["DATABASE"], migrate=False)
    try:
        feed.circuit("A-C", "A:3", "C:1", 10.0, [("X", 1, 3), ("Z", 3, 2)])
        feed.event("circuit.up", "circuit A-C up", ts=T0)
    finally:
        feed.close()
    login(ui)
    topo = ui.get("/topology").get_data(as_text=True)
    assert "band-packet" in topo and "band-optical" in topo and "edge-adaptation" in topo
    assert "X1↔X3" in topo.replace("</code>", "").replace("<code>", "")
    assert "circuit A-C up" in ui.get("/events").get_data(as_text=True)
