"""What the controller records through ProvisioningStore, as the web shows it: the reservation's circuits
and rules in the API and on its page, plan records (``/api/v1/plans``), PROVISIONING and FAILED on the
pages, reservation circuits kept by the feed's circuit sync."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from app.db.engine import Database
from app.db.feed import CircuitRecord, Feed
from app.db.migrate import open_migrated
from app.db.models import Circuit
from app.db.provisioning import ProvisioningStore
from tests.lib.provisioning import light
from tests.unit.web.conftest import T0, body, iso, login

API = "/api/v1"


def _started(client, users, clock, who: str = "alice", **over) -> int:  # noqa: ANN001, ANN003
    """A committed reservation whose window has started (PROVISIONING)."""
    rid = client.post(f"{API}/reservations", json=body(**over), headers=users.h(who)).get_json()["id"]
    assert client.post(f"{API}/reservations/{rid}/commit", headers=users.h(who)).status_code == 200
    clock.t = max(clock.t, T0 + 601)
    assert client.get(f"{API}/reservations/{rid}", headers=users.h(who)).get_json()["state"] == "PROVISIONING"
    return rid


def _plan(rid: int | None, state: str = "done", error: str | None = None) -> dict:
    return {"kind": "provision", "mode": "ordered", "reservation_id": rid, "state": state, "error": error,
            "started_at": T0 + 601, "finished_at": T0 + 602,
            "steps": [{"id": "x1", "kind": "xcon", "target": "X:1-X:3", "deps": [], "started_at": T0 + 601,
                       "finished_at": T0 + 601.2, "ok": True, "error": None},
                      {"id": "f1", "kind": "flow", "target": "A", "deps": ["x1"], "started_at": None,
                       "finished_at": None, "ok": None if state == "done" else False, "error": error}]}


@pytest.fixture
def store(app):  # noqa: ANN001, ANN201
    s = ProvisioningStore(open_migrated(app.config["DATABASE"]))
    yield s
    s.db.dispose()


def test_plans_api(client, users, clock, store) -> None:  # noqa: ANN001
    mine = _started(client, users, clock)
    theirs = _started(client, users, clock, who="bob", src="A:2", dst="C:4")
    p1 = store.record_plan(_plan(mine))
    p2 = store.record_plan(_plan(theirs, "failed", "barrier timeout on A"))
    p3 = store.record_plan(_plan(None))  # no reservation (e.g. a re-optimisation move)
    got = client.get(f"{API}/plans?reservation={mine}", headers=users.h("alice")).get_json()["items"]
    assert [p["id"] for p in got] == [p1]
    assert got[0]["started"] == iso(T0 + 601) and got[0]["finished"] == iso(T0 + 602)
    assert got[0]["steps"][0] == {"id": "x1", "kind": "xcon", "target": "X:1-X:3", "deps": [],
                                  "started_at": iso(T0 + 601), "finished_at": iso(T0 + 601.2), "ok": True,
                                  "error": None}
    assert got[0]["steps"][1]["started_at"] is None
    # users see the plans of their own reservations, admins every plan
    assert [p["id"] for p in client.get(f"{API}/plans", headers=users.h("alice")).get_json()["items"]] == [p1]
    assert [p["id"] for p in client.get(f"{API}/plans", headers=users.h("root")).get_json()["items"]] == [p3, p2, p1]
    assert [p["id"] for p in client.get(f"{API}/plans?limit=1", headers=users.h("root")).get_json()["items"]] == [p3]
    failed = client.get(f"{API}/plans?reservation={theirs}", headers=users.h("bob")).get_json()["items"][0]
    assert failed["state"] == "failed" and failed["error"] == "barrier timeout on A"
    assert client.get(f"{API}/plans?reservation={theirs}", headers=users.h("alice")).status_code == 403
    assert client.get(f"{API}/plans?reservation=99999", headers=users.h("alice")).status_code == 404
    assert client.get(f"{API}/plans").status_code == 401


@pytest.mark.parametrize("query, field", [
    ("reservation=0", "reservation"), ("reservation=x", "reservation"), ("reservation=-1", "reservation"),
    ("reservation=99999999999", "reservation"), ("limit=0", "limit"), ("limit=501", "limit"),
    ("limit=1.5", "limit"), ("state=done", "state"),
])
def test_plans_api_rejects_bad_queries(client, users, query: str, field: str) -> None:  # noqa: ANN001
    r = client.get(f"{API}/plans?{query}", headers=users.h("alice"))
    assert r.status_code == 400 and r.get_json()["error"]["field"] == field


def test_detail_page_shows_provisioning_then_what_was_installed(client, users, clock, app, store) -> None:  # noqa: ANN001
    from app.web.auth import create_user

    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, "dora", password="dora-pw")
        s.commit()
    h = {"Authorization": f"Bearer {token}"}
    rid = client.post(f"{API}/reservations", json=body(), headers=h).get_json()["id"]
    client.post(f"{API}/reservations/{rid}/commit", headers=h)
    clock.t = T0 + 601
    ui = app.test_client()
    login(ui)
    page = ui.get(f"/reservations/{rid}").get_data(as_text=True)
    assert 'class="state s-provisioning" id="res-state">PROVISIONING<' in page
    assert "waiting for the controller" in page and 'id="res-provisioning"' in page
    assert "No circuit recorded for this reservation." in page and 'id="cancel-btn"' in page
    assert light(app.config["DATABASE"], rid, clock.t)
    store.record_plan(_plan(rid))
    page = ui.get(f"/reservations/{rid}").get_data(as_text=True)
    assert ">ACTIVE<" in page and "A:3-C:1 via X,Z" in page
    assert "<code>X:1↔X:3</code>✓" in page and "<code>0x4d4c544500000100</code>" in page
    assert '<code>{"eth_type": 2048, "vlan_vid": 100}</code>' in page and '<code>[{"output": 3}]</code>' in page
    assert "1/2 ok" in page  # the plan: one step ok, one not run
    assert "PROVISIONING → ACTIVE: lit by the controller" in page and "<td>controller</td>" in page
    topo = ui.get("/topology").get_data(as_text=True)
    assert f'href="/reservations/{rid}">{rid}</a>' in topo


def test_detail_page_shows_the_failure_reason(client, users, clock, app, store) -> None:  # noqa: ANN001
    from app.web.auth import create_user

    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, "dora", password="dora-pw")
        s.commit()
    h = {"Authorization": f"Bearer {token}"}
    rid = client.post(f"{API}/reservations", json=body(), headers=h).get_json()["id"]
    client.post(f"{API}/reservations/{rid}/commit", headers=h)
    clock.t = T0 + 601
    assert [o.id for o in store.due(clock.t)] == [rid]
    assert store.mark_failed(rid, "no free port on OTS <Y>", clock.t)
    ui = app.test_client()
    login(ui)
    page = ui.get(f"/reservations/{rid}").get_data(as_text=True)
    assert 'id="res-failure">no free port on OTS &lt;Y&gt;</td>' in page  # escaped
    assert 'id="cancel-btn"' not in page
    listing = ui.get("/reservations?state=FAILED").get_data(as_text=True)
    assert 'class="state s-failed">FAILED<' in listing
    r = client.get(f"{API}/reservations/{rid}", headers=h).get_json()
    assert r["state"] == "FAILED" and r["state_reason"] == "no free port on OTS <Y>"


def test_provisioning_is_a_list_filter_and_books_capacity(client, users, clock) -> None:  # noqa: ANN001
    rid = _started(client, users, clock)
    got = client.get(f"{API}/reservations?state=PROVISIONING", headers=users.h("alice")).get_json()
    assert [x["id"] for x in got["items"]] == [rid]
    # it holds its optical route: two more A:1 → C:3 fill the other route and then nothing is left
    more = [client.post(f"{API}/reservations", json=body(name=f"m{i}", start=iso(clock.t), end=iso(T0 + 3000)),
                        headers=users.h("alice")) for i in range(2)]
    assert [r.status_code for r in more] == [201, 409]


def test_feed_sync_keeps_reservation_circuits(tmp_path, store, client, users, clock, app) -> None:  # noqa: ANN001
    """The controller's circuit sync sees a reservation's circuit lit (from either end): no duplicate
    anonymous row; when it is not lit any more the row stays the reservation's to release."""
    rid = _started(client, users, clock)
    assert light(app.config["DATABASE"], rid, clock.t)
    feed = Feed(Database(app.config["DATABASE"]))
    try:
        seen_from_c = CircuitRecord("C:1", "A:3", 10.0, (("Z", 2, 3), ("X", 3, 1)))
        assert feed.sync_circuits([seen_from_c]) == (0, 0)
        assert feed.sync_circuits([]) == (0, 0)
        with app.extensions["mlte"].db.session() as s:
            rows = [(c.reservation_id, c.state) for c in s.execute(select(Circuit)).scalars()]
        assert rows == [(rid, "ACTIVE")]
        assert [i.reservation_id for i in store.installed()] == [rid]
    finally:
        feed.db.dispose()
