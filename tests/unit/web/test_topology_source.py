"""``--topology controller``: the web service follows the newest snapshot the controller wrote."""
from __future__ import annotations

from app.db.feed import Feed
from app.web import create_app
from mininet_labs.spec import fig2_testbed, spec_to_graph
from tests.unit.web.conftest import T0, Clock, body, counts, new_user


def test_controller_snapshots(tmp_path) -> None:  # noqa: ANN001
    db = str(tmp_path / "ctl.db")
    app = create_app({"DATABASE": db, "TOPOLOGY": "controller", "CLOCK": Clock(T0), "SECRET_KEY": "x"})
    h = new_user(app, "u")
    c = app.test_client()
    feed = Feed(db, migrate=False)
    try:
        r = c.get("/api/v1/topology", headers=h)
        assert r.status_code == 503 and "not written a topology" in r.get_json()["error"]["message"]
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
        feed.close()
        app.extensions["mlte"].db.dispose()
