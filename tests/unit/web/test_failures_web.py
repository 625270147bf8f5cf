"""Failures in the web UI (issue 23 item 6, docs/failures.md): RESTORING / DEGRADED on the list and the
reservation page, the page's restorations with old → new path, failed fibres and ports on the
topology page and through ``GET /api/v1/topology``, restoration events as warnings."""
from __future__ import annotations

import pytest

from app.controller.failures import Failures
from app.controller.topology_publisher import mark_failures
from app.db.engine import Database
from app.db.feed import Feed
from app.db.migrate import open_migrated
from app.db.provisioning import ProvisioningStore
from app.web import create_app
from app.web.auth import create_user
from app.web.restorations import hops
from tests.lib.provisioning import installation, light
from tests.unit.web.conftest import T0, Clock, body, login
from topology.spec import fig2_testbed, spec_to_graph

API = "/api/v1"
#: what the PCE gives A:1 → C:3 on Fig. 2 when A:3 … Z:2 is taken: A:4 → X:4 → X:5 ⇒ Z:5 → Z:4 → C:2
DETOUR = ["access:A:1-h1", "adaptation:A:4-X:4", "xcon:X:4-X:5", "optical:X:5-Z:5", "xcon:Z:4-Z:5",
          "adaptation:C:2-Z:4", "access:C:3-h3"]
CUT = {("X", 3): "loss of light at X:3", ("Z", 3): "loss of light at Z:3"}  # the fibre X:3–Z:3 cut


@pytest.fixture
def store(app):  # noqa: ANN001, ANN201
    s = ProvisioningStore(open_migrated(app.config["DATABASE"]))
    yield s
    s.db.dispose()


def _dora(app):  # noqa: ANN001, ANN202
    """A UI client logged in as dora, and dora's API token header."""
    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, "dora", password="dora-pw")
        s.commit()
    ui = app.test_client()
    login(ui)
    return ui, {"Authorization": f"Bearer {token}"}


def _lit(app, client, clock, h: dict[str, str], **over) -> tuple[int, dict]:  # noqa: ANN001, ANN003
    """An ACTIVE reservation A:1 → C:3 (over A:3 … X:3 ⇒ Z:3 … C:1) and its stored path."""
    rid = client.post(f"{API}/reservations", json=body(**over), headers=h).get_json()["id"]
    assert client.post(f"{API}/reservations/{rid}/commit", headers=h).status_code == 200
    clock.t = T0 + 601
    assert light(app.config["DATABASE"], rid, clock.t)
    return rid, client.get(f"{API}/reservations/{rid}", headers=h).get_json()["path"]


def test_hops_read_a_stored_path_as_its_node_sequence() -> None:
    g = spec_to_graph(fig2_testbed())
    assert [a for a, _b, _k in hops(g, DETOUR)] + [hops(g, DETOUR)[-1][1]] == ["A", "X:4", "X:5", "Z:5", "Z:4", "C"]
    assert hops(g, list(reversed(DETOUR)))[0][:2] == ("C", "Z:4")  # oriented by the edge order, not the keys
    g.remove_edge("optical:X:5-Z:5")  # an edge the newest graph no longer has is read from its key
    assert [k for _a, _b, k in hops(g, DETOUR)][2] == "optical:X:5-Z:5"
    assert hops(g, DETOUR)[2][:2] == ("X:5", "Z:5")


def test_restoring_and_degraded_on_the_list_and_the_page(app, client, clock, store) -> None:  # noqa: ANN001
    ui, h = _dora(app)
    rid, old = _lit(app, client, clock, h)
    assert 'id="restorations"' not in ui.get(f"/reservations/{rid}").get_data(as_text=True)  # none yet

    assert store.mark_restoring(rid, "loss of light at X:3", clock.t + 1)
    page = ui.get(f"/reservations/{rid}").get_data(as_text=True)
    assert 'class="state s-restoring" id="res-state">RESTORING<' in page
    assert 'id="res-restoring">a failure broke its path (loss of light at X:3)' in page
    assert 'id="modify-form"' not in page and 'id="cancel-btn"' in page  # repaired, not modified; cancellable
    listing = ui.get("/reservations").get_data(as_text=True)
    assert 'class="state s-restoring">RESTORING</span><span class="state-reason">loss of light at X:3</span>' in listing
    assert "<option >RESTORING</option>" in listing and "<option >DEGRADED</option>" in listing

    try_ = {"cause": "loss of light at X:3", "detected_ts": clock.t + 1, "started_ts": clock.t + 1.01,
            "old_path": old["edges"]}
    assert store.mark_degraded(rid, "no path around the failure", try_, clock.t + 2.5)
    page = ui.get(f"/reservations/{rid}").get_data(as_text=True)
    assert 'id="res-degraded">no path around the failure — nothing of it is lit' in page
    filtered = ui.get("/reservations?state=DEGRADED").get_data(as_text=True)
    assert f'data-id="{rid}"' in filtered and 'class="state s-degraded">DEGRADED<' in filtered
    assert f'data-id="{rid}"' not in ui.get("/reservations?state=ACTIVE").get_data(as_text=True)
    topo = ui.get("/topology").get_data(as_text=True)  # not lit: listed with the booked ones, with its reason
    pending = topo[topo.index('id="pending-list"'):]
    assert f'data-reservation="{rid}"' in pending and "no path around the failure" in pending

    assert store.mark_restoring(rid, "retry 2 after loss of light at X:3", clock.t + 4)
    circuit, rules = installation({**old, "edges": DETOUR, "xcons": [["X:4", "X:5"], ["Z:5", "Z:4"]]})
    assert store.mark_restored(rid, [circuit], rules, None, {**try_, "attempt": 2, "new_path": DETOUR}, clock.t + 4.5)
    page = ui.get(f"/reservations/{rid}").get_data(as_text=True)
    section = page[page.index('id="restorations"'):page.index("Live utilization")]
    restored, degraded = section.index('data-outcome="restored"'), section.index('data-outcome="degraded"')
    assert restored < degraded  # newest first
    first, second = section[restored:degraded], section[degraded:]
    assert "<td>loss of light at X:3</td>" in first and '<td class="num">2</td>' in first
    assert '<td class="num">3.5 s</td>' in first and '<td class="num">1.5 s</td>' in second
    assert "no path around the failure" in second and "no new path" in second
    # old path A → X:1 → X:3 ⇒ Z:3 → Z:2 → C with the fibre it left struck out; the new one's fibre marked
    assert ('<span>A</span><span title="adaptation:A:3-X:1"> → </span><span>X:1</span>'
            '<span title="xcon:X:1-X:3"> → </span><span class="fibre-gone">X:3</span>'
            '<span class="fibre-gone" title="optical:X:3-Z:3"> ⇒ </span><span class="fibre-gone">Z:3</span>') in first
    assert ('<span class="fibre-new">X:5</span><span class="fibre-new" title="optical:X:5-Z:5"> ⇒ </span>'
            '<span class="fibre-new">Z:5</span>') in first
    assert "fibre-gone" not in second  # a degraded try has no new path to compare with
    # detected and finished as the page writes times (UTC, to the second)
    assert "<td>2030-03-17 17:56:42 UTC</td><td>2030-03-17 17:56:45 UTC</td>" in first


def test_a_protected_reservation_is_marked_on_the_list(app) -> None:  # noqa: ANN001
    ui, h = _dora(app)
    plain = ui.post(f"{API}/reservations", json=body(name="plain", src="A:2", dst="C:4", bandwidth=1.0),
                    headers=h).get_json()["id"]
    both = ui.post(f"{API}/reservations", json=body(name="both", protection="1+1", src="A:1", dst="C:3",
                                                    start="2030-03-18T00:00:00Z", end="2030-03-18T01:00:00Z"),
                   headers=h).get_json()["id"]
    listing = ui.get("/reservations").get_data(as_text=True)
    row = {rid: listing[listing.index(f'data-id="{rid}"'):].split("</tr>")[0] for rid in (plain, both)}
    assert 'class="badge protection"' in row[both] and ">1+1</span>" in row[both]
    assert "badge" not in row[plain]


def _controller_app(tmp_path):  # noqa: ANN001, ANN202
    db = str(tmp_path / "ctl.db")
    app = create_app({"DATABASE": db, "TOPOLOGY": "controller", "CLOCK": Clock(T0), "SECRET_KEY": "x"})
    return app, Feed(Database(db))


def test_failed_fibre_and_ports_survive_the_api_and_are_drawn(tmp_path) -> None:  # noqa: ANN001
    app, feed = _controller_app(tmp_path)
    try:
        ui, h = _dora(app)
        feed.topology(mark_failures(spec_to_graph(fig2_testbed()).to_dict(), Failures(CUT)), ts=T0)
        graph = ui.get(f"{API}/topology", headers=h).get_json()["graph"]
        nodes = {n["id"]: n for n in graph["nodes"]}
        links = {e["key"]: e for e in graph["links"]}
        assert nodes["X:3"]["failed"] == "loss of light at X:3" and "failed" not in nodes["X:1"]
        assert links["optical:X:3-Z:3"]["failed"] in CUT.values() and "failed" not in links["optical:X:5-Z:5"]

        for path in ("/topology", "/topology/live"):
            page = ui.get(path).get_data(as_text=True)
            assert 'class="edge edge-optical failed" data-key="optical:X:3-Z:3"' in page
            assert 'class="edge edge-optical" data-key="optical:X:5-Z:5"' in page
            assert "optical:X:3-Z:3 (optical, " in page and "— failed: loss of light at" in page
            assert '<g class="node node-oport failed" data-id="X:3">' in page
            assert "<title>X:3 (oport, ODU2) — failed: loss of light at X:3</title>" in page
            assert page.count('class="fail-ring"') == 2  # X:3 and Z:3
            assert '<g class="node node-oport" data-id="X:5">' in page
            assert 'id="legend-failed"' in page
            fails = page[page.index('id="failure-list"'):]
            assert "<td>fibre X:3–Z:3</td>" in fails and "<td>port Z:3</td>" in fails
            assert fails.index("fibre X:3–Z:3") < fails.index("port X:3")  # fibres first

        feed.topology(spec_to_graph(fig2_testbed()).to_dict(), ts=T0 + 1)  # repaired: nothing marked
        page = ui.get("/topology").get_data(as_text=True)
        assert " failed" not in page.replace("failed fibre", "") and 'id="failure-list"' not in page
        assert 'id="legend-failed"' not in page
    finally:
        feed.db.dispose()
        app.extensions["mlte"].db.dispose()


def test_restoration_events_show_as_warnings(app, client, clock, store) -> None:  # noqa: ANN001
    ui, h = _dora(app)
    rid, old = _lit(app, client, clock, h)
    assert store.mark_restoring(rid, "loss of light at X:3", clock.t + 1)
    assert store.mark_degraded(rid, "no path around the failure",
                               {"cause": "loss of light at X:3", "detected_ts": clock.t + 1,
                                "started_ts": clock.t + 1, "old_path": old["edges"]}, clock.t + 2)
    page = ui.get("/events").get_data(as_text=True)
    for kind, text in (("reservation.restoring", "ACTIVE → RESTORING: loss of light at X:3"),
                       ("reservation.degraded", "RESTORING → DEGRADED: no path around the failure")):
        row = page[page.index(f'data-kind="{kind}"'):].split("</tr>")[0]
        assert 'class="sev-warning"' in page[page.rindex("<tr", 0, page.index(f'data-kind="{kind}"')):][:60]
        assert "<td>warning</td>" in row and text in row
        assert f'href="/reservations/{rid}">(reservation {rid})</a>' in row
    active = page[page.index('data-kind="reservation.active"'):].split("</tr>")[0]
    assert "<td>info</td>" in active


def test_a_revert_shows_with_the_restorations_and_in_the_events(app, client, clock, store) -> None:  # noqa: ANN001
    ui, h = _dora(app)
    rid, old = _lit(app, client, clock, h)
    assert store.mark_restoring(rid, "loss of light at X:3", clock.t + 1)
    circuit, rules = installation({**old, "edges": DETOUR, "xcons": [["X:4", "X:5"], ["Z:5", "Z:4"]]})
    try_ = {"cause": "loss of light at X:3", "detected_ts": clock.t + 1, "started_ts": clock.t + 1.01,
            "old_path": old["edges"], "new_path": DETOUR}
    assert store.mark_restored(rid, [circuit], rules, {**old, "edges": DETOUR, "original": old}, try_, clock.t + 1.5)
    back_circuit, back_rules = installation(old)
    back = {"cause": "revert", "detected_ts": clock.t + 10, "started_ts": clock.t + 40, "old_path": DETOUR,
            "new_path": old["edges"]}
    assert store.revert_refused(rid, "the original path's optical port(s) X:1 are held by another circuit",
                                back, clock.t + 40)
    assert store.mark_reverted(rid, [back_circuit], back_rules, old, {**back, "started_ts": clock.t + 70},
                               clock.t + 70.5)
    page = ui.get(f"/reservations/{rid}").get_data(as_text=True)
    section = page[page.index('id="restorations"'):page.index("Live utilization")]
    reverted, refused = section.index('data-outcome="reverted"'), section.index('data-outcome="revert_failed"')
    assert reverted < refused < section.index('data-outcome="restored"')  # newest first
    assert 'class="state s-active">reverted<' in section and "<td>revert</td>" in section
    assert "held by another circuit" in section[refused:]
    assert 'class="state s-active" id="res-state">ACTIVE<' in page
    events = ui.get("/events").get_data(as_text=True)  # the events page: the revert and the refusal
    assert "reverted to its original path" in events and "stays on its restoration path" in events
