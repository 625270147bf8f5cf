"""The reservation service on a real PostgreSQL server: migrations, the API life cycle, and the
50-request admission race (row lock on ``admission_lock``)."""
from __future__ import annotations

import pytest
import requests
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from app.db.migrate import owned_only
from app.db.models import METADATA
from app.web import create_app
from app.web.auth import create_user
from tests.lib.webrace import check_race, iso, scenario_topology

pytestmark = pytest.mark.postgres


def _app(url: str, **extra):  # noqa: ANN003, ANN202
    app = create_app({"DATABASE": url, "SECRET_KEY": "pg", **extra})
    st = app.extensions["mlte"]
    with st.db.session() as s:
        _, token = create_user(s, "racer", admin=True)
        s.commit()
    return app, token


def test_migrations_on_postgres(pg) -> None:  # noqa: ANN001
    app, _ = _app(pg.create_database("mig"))
    db = app.extensions["mlte"].db
    try:
        assert db.engine.dialect.name == "postgresql"
        with db.engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"include_name": owned_only})
            assert compare_metadata(ctx, list(METADATA)) == []
    finally:
        db.dispose()


def test_life_cycle_on_postgres(pg) -> None:  # noqa: ANN001
    app, token = _app(pg.create_database("life"))
    h = {"Authorization": f"Bearer {token}"}
    c = app.test_client()
    try:
        body = {"name": "pg", "src": "A:1", "dst": "C:3", "bandwidth": 2, "start": iso(4e9), "end": iso(4e9 + 3600)}
        r = c.post("/api/v1/reservations", json=body, headers=h)
        assert r.status_code == 201, r.get_json()
        rid = r.get_json()["id"]
        assert c.post(f"/api/v1/reservations/{rid}/commit", headers=h).get_json()["state"] == "RESERVED"
        r = c.post("/api/v1/reservations", json={**body, "bandwidth": 1e6}, headers=h)
        assert r.status_code == 409 and r.get_json()["error"]["bottleneck"]
        r = c.get("/api/v1/reservations?endpoint=A&state=RESERVED&min_bandwidth=1", headers=h).get_json()
        assert [x["id"] for x in r["items"]] == [rid]
        assert c.get("/api/v1/reservations/99999999999", headers=h).status_code == 404
    finally:
        app.extensions["mlte"].db.dispose()


@pytest.mark.parametrize("scenario", ["packet-line", "fig2"])
def test_race_postgres(pg, tmp_path, scenario) -> None:  # noqa: ANN001
    app, token = _app(pg.create_database(f"race_{scenario.replace('-', '_')}"),
                      TOPOLOGY=scenario_topology(tmp_path, scenario))

    def every_winner_is_listed(url: str, winners: int) -> None:
        listed = requests.get(f"{url}/api/v1/reservations?limit=500", headers={"Authorization": f"Bearer {token}"},
                              timeout=30).json()
        assert listed["total"] == winners + (1 if scenario == "packet-line" else 0)

    check_race(app, token, scenario, after=every_winner_is_listed)
