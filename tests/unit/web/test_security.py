"""Security properties checked over the whole URL map, so a new route cannot silently skip them:
every mutating API route needs a bearer token (a session cookie is not enough), every UI form POST
needs a CSRF token, cookies carry their flags, secrets are stored hashed, and 5xx bodies say nothing
about the failure."""
from __future__ import annotations

import re

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.db.models import ApiToken, User
from app.web.auth import create_user
from tests.unit.web.conftest import body, counts

MUTATING = {"POST", "PUT", "PATCH", "DELETE"}


def _concrete(rule: str) -> str:
    return re.sub(r"<(?:int:)?(\w+)>", lambda m: "1" if m.group(1) == "res_id" else "commit", rule)


def _rules(app, api: bool) -> list[tuple[str, str]]:  # noqa: ANN001
    out = []
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/") is api and not rule.rule.startswith("/static"):
            out += [(m, _concrete(rule.rule)) for m in sorted(rule.methods & MUTATING)]
    return out


def _login(app, name: str = "sam") -> object:  # noqa: ANN001
    with app.extensions["mlte"].db.session() as s:
        create_user(s, name, password=f"{name}-pw")
        s.commit()
    c = app.test_client()
    page = c.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    r = c.post("/login", data={"username": name, "password": f"{name}-pw", "csrf_token": token})
    assert r.status_code == 302
    return c


def test_every_mutating_api_route_needs_a_token(app, client, users) -> None:  # noqa: ANN001
    rid = client.post("/api/v1/reservations", json=body(), headers=users.h("alice")).get_json()["id"]
    assert rid == 1
    routes = _rules(app, api=True)
    assert {("POST", "/api/v1/reservations"), ("PATCH", "/api/v1/reservations/1")} <= set(routes)
    cookie_client = _login(app)
    before = counts(app)
    for method, path in routes:
        for c in (client, cookie_client):
            r = c.open(path, method=method, json={"bandwidth": 1})
            assert r.status_code == 401, (method, path, r.status_code)
            assert r.get_json()["error"]["field"] == "Authorization"
        r = client.open(path, method=method, json={}, headers={"Authorization": "Bearer mlte_wrong"})
        assert r.status_code == 401, (method, path)
    assert counts(app) == before


def test_every_ui_form_needs_csrf(app, client, users) -> None:  # noqa: ANN001
    client.post("/api/v1/reservations", json=body(), headers=users.h("alice"))
    routes = _rules(app, api=False)
    assert len(routes) >= 4  # login, logout, new, modify, commit/cancel
    c = _login(app)
    before = counts(app)
    for method, path in routes:
        r = c.open(path, method=method, data={"name": "x", "bandwidth": "1", "modify-bandwidth": "2"})
        assert r.status_code in (400, 403), (method, path, r.status_code)  # 403: not sam's reservation
    assert counts(app) == before
    assert c.get("/reservations").status_code == 200  # the logout POST without a token kept the session


def test_session_cookie_flags(app) -> None:  # noqa: ANN001
    c = app.test_client()
    c.get("/login")  # the CSRF token is kept in the session: the cookie is set here already
    cookie = c.get_cookie("session")
    assert cookie is not None and cookie.http_only and cookie.same_site == "Lax" and not cookie.secure
    app.config["SESSION_COOKIE_SECURE"] = True  # `mlte web --secure-cookies` behind HTTPS
    c = app.test_client()
    c.get("/login")
    assert c.get_cookie("session").secure


def test_secrets_are_stored_hashed(app) -> None:  # noqa: ANN001
    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, "hash", password="correct horse")
        s.commit()
        user = s.execute(select(User).where(User.name == "hash")).scalar_one()
        assert user.password_hash.startswith(("scrypt:", "pbkdf2:")) and "correct horse" not in user.password_hash
        stored = [t.token_hash for t in s.execute(select(ApiToken)).scalars()]
        assert token not in stored and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in stored)


@pytest.mark.parametrize("exc", [RuntimeError("boom at /srv/secret/path.py"),
                                 OperationalError("SELECT password_hash FROM users", {}, Exception("locked"))])
def test_5xx_bodies_leak_nothing(app, client, users, monkeypatch, exc) -> None:  # noqa: ANN001
    from app.web import service

    def explode(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise exc

    monkeypatch.setattr(service, "create", explode)
    monkeypatch.setattr(app.logger, "disabled", True)  # the traceback is logged; keep the output clean
    r = client.post("/api/v1/reservations", json=body(), headers=users.h("alice"))
    assert r.status_code == 500
    text = r.get_data(as_text=True)
    assert r.get_json()["error"]["message"] == "internal error (logged)"
    for secret in ("boom", "secret", "SELECT", "password", "Traceback", "locked"):
        assert secret not in text
    c = _login(app)
    page = c.get("/reservations/new").get_data(as_text=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    r = c.post("/reservations/new", data={"csrf_token": token, "name": "n", "src": "A:1", "dst": "C:3",
                                          "bandwidth": "1", "end": "2030-03-17T19:00", "mode": "static"})
    assert r.status_code == 500
    assert not any(s in r.get_data(as_text=True) for s in ("boom", "SELECT", "Traceback"))
