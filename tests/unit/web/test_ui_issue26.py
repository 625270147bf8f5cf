"""Issue 26 item 6, the pages a new user met: no 404 for the favicon, a 404 page that names the
missing reservation, the topology page saying "built-in" (not "live") over the built-in lab and
listing the reservations booked but not lit yet, the events page listing the plans carried out."""
from __future__ import annotations

from tests.unit.web.conftest import T0, body, iso, login


def test_favicon_is_served_and_linked(ui) -> None:  # noqa: ANN001
    r = ui.get("/favicon.ico")
    assert r.status_code == 200 and r.mimetype == "image/svg+xml" and b"<svg" in r.data
    r.close()
    page = ui.get("/login").get_data(as_text=True)
    assert '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">' in page
    r = ui.get("/static/favicon.svg")
    assert r.status_code == 200
    r.close()


def test_missing_reservation_page_names_it(ui) -> None:  # noqa: ANN001
    login(ui)
    r = ui.get("/reservations/99999")
    assert r.status_code == 404 and "no reservation 99999" in r.get_data(as_text=True)


def test_topology_page_says_built_in_over_the_lab(ui) -> None:  # noqa: ANN001
    login(ui)
    page = ui.get("/topology").get_data(as_text=True)
    assert 'id="live-status" class="live-status" data-label="built-in">built-in</small>' in page
    assert ">live<" not in page


def _admin_client(app):  # noqa: ANN001, ANN201
    """A UI client logged in as an admin, and that admin's API token."""
    from app.web.auth import create_user

    with app.extensions["mlte"].db.session() as s:
        _, tok = create_user(s, "opal", admin=True, password="opal-pw")
        s.commit()
    c = app.test_client()
    login(c, "opal")
    return c, {"Authorization": f"Bearer {tok}"}


def test_topology_page_lists_booked_and_provisioning_reservations(app, clock) -> None:  # noqa: ANN001
    c, h = _admin_client(app)
    assert "No reservation is waiting for its circuits." in c.get("/topology").get_data(as_text=True)
    early = c.post("/api/v1/reservations", json=body(name="early"), headers=h).get_json()["id"]
    later = c.post("/api/v1/reservations", json=body(name="later", start=iso(T0 + 7200), end=iso(T0 + 9000)),
                   headers=h).get_json()["id"]
    for rid in (early, later):
        assert c.post(f"/api/v1/reservations/{rid}/commit", headers=h).status_code == 200
    clock.t = T0 + 601  # the early one's window started: PROVISIONING until the controller lights it
    page = c.get("/topology").get_data(as_text=True)
    pending = page[page.index('id="pending-list"'):]
    assert f'data-reservation="{early}"' in pending and f'data-reservation="{later}"' in pending
    assert "PROVISIONING (the controller is setting it up)" in pending and "RESERVED" in pending
    live = c.get("/topology/live").get_data(as_text=True)
    assert f'data-reservation="{later}"' in live


def test_events_page_lists_the_plans_the_controller_carried_out(app) -> None:  # noqa: ANN001
    from app.db.migrate import open_migrated
    from app.db.provisioning import ProvisioningStore

    c, _ = _admin_client(app)
    store = ProvisioningStore(open_migrated(app.config["DATABASE"]))
    try:
        step = {"id": "x1", "kind": "xcon", "target": "X:1-X:3", "deps": [], "started_at": T0,
                "finished_at": T0 + 0.2, "ok": True, "error": None}
        pid = store.record_plan({"kind": "reoptimise", "mode": "one_shot", "reservation_id": None, "state": "done",
                                 "error": None, "started_at": T0, "finished_at": T0 + 0.25, "steps": [step]})
    finally:
        store.db.dispose()
    page = c.get("/events").get_data(as_text=True)
    assert f"reoptimise plan {pid} done: 1 step in 0.25 s (one-shot)" in page and "plan.done" in page


def test_modify_form_shows_the_end_as_the_page_writes_times(app) -> None:  # noqa: ANN001
    import re

    from tests.unit.web.conftest import csrf

    c, h = _admin_client(app)
    rid = c.post("/api/v1/reservations", json=body(), headers=h).get_json()["id"]
    page = c.get(f"/reservations/{rid}").get_data(as_text=True)
    field = re.search(r'<input[^>]*id="modify-end"[^>]*>', page).group(0)
    end = iso(T0 + 4200)  # 2030-03-17T...Z
    shown = end[:10] + " " + end[11:16]
    assert 'type="text"' in field and f'value="{shown}"' in field and 'placeholder="YYYY-MM-DD HH:MM"' in field
    assert f"→ {shown}:40 UTC" in page  # the same way the window above it writes the end
    later = iso(T0 + 7200)
    r = c.post(f"/reservations/{rid}/modify", data={"csrf_token": csrf(page), "modify-bandwidth": "2",
                                                    "modify-end": later[:10] + " " + later[11:16]})
    assert r.status_code == 302
    assert c.get(f"/api/v1/reservations/{rid}", headers=h).get_json()["end"] == later[:17] + "00Z"  # to the minute


def test_a_packet_link_over_another_switch_is_drawn_as_an_arc() -> None:
    """A circuit A–C that LLDP reports as a packet link must not be drawn straight through B (its
    label on top of B read as traffic via B); A–B, neighbours in the row, stays a straight line."""
    from app.web.drawing import draw, layout
    from topology.spec import fig2_testbed, spec_to_graph

    g = spec_to_graph(fig2_testbed())
    ac = g.add_packet_link("A", 3, "C", 1, capacity=10.0, source="lldp")
    ab = g.add_packet_link("A", 4, "B", 1, capacity=10.0, source="lldp")
    pos = layout(g)
    assert pos["A"][1] == pos["B"][1] == pos["C"][1] and pos["A"][0] < pos["B"][0] < pos["C"][0]
    lines = {ln["key"]: ln for ln in draw(g).lines}
    assert lines[ac]["bend"] != 0
    _x, label_y = lines[ac]["label"]
    assert abs(label_y - pos["B"][1]) > 40  # the Mbit/s label is not on top of B
    assert lines[ab]["bend"] == 0
