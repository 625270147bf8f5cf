"""The server-rendered UI through the Flask test client: login, CSRF, form validation, pages."""
from __future__ import annotations

import re

import pytest

from app.db.engine import Database
from app.db.feed import Feed
from app.web.auth import create_user
from app.web.timeutil import parse_iso
from tests.unit.web.conftest import T0, counts, csrf, login


def test_pages_need_login(ui) -> None:  # noqa: ANN001
    for path in ("/reservations", "/reservations/new", "/topology", "/events"):
        r = ui.get(path)
        assert r.status_code == 302 and "/login" in r.headers["Location"]


def test_login_wrong_password(ui) -> None:  # noqa: ANN001
    page = ui.get("/login").get_data(as_text=True)
    r = ui.post("/login", data={"username": "dora", "password": "nope", "csrf_token": csrf(page)})
    assert r.status_code == 401 and "wrong user name or password" in r.get_data(as_text=True)


def test_forms_need_csrf(ui, app) -> None:  # noqa: ANN001
    r = ui.post("/login", data={"username": "dora", "password": "dora-pw"})
    assert r.status_code == 400
    login(ui)
    before = counts(app)
    r = ui.post("/reservations/new", data={"name": "x", "src": "A:1", "dst": "C:3", "bandwidth": "1",
                                           "end": "2030-03-18T10:00"})
    assert r.status_code == 400 and counts(app) == before


def _form(ui, **over) -> dict:  # noqa: ANN001, ANN003
    page = ui.get("/reservations/new").get_data(as_text=True)
    data = {"name": "ui-res", "src": "A:1", "dst": "C:3", "bandwidth": "3", "start": "2030-03-17T18:00",
            "end": "2030-03-17T19:00", "mode": "static", "csrf_token": csrf(page)}
    data.update(over)
    return data


def test_create_commit_cancel_through_forms(ui, app) -> None:  # noqa: ANN001
    login(ui)
    r = ui.post("/reservations/new", data=_form(ui))
    assert r.status_code == 302, r.get_data(as_text=True)
    detail_url = r.headers["Location"]
    page = ui.get(detail_url).get_data(as_text=True)
    assert "HELD" in page and 'class="edge' in page and "on-path" in page
    listing = ui.get("/reservations").get_data(as_text=True)
    assert "ui-res" in listing
    ui.post(detail_url + "/commit", data={"csrf_token": csrf(page)})
    page = ui.get(detail_url).get_data(as_text=True)
    assert 'id="res-state">RESERVED' in page
    ui.post(detail_url + "/cancel", data={"csrf_token": csrf(page)})
    assert 'id="res-state">CANCELLED' in ui.get(detail_url).get_data(as_text=True)


@pytest.mark.parametrize(("over", "message"), [
    ({"bandwidth": "-1"}, "bandwidth must be at least 0.001 Mbit/s"),
    ({"src": "nonsense"}, "SWITCH:PORT"),
    ({"end": "2030-03-17T17:00"}, "end must be after start"),
    ({"dst": "Q:1"}, "unknown switch"),
    ({"bandwidth": "5000"}, "not admitted"),
])
def test_form_validation_shows_field_errors(ui, app, over, message) -> None:  # noqa: ANN001
    login(ui)
    before = counts(app)
    r = ui.post("/reservations/new", data=_form(ui, **over))
    assert r.status_code == 400 and message in r.get_data(as_text=True)
    assert counts(app) == before


def test_users_see_only_their_own(ui, app) -> None:  # noqa: ANN001
    login(ui, "dora")
    detail_url = ui.post("/reservations/new", data=_form(ui)).headers["Location"]
    other = app.test_client()
    login(other, "eve")
    assert other.get(detail_url).status_code == 403
    assert "ui-res" not in other.get("/reservations").get_data(as_text=True)


def test_topology_and_events_pages(ui, app, clock) -> None:  # noqa: ANN001
    feed = Feed(Database(app.config["DATABASE"]))
    try:
        feed.circuit("A-C", "A:3", "C:1", 10.0, [("X", 1, 3), ("Z", 3, 2)])
        feed.event("circuit.up", "circuit A-C up", ts=T0)
    finally:
        feed.db.dispose()
    login(ui)
    topo = ui.get("/topology").get_data(as_text=True)
    assert "band-packet" in topo and "band-optical" in topo and "edge-adaptation" in topo
    assert "X:1↔X:3" in topo.replace("</code>", "").replace("<code>", "")
    assert "circuit A-C up" in ui.get("/events").get_data(as_text=True)


def _held(ui, **over) -> str:  # noqa: ANN001, ANN003
    r = ui.post("/reservations/new", data=_form(ui, **over))
    assert r.status_code == 302, r.get_data(as_text=True)
    return r.headers["Location"]


def _modify(ui, detail_url: str, **fields) -> tuple[int, str]:  # noqa: ANN001, ANN003
    page = ui.get("/reservations/new").get_data(as_text=True)
    data = {"csrf_token": csrf(page), "modify-bandwidth": "3", "modify-end": "2030-03-17T19:00"}
    data.update({f"modify-{k}": v for k, v in fields.items()})
    r = ui.post(detail_url + "/modify", data=data)
    return r.status_code, r.get_data(as_text=True)


def test_modify_through_the_detail_page(ui, app) -> None:  # noqa: ANN001
    login(ui)
    detail_url = _held(ui)
    page = ui.get(detail_url).get_data(as_text=True)
    assert 'id="modify-form"' in page and 'value="3"' in page and 'value="2030-03-17 19:00"' in page  # as the page writes times
    status, _ = _modify(ui, detail_url, bandwidth="6", end="2030-03-17T20:30")
    assert status == 302
    page = ui.get(detail_url).get_data(as_text=True)
    assert "6 Mbit/s" in page and "2030-03-17 20:30:00 UTC" in page and "modified" in page
    history = page[page.index('id="history"'):]
    assert "bandwidth 3.0 → 6.0 Mbit/s; end 2030-03-17T19:00:00Z → 2030-03-17T20:30:00Z" in history
    assert "<td>dora</td><td>modify</td>" in history
    with app.extensions["mlte"].db.session() as s:
        from app.db.models import Reservation

        res = s.get(Reservation, int(detail_url.rsplit("/", 1)[1]))
        assert (res.bandwidth, res.end_ts) == (6.0, parse_iso("2030-03-17T20:30:00Z"))


def test_modify_errors_are_shown_next_to_the_field_and_nothing_changes(ui, app) -> None:  # noqa: ANN001
    login(ui)
    detail_url = _held(ui)
    before = counts(app)
    status, page = _modify(ui, detail_url, bandwidth="5000")
    assert status == 400 and counts(app) == before
    err = re.search(r'id="modify-bandwidth-error" data-field="bandwidth">([^<]*)<', page)
    assert err and err.group(1).startswith("not admitted") and "limited by Z:2 with 10 Mbit/s" in err.group(1)  # the path's limit
    assert 'aria-invalid="true"' in page
    status, page = _modify(ui, detail_url, end="2030-03-17T17:30")
    assert status == 400 and 'id="modify-end-error" data-field="end">end must be after start' in page
    assert counts(app) == before
    other = app.test_client()
    login(other, "eve")
    assert _modify(other, detail_url, bandwidth="4")[0] == 403


def test_clone_prefills_a_new_form(ui, app) -> None:  # noqa: ANN001
    login(ui)
    detail_url = _held(ui, name="orig", description="weekly backup", src_vlan="120", ero="A X:1 X:3 Z:3 Z:2 C")
    res_id = detail_url.rsplit("/", 1)[1]
    assert f'href="/reservations/new?clone={res_id}"' in ui.get(detail_url).get_data(as_text=True)
    page = ui.get(f"/reservations/new?clone={res_id}").get_data(as_text=True)
    for expected in ('value="copy of orig"', "weekly backup", 'value="A:1"', 'value="120"', 'value="C:3"',
                     'value="3"', 'value="2030-03-17T18:00"', 'value="2030-03-17T19:00"',
                     'value="A X:1 X:3 Z:3 Z:2 C"', f"a copy of reservation {res_id}"):
        assert expected in page, expected
    other = app.test_client()
    login(other, "eve")
    assert other.get(f"/reservations/new?clone={res_id}").status_code == 403


def test_list_filters(ui, app) -> None:  # noqa: ANN001
    login(ui)
    _held(ui, name="one", bandwidth="1")
    _held(ui, name="two", src="A:2", dst="C:4", bandwidth="2")
    page = ui.get("/reservations?endpoint=A:1").get_data(as_text=True)
    assert ">one<" in page and ">two<" not in page
    page = ui.get("/reservations?endpoint=A&min_bandwidth=1.5").get_data(as_text=True)
    assert ">two<" in page and ">one<" not in page
    page = ui.get("/reservations?state=RESERVED").get_data(as_text=True)
    assert "No reservations match" in page
    page = ui.get("/reservations?min_bandwidth=abc").get_data(as_text=True)
    assert "filter: min_bandwidth must be a number" in page


def test_endpoint_filter_matches_the_port_exactly(ui, app) -> None:  # noqa: ANN001
    """``A:1`` is port 1, not every port whose number starts with 1 (``A:10``)."""
    from app.db.models import Reservation

    login(ui)
    _held(ui, name="one")
    with app.extensions["mlte"].db.session() as s:
        res = s.get(Reservation, 1)
        s.add(Reservation(name="ten", description="", src="A:10", dst="C:3", bandwidth=1.0, start_ts=T0,
                          end_ts=T0 + 60, mode="static", state="CANCELLED", owner_id=res.owner_id,
                          created_ts=T0, updated_ts=T0))
        s.commit()
    page = ui.get("/reservations?endpoint=A:1").get_data(as_text=True)
    assert ">one<" in page and ">ten<" not in page


def test_names_are_escaped(ui, app) -> None:  # noqa: ANN001
    login(ui)
    evil = '<script>alert("x")</script>'
    detail_url = _held(ui, name=evil, description=f"<img src=x onerror=alert(1)>{evil}")
    for page in (ui.get(detail_url).get_data(as_text=True), ui.get("/reservations").get_data(as_text=True),
                 ui.get(detail_url.replace("/reservations/", "/reservations/new?clone=")).get_data(as_text=True)):
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "&lt;script&gt;alert" in page


def test_login_redirects_only_to_this_site(ui) -> None:  # noqa: ANN001
    for target, expected in (("/events", "/events"), ("//evil.example/", "/reservations"),
                             ("/\\evil.example/", "/reservations"), ("https://evil.example/", "/reservations")):
        c = ui.application.test_client()
        page = c.get("/login").get_data(as_text=True)
        r = c.post(f"/login?next={target}", data={"username": "dora", "password": "dora-pw",
                                                  "csrf_token": csrf(page)})
        assert r.status_code == 302 and r.headers["Location"] == expected, (target, r.headers["Location"])


def test_pager_walks_every_page(ui, app) -> None:  # noqa: ANN001
    """The pager keeps the filters and replaces ``offset`` (a second ``offset`` would be ignored)."""
    login(ui)
    for i in range(5):
        _held(ui, name=f"p{i}", start=f"2030-03-{18 + i}T10:00", end=f"2030-03-{18 + i}T11:00")
    url, seen = "/reservations?limit=2&endpoint=A", []
    for _ in range(5):
        page = ui.get(url).get_data(as_text=True)
        seen += re.findall(r">(p\d)<", page)
        m = re.search(r'id="older" href="([^"]+)"', page)
        if m is None:
            break
        url = "/reservations" + m.group(1).replace("&amp;", "&")
        assert url.count("offset=") == 1 and "endpoint=A" in url and "limit=2" in url
    assert seen == ["p4", "p3", "p2", "p1", "p0"]
    assert "5–5 of 5" in page
    back = re.search(r'id="newer" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert re.findall(r">(p\d)<", ui.get("/reservations" + back).get_data(as_text=True)) == ["p2", "p1"]


def test_list_shows_vlans_and_plain_bandwidths(ui, app) -> None:  # noqa: ANN001
    """Issue 14 item 8: the list showed ``A:1.100`` (reads like a port) and ``1e-12``."""
    from app.db.models import Reservation
    from tests.unit.web.conftest import body

    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, "ada", password="ada-pw")
        s.commit()
    h = {"Authorization": f"Bearer {token}"}
    assert ui.post("/api/v1/reservations", json=body(name="v", src_vlan=100, bandwidth=2.5), headers=h).status_code == 201
    assert ui.post("/api/v1/reservations", json=body(name="t", bandwidth=0.5), headers=h).status_code == 201
    with app.extensions["mlte"].db.session() as s:  # a row from before MIN_BANDWIDTH existed
        s.query(Reservation).filter_by(name="t").one().bandwidth = 1e-12
        s.commit()
    login(ui, "ada")
    page = ui.get("/reservations").get_data(as_text=True)
    assert "A:1 VLAN 100" in page and "A:1.100" not in page
    assert ">2.5<" in page and "&lt; 0.001" in page and "1e-12" not in page


def test_topology_summary_counts_switches_hosts_fibres_and_xcons_apart(ui) -> None:  # noqa: ANN001
    """Issue 14 item 8: hosts were counted as packet nodes and possible XCONs as fibres."""
    login(ui)
    page = ui.get("/topology").get_data(as_text=True)
    assert '<td id="count-packet">3 switches, 4 hosts; 0 packet links, 4 host links</td>' in page
    assert '<td id="count-optical">3 OTS with 16 ports; 5 fibres; 0 active XCONs (of 26 possible)</td>' in page
