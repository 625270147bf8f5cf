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
    app = create_app({"DATABASE": url, "SECRET_KEY": "pg", "TOPOLOGY": "fig2", **extra})
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


# ---- one schema owner and the provisioning tables on PostgreSQL ----------------------------------------

def test_processes_migrate_a_fresh_postgres_database_once(pg) -> None:  # noqa: ANN001
    """Four processes start together on an empty database: the advisory lock lets one migrate."""
    import subprocess
    import sys
    import time

    from app.db import migrate
    from app.db.engine import make_engine
    from tests.lib.webserver import ROOT

    url = pg.create_database("mig_race")
    go = time.time() + 1.5
    code = ("import sys, time; from app.db.migrate import upgrade; "
            f"time.sleep(max(0.0, {go} - time.time())); print(upgrade(sys.argv[1]))")
    procs = [subprocess.Popen([sys.executable, "-c", code, url], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _out, err in outs]
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"include_name": owned_only})
            assert compare_metadata(ctx, list(METADATA)) == []
            from sqlalchemy import text

            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [migrate.head()]
            assert conn.execute(text("SELECT id FROM admission_lock")).scalars().all() == [1]
    finally:
        engine.dispose()


def test_a_postgres_database_of_the_old_code_upgrades(pg) -> None:  # noqa: ANN001
    """Revisions 0001/0002 plus the monitor's and capability store's create_all (what the old code
    did), with an ACTIVE reservation that nothing was recorded for: upgraded to head, data kept."""
    from alembic import command
    from sqlalchemy import text

    from app.db import migrate
    from app.db.engine import make_engine
    from monitor.store import MonBase, MonitorStore
    from topology.capabilities import CapBase

    url = pg.create_database("legacy")
    engine = make_engine(url)
    try:
        cfg = migrate.config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0002")
        MonBase.metadata.create_all(engine)
        CapBase.metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO users (id, name, is_admin, created_at) VALUES (1, 'a', false, 0)"))
            conn.execute(text(
                "INSERT INTO reservations (name, description, src, dst, bandwidth, start_ts, end_ts, mode, state, "
                "state_reason, owner_id, created_ts, updated_ts) VALUES ('r', '', 'A:1', 'C:3', 2, 1, 4e9, "
                "'static', 'ACTIVE', '', 1, 0, 0)"))
            conn.execute(text("INSERT INTO mon_samples (t, point, metric, value) VALUES (5, 'A:3', 'util', 0.5)"))
        assert migrate.upgrade(engine) == migrate.head()
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"include_name": owned_only})
            assert compare_metadata(ctx, list(METADATA)) == []
            assert conn.execute(text("SELECT state FROM reservations")).scalar() == "PROVISIONING"
    finally:
        engine.dispose()
    store = MonitorStore(make_engine(url))  # migrated above
    assert [p.value for p in store.series("A:3", "util")] == [0.5]
    store.engine.dispose()


def test_provisioning_round_trip_on_postgres(pg) -> None:  # noqa: ANN001
    """Held → committed → PROVISIONING at the start → lit (circuit, rules with a full 64-bit cookie) →
    plan recorded and listed → cancelled → released, through the store and the API, on PostgreSQL;
    then cancel racing mark_active (the admission_lock row serialises them)."""
    import threading

    from app.db import migrate
    from app.db.provisioning import ProvisioningStore
    from tests.lib.provisioning import installation
    from tests.unit.web.conftest import Clock

    t0 = 4e9
    clock = Clock(t0)
    url = pg.create_database("prov")
    app, token = _app(url, CLOCK=clock)
    h = {"Authorization": f"Bearer {token}"}
    c = app.test_client()
    store = ProvisioningStore(migrate.open_migrated(url))
    try:
        def started() -> int:
            body = {"name": "pg", "src": "A:1", "dst": "C:3", "bandwidth": 2, "start": iso(clock.t + 60),
                    "end": iso(clock.t + 3600)}
            rid = c.post("/api/v1/reservations", json=body, headers=h).get_json()["id"]
            assert c.post(f"/api/v1/reservations/{rid}/commit", headers=h).status_code == 200
            clock.t += 61
            return rid

        rid = started()
        (order,) = store.due(clock.t)
        assert order.id == rid and order.path["xcons"] == [["X:1", "X:3"], ["Z:3", "Z:2"]]
        circuit, rules = installation(order.path)
        rules[1]["cookie"] = 2**64 - 1
        assert store.mark_active(rid, circuit, rules, clock.t) is True
        assert store.mark_active(rid, circuit, rules, clock.t) is True  # idempotent
        plan_id = store.record_plan({"kind": "provision", "mode": "ordered", "reservation_id": rid, "state": "done",
                                     "started_at": clock.t, "finished_at": clock.t + 1, "steps": []})
        got = c.get(f"/api/v1/reservations/{rid}", headers=h).get_json()
        assert got["state"] == "ACTIVE" and got["circuits"][0]["xcons"][0]["ots"] == "X"
        assert [r["cookie"] for r in got["rules"]] == ["0x4d4c544500000100", "0xffffffffffffffff"]
        assert [p["id"] for p in c.get(f"/api/v1/plans?reservation={rid}", headers=h).get_json()["items"]] == [plan_id]
        assert c.post(f"/api/v1/reservations/{rid}/cancel", headers=h).get_json()["state"] == "CANCELLED"
        (inst,) = store.to_release()
        assert inst.reservation_id == rid and inst.rules[1].cookie == 2**64 - 1
        assert store.mark_released(rid, clock.t) is True and store.installed() == []

        for _ in range(5):
            rid = started()
            store.due(clock.t)
            go = threading.Barrier(2)
            lit: list[bool] = []

            def light(r: int = rid, go: threading.Barrier = go, lit: list = lit) -> None:
                go.wait()
                lit.append(store.mark_active(r, circuit, rules, clock.t))

            def cancel(r: int = rid, go: threading.Barrier = go) -> None:
                go.wait()
                assert c.post(f"/api/v1/reservations/{r}/cancel", headers=h).status_code == 200

            threads = [threading.Thread(target=light), threading.Thread(target=cancel)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            got = c.get(f"/api/v1/reservations/{rid}", headers=h).get_json()
            assert got["state"] == "CANCELLED" and len(lit) == 1
            hist = [(x["detail"].get("from"), x["detail"].get("to")) for x in
                    c.get(f"/api/v1/reservations/{rid}/history", headers=h).get_json()["items"]
                    if x["action"] == "transition"]
            assert hist[-1] == (("ACTIVE", "CANCELLED") if lit[0] else ("PROVISIONING", "CANCELLED"))
            assert [i.reservation_id for i in store.to_release()] == [rid]
            assert store.mark_released(rid, clock.t)
    finally:
        store.db.dispose()
        app.extensions["mlte"].db.dispose()
