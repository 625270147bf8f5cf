"""``--topology controller``: the web service follows the newest snapshot the controller wrote."""
from __future__ import annotations

from app.db.engine import Database
from app.db.feed import Feed
from app.web import create_app
from tests.unit.web.conftest import T0, Clock, body, counts, new_user
from topology.spec import fig2_testbed, spec_to_graph


def test_controller_snapshots(tmp_path) -> None:  # noqa: ANN001
    db = str(tmp_path / "ctl.db")
    app = create_app({"DATABASE": db, "TOPOLOGY": "controller", "CLOCK": Clock(T0), "SECRET_KEY": "x"})
    h = new_user(app, "u")
    c = app.test_client()
    feed = Feed(Database(db))
    try:
        r = c.get("/api/v1/topology", headers=h)
        assert r.status_code == 503 and "no topology yet" in r.get_json()["error"]["message"]
        before = counts(app)
        assert c.post("/api/v1/reservations", json=body(), headers=h).status_code == 503
        assert counts(app) == before

        g = spec_to_graph(fig2_testbed())
        g.remove_edge("adaptation:A:4-X:4")  # the controller saw A's second uplink go away
        feed.topology(g.to_dict(), ts=T0)
        topo = c.get("/api/v1/topology", headers=h).get_json()
        assert "adaptation:A:4-X:4" not in topo["layers"]["adaptation"]["links"]
        assert c.post("/api/v1/reservations", json=body(name="one"), headers=h).status_code == 201
        r = c.post("/api/v1/reservations", json=body(name="two"), headers=h)
        assert r.status_code == 409  # only one optical route out of A is left

        feed.topology(spec_to_graph(fig2_testbed()).to_dict(), ts=T0 + 1)  # uplink back
        assert c.post("/api/v1/reservations", json=body(name="two"), headers=h).status_code == 201
    finally:
        feed.db.dispose()
        app.extensions["mlte"].db.dispose()


def test_ui_names_the_topology_source_and_explains_a_missing_snapshot(tmp_path) -> None:  # noqa: ANN001
    """Issue 14 item 3: every page says which topology is served (and how old it is); with the
    controller's and none written yet, the topology page explains instead of a bare 503."""
    from app.web.auth import create_user
    from tests.unit.web.conftest import login

    db = str(tmp_path / "ui.db")
    app = create_app({"DATABASE": db, "TOPOLOGY": "controller", "CLOCK": Clock(T0), "SECRET_KEY": "x"})
    with app.extensions["mlte"].db.session() as s:
        create_user(s, "dora", password="dora-pw")
        s.commit()
    c = app.test_client()
    feed = Feed(Database(db))
    try:
        login(c)
        r = c.get("/topology")
        page = r.get_data(as_text=True)
        assert r.status_code == 503 and 'id="topology-missing"' in page and "mlte controller --db-url" in page
        assert "Topology: the controller&#39;s snapshot: none written yet" in page
        feed.topology(spec_to_graph(fig2_testbed()).to_dict(), ts=T0 - 90)
        page = c.get("/reservations").get_data(as_text=True)
        assert "Topology: the controller&#39;s snapshot, 90 s old" in page
        assert c.get("/topology").status_code == 200
    finally:
        feed.db.dispose()
        app.extensions["mlte"].db.dispose()


def test_lab_topology_is_named_as_such(client, users) -> None:  # noqa: ANN001
    src = client.get("/api/v1/topology", headers=users.h("alice")).get_json()["source"]
    assert src == {"kind": "lab", "name": "fig2", "as_of": None, "age_seconds": None,
                   "text": "the built-in lab topology fig2 (not the live network)"}
