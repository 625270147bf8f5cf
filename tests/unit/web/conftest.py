"""Fixtures of the reservation-service tests: an app on a temp SQLite file, a settable clock, users.

Warnings are errors in this directory (the global pytest config is left alone).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest
from sqlalchemy import func, select

from app.db.models import AuditEntry, Event, Reservation
from app.web import create_app
from app.web.auth import create_user

T0 = 1_900_000_000.0  # 2030-03-17: a fixed "now" so windows are reproducible


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    for item in items:
        if "tests/unit/web" in str(item.fspath) or "tests/web" in str(item.fspath):
            item.add_marker(pytest.mark.filterwarnings("error"))


class Clock:
    """A settable clock handed to the app as ``CLOCK``."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class Users:
    alice: str
    bob: str
    root: str

    def h(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {getattr(self, who)}"}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app(tmp_path, clock):  # noqa: ANN001, ANN201
    app = create_app({"DATABASE": str(tmp_path / "web.db"), "TOPOLOGY": "fig2", "TESTING": True, "CLOCK": clock,
                      "HOLD_SECONDS": 300, "SECRET_KEY": "test"})
    yield app
    app.extensions["mlte"].db.dispose()


@pytest.fixture
def client(app):  # noqa: ANN001, ANN201
    return app.test_client()


@pytest.fixture
def users(app) -> Users:  # noqa: ANN001
    db = app.extensions["mlte"].db
    with db.session() as s:
        _, a = create_user(s, "alice")  # passwords (slow to hash) only where a test logs in
        _, b = create_user(s, "bob")
        _, r = create_user(s, "root", admin=True)
        s.commit()
    return Users(a, b, r)


def new_user(app, name: str, *, admin: bool = False) -> dict[str, str]:  # noqa: ANN001
    """Create a user in ``app``'s database; return its ``Authorization`` header."""
    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, name, admin=admin)
        s.commit()
    return {"Authorization": f"Bearer {token}"}


def counts(app) -> tuple[int, int, int]:  # noqa: ANN001
    """(reservations, audit entries, events): must not change on a rejected request."""
    with app.extensions["mlte"].db.session() as s:
        return tuple(s.execute(select(func.count()).select_from(m)).scalar_one()  # type: ignore[return-value]
                     for m in (Reservation, AuditEntry, Event))


def body(**over) -> dict:  # noqa: ANN003
    """A valid create request A:1 → C:3, 2 Mbit/s, starting in 10 minutes for an hour."""
    b = {"name": "r", "src": "A:1", "dst": "C:3", "bandwidth": 2.0, "start": iso(T0 + 600),
         "end": iso(T0 + 4200)}
    b.update(over)
    return {k: v for k, v in b.items() if v is not ...}


@pytest.fixture
def ui(app):  # noqa: ANN001, ANN201
    """A test client with two users who log in with passwords (``dora``, ``eve``)."""
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
