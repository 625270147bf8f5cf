"""The live views: the chart's links are the keys the monitor writes, the topology page's live part
(circuits lit and released, utilization per link), and the styled error pages."""
from __future__ import annotations

import json
import re

from sqlalchemy import select

from app.db.engine import Database
from app.db.feed import CircuitRecord, Feed
from app.db.models import Circuit
from app.web.monitor_read import link_key, path_links
from tests.lib.monitor_feed import MonitorFeed, fig2_lit
from tests.unit.web.conftest import T0, iso
from tests.unit.web.test_ui import _form, login


def test_path_links_are_the_monitor_keys() -> None:
    """A path through the optical layer is one circuit between the switch ports where it leaves and
    re-enters the packet layer; packet edges stay; host links are not monitored."""
    g = fig2_lit(("A", 3, "B", 1))
    over_optical = ["access:A:1-h1", "adaptation:A:3-X:1", "xcon:X:1-X:3", "optical:X:3-Z:3", "xcon:Z:2-Z:3",
                    "adaptation:C:1-Z:2", "access:C:3-h3"]
    assert path_links(g, over_optical) == ["packet:A:3-C:1"] == [link_key("C:1", "A:3")]
    assert path_links(g, ["access:A:1-h1", "packet:A:3-B:1", "gone:X-Y"]) == ["packet:A:3-B:1"]


def test_detail_chart_asks_for_what_the_monitor_writes(ui, app, clock) -> None:  # noqa: ANN001
    """The chart asked for the path's access/adaptation/XCON/fibre keys; the monitor writes only
    packet-link keys, so the chart stayed empty while the circuit carried traffic."""
    login(ui)
    detail = ui.post("/reservations/new", data=_form(ui)).headers["Location"]
    page = ui.get(detail).get_data(as_text=True)
    links = json.loads(re.search(r"data-links='([^']*)'", page).group(1))
    # the monitor over the controller's graph once the reservation's circuit A:3–C:1 is lit
    feed = MonitorFeed(app.config["DATABASE"], fig2_lit(("A", 3, "C", 1)))
    try:
        for i, rate in enumerate((2.0, 4.0, 6.0)):
            feed.tick(clock.t - 30 + i, {"packet:A:3-C:1": rate})
    finally:
        feed.close()
    assert feed.circuit_ids == links == ["packet:A:3-C:1"]
    r = ui.get("/api/v1/utilization?" + "&".join(f"link={k}" for k in links))
    assert r.status_code == 200
    series = r.get_json()["series"]["packet:A:3-C:1"]
    assert [round(p["mbps"], 3) for p in series] == [2.0, 4.0, 6.0]
    assert [round(p["utilization"], 3) for p in series] == [0.2, 0.4, 0.6]


def test_unknown_link_is_refused_with_a_reason(ui) -> None:  # noqa: ANN001
    login(ui)
    r = ui.get("/api/v1/utilization?link=nonsense")
    assert r.status_code == 400 and "unknown link 'nonsense'" in r.get_json()["error"]["message"]


def test_feed_circuit_is_monitored_under_its_link_key(app, clock) -> None:  # noqa: ANN001
    """A circuit ``topology_publisher`` records (``A:3``–``B:1``) and the series the monitor keeps of it meet."""
    feed = Feed(Database(app.config["DATABASE"]))
    try:
        feed.sync_circuits([CircuitRecord("B:1", "A:3", 10.0, (("Y", 2, 1), ("X", 2, 1)))], ts=T0)
        with feed.db.session() as s:
            (row,) = s.execute(select(Circuit.a_end, Circuit.z_end)).all()
    finally:
        feed.db.dispose()
    mon = MonitorFeed(app.config["DATABASE"], fig2_lit(("A", 3, "B", 1)))
    mon.close()
    assert [link_key(*row)] == mon.circuit_ids


def test_topology_live_fragment_follows_circuits(ui, app) -> None:  # noqa: ANN001
    """The page's live part: 304 while nothing changed; a circuit lit by the controller appears
    (row, arc keyed as the monitor keys it, a label slot, its XCONs highlighted) and goes when it is
    released (listed under "released recently")."""
    login(ui)
    page = ui.get("/topology").get_data(as_text=True)
    assert 'id="topology-live"' in page and "topology.js" in page and "chart.js" in page
    first = ui.get("/topology/live")
    assert first.status_code == 200 and first.headers["ETag"]
    assert 'class="empty">No circuit is lit.' in first.get_data(as_text=True)
    assert ui.get("/topology/live", headers={"If-None-Match": first.headers["ETag"]}).status_code == 304

    feed = Feed(Database(app.config["DATABASE"]))
    try:
        lit = CircuitRecord("A:3", "B:1", 10.0, (("X", 1, 2), ("Y", 1, 2)))
        assert feed.sync_circuits([lit]) == (1, 0)
        r = ui.get("/topology/live", headers={"If-None-Match": first.headers["ETag"]})
        html = r.get_data(as_text=True)
        assert r.status_code == 200
        assert re.search(r'<tr data-circuit="\d+"><td>\d+</td><td>A:3-B:1 via X,Y</td>', html)
        assert 'class="edge edge-packet circuit circuit-link" data-key="packet:A:3-B:1"' in html
        assert 'class="util-label" data-for="packet:A:3-B:1"' in html
        assert 'data-for="packet:A:3-B:1">—</td>' in html  # the "Now" cell the overlay fills
        assert json.loads(re.search(r"data-links='([^']*)'", html).group(1)) == ["packet:A:3-B:1"]
        assert re.search(r'class="edge edge-xcon circuit" data-key="xcon:X:1-X:2"', html)
        assert feed.sync_circuits([]) == (0, 1)
    finally:
        feed.db.dispose()
    html = ui.get("/topology/live").get_data(as_text=True)
    live = html.split('id="released-circuits"')[0]
    assert "A:3-B:1 via X,Y" not in live and "packet:A:3-B:1" not in live and "xcon:X:1-X:2" not in live
    assert "Released recently (1)" in html


def test_topology_live_needs_login_and_a_topology(client) -> None:  # noqa: ANN001
    r = client.get("/topology/live")
    assert r.status_code == 302 and "/login" in r.headers["Location"]


def test_utilization_says_when_it_was_asked(client, users, clock) -> None:  # noqa: ANN001
    """``as_of`` (the service's clock) lets the overlay tell a fresh last sample from an old one."""
    body = client.get("/api/v1/utilization?link=packet:A:3-B:1", headers=users.h("alice")).get_json()
    assert body["as_of"] == iso(clock.t) and body["series"] == {"packet:A:3-B:1": []}
