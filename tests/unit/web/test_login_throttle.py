"""Failed UI logins are throttled per user name and per client address (app.web.throttle)."""
from __future__ import annotations

import re

import pytest

from app.web.auth import create_user
from app.web.throttle import ADDRESS_FACTOR, LoginThrottle, login_keys


class Tick:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_window_counts_and_releases() -> None:
    clock = Tick()
    th = LoginThrottle(3, 60.0, clock)
    keys = login_keys("Ada", "10.0.0.1")
    for _ in range(3):
        assert th.retry_after(keys) == 0.0
        th.failed(keys)
        clock.t += 10.0
    # three failures at t=1000, 1010, 1020; now 1030: locked until the first leaves the window (1060)
    assert th.retry_after(keys) == pytest.approx(30.0)
    assert th.retry_after(login_keys("ada ", "10.0.0.2")) == pytest.approx(30.0)  # names ignore case/space
    assert th.retry_after(login_keys("bob", "10.0.0.1")) == 0.0  # the address is far from its limit
    clock.t = 1060.0
    assert th.retry_after(keys) == 0.0
    th.failed(keys)  # the window now holds 1010, 1020, 1060
    assert th.retry_after(keys) == pytest.approx(10.0)
    th.succeeded(keys[0])
    assert th.retry_after(keys) == 0.0


def test_address_limit_spans_user_names() -> None:
    clock = Tick()
    th = LoginThrottle(2, 100.0, clock)
    for i in range(2 * ADDRESS_FACTOR):
        assert th.retry_after(login_keys(f"user{i}", "192.0.2.7")) == 0.0
        th.failed(login_keys(f"user{i}", "192.0.2.7"))
    assert th.retry_after(login_keys("fresh", "192.0.2.7")) > 0
    assert th.retry_after(login_keys("fresh", "192.0.2.8")) == 0.0
    # a success clears the name only, never the address
    th.succeeded(("user", "fresh"))
    assert th.retry_after(login_keys("fresh", "192.0.2.7")) > 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        LoginThrottle(0, 10.0, Tick())
    with pytest.raises(ValueError):
        LoginThrottle(3, 0.0, Tick())


def _csrf(client) -> str:  # noqa: ANN001
    page = client.get("/login").get_data(as_text=True)
    return re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)


def _post(client, name: str, password: str):  # noqa: ANN001, ANN202
    return client.post("/login", data={"username": name, "password": password, "csrf_token": _csrf(client)})


def test_ui_locks_a_name_after_failures_and_lets_it_in_after_the_window(app, clock) -> None:  # noqa: ANN001
    with app.extensions["mlte"].db.session() as s:
        create_user(s, "eve", password="right")
        s.commit()
    limit = app.config["LOGIN_MAX_FAILURES"]
    window = app.config["LOGIN_WINDOW_SECONDS"]
    c = app.test_client()
    for _ in range(limit):
        r = _post(c, "eve", "wrong")
        assert r.status_code == 401
    # locked: even the right password is refused, with Retry-After, and no session is made
    r = _post(c, "eve", "right")
    assert r.status_code == 429
    assert 0 < int(r.headers["Retry-After"]) <= window
    assert "too many failed logins" in r.get_data(as_text=True)
    assert c.get("/reservations").status_code == 302  # still sent to the login page
    clock.t += window + 1
    r = _post(c, "eve", "right")
    assert r.status_code == 302
    assert c.get("/reservations").status_code == 200


def test_ui_success_resets_the_name(app) -> None:  # noqa: ANN001
    with app.extensions["mlte"].db.session() as s:
        create_user(s, "fay", password="right")
        s.commit()
    limit = app.config["LOGIN_MAX_FAILURES"]
    c = app.test_client()
    for _ in range(limit - 1):
        assert _post(c, "fay", "wrong").status_code == 401
    assert _post(c, "fay", "right").status_code == 302
    c2 = app.test_client()
    for _ in range(limit - 1):
        assert _post(c2, "fay", "wrong").status_code == 401
    assert _post(c2, "fay", "right").status_code == 302
