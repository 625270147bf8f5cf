"""Admission with grooming (issue 28) on one SQLite database, one live server: 40 concurrent 3 Mbit/s
requests A:1 → C:3 for the same hour on Fig. 2 admit exactly 6 (the two circuits from A carry three
each at 10 Mbit/s), never more; the answers say which ride a circuit and which light one; the what-if
lists the booked circuits with what is free on each; a live reservation's modify is checked on its
shared circuit, not refused because its ports are "booked whole" by the sharers."""
from __future__ import annotations

from collections import Counter, defaultdict

from sqlalchemy import select

from app.db.models import Reservation
from app.web import create_app
from app.web.auth import create_user
from pce.bookings import peak_load
from pce.grooming import segments
from tests.lib.webrace import post_all, request
from tests.lib.webserver import serve_app
from tests.unit.web.conftest import T0, body, iso

X_Z = "circuit:X:1~X:3~Z:3~Z:2"


def tagged(body: dict, vlan: int) -> dict:
    """A request with a VLAN of its own at both ends: what sharing a circuit needs (the rules match it)."""
    return {**body, "src_vlan": vlan, "dst_vlan": vlan}


def _app(tmp_path, clock=None, grooming: bool = True):  # noqa: ANN001, ANN202
    conf = {"DATABASE": str(tmp_path / "groom.db"), "TOPOLOGY": "fig2", "SECRET_KEY": "x", "GROOMING": grooming}
    if clock is not None:
        conf["CLOCK"] = clock
    return create_app(conf)


def test_forty_concurrent_requests_admit_six(tmp_path) -> None:  # noqa: ANN001
    app = _app(tmp_path)
    st = app.extensions["mlte"]
    try:
        with st.db.session() as s:
            _, token = create_user(s, "racer")
            s.commit()
            graph = st.topology.graph(s)
        with serve_app(app, threads=16) as url:
            codes = post_all(url, token, [tagged(request(f"g{i}", "A:1", "C:3", 3.0), 100 + i) for i in range(40)],
                             workers=40)
        assert Counter(codes) == {201: 6, 409: 34}, Counter(codes)
        with st.db.session() as s:
            rows = list(s.execute(select(Reservation)).scalars())
        assert len(rows) == 6
        on: dict[str, list[Reservation]] = defaultdict(list)
        for r in rows:
            (seg,) = segments(graph, r.path["edges"])
            on[seg.key].append(r)
        assert len(on) == 2 and all(len(v) == 3 for v in on.values())  # two circuits, three on each
        for rs in on.values():
            assert peak_load(((r.start_ts, r.end_ts, r.bandwidth) for r in rs), 0, 1e12) <= 10.0
            assert sorted(c["use"] for r in rs for c in r.path["circuits"]) == ["lights", "rides", "rides"]
    finally:
        st.db.dispose()


def test_without_grooming_each_takes_a_whole_circuit(tmp_path) -> None:  # noqa: ANN001
    app = _app(tmp_path, grooming=False)
    st = app.extensions["mlte"]
    try:
        with st.db.session() as s:
            _, token = create_user(s, "racer")
            s.commit()
        with serve_app(app, threads=8) as url:
            codes = post_all(url, token, [tagged(request(f"g{i}", "A:1", "C:3", 3.0), 100 + i) for i in range(10)],
                             workers=10)
        assert Counter(codes) == {201: 2, 409: 8}
    finally:
        st.db.dispose()


def test_answers_say_ride_or_light_and_whatif_lists_free_capacity(tmp_path) -> None:  # noqa: ANN001
    from tests.unit.web.conftest import Clock

    clock = Clock()
    app = _app(tmp_path, clock)
    client = app.test_client()
    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, "alice")
        s.commit()
    h = {"Authorization": f"Bearer {token}"}
    try:
        first = client.post("/api/v1/reservations", json=tagged(body(bandwidth=3.0), 100), headers=h)
        assert first.status_code == 201, first.json
        (c1,) = first.json["path"]["circuits"]
        assert c1["use"] == "lights" and c1["free"] == 10.0 and c1["circuit"] == X_Z
        second = client.post("/api/v1/reservations", json=tagged(body(bandwidth=3.0), 101), headers=h)
        (c2,) = second.json["path"]["circuits"]
        assert c2["use"] == "rides" and c2["free"] == 7.0 and c2["reservations"] == [str(first.json["id"])]
        q = f"/api/v1/available?src=A:1&dst=C:3&start={iso(T0 + 600)}&end={iso(T0 + 4200)}"
        wi = client.get(q, headers=h)
        assert wi.status_code == 200, wi.json
        assert [(c["circuit"], c["free"], c["booked_peak"]) for c in wi.json["circuits"]] == [(X_Z, 4.0, 6.0)]
        assert wi.json["available"] == 10.0  # a fresh circuit on the other route is wider
        # modify of a groomed reservation: checked on its circuit (4 free + its own 3)
        rid = second.json["id"]
        assert client.post(f"/api/v1/reservations/{rid}/commit", headers=h).status_code == 200
        grow = client.patch(f"/api/v1/reservations/{rid}", json={"bandwidth": 7.0}, headers=h)
        assert grow.status_code == 200, grow.json
        too_much = client.patch(f"/api/v1/reservations/{rid}", json={"bandwidth": 7.5}, headers=h)
        assert too_much.status_code == 409
    finally:
        app.extensions["mlte"].db.dispose()


def test_the_cli_flag_turns_grooming_on() -> None:
    import argparse

    from app.cli import web

    parser = argparse.ArgumentParser()
    web.register(parser.add_subparsers())
    assert parser.parse_args(["web", "--grooming"]).grooming is True
    assert parser.parse_args(["web"]).grooming is None


def test_the_form_result_and_detail_page_say_ride_or_light(ui, app) -> None:  # noqa: ANN001
    from tests.unit.web.conftest import login
    from tests.unit.web.test_ui import _form

    app.extensions["mlte"].grooming = True  # what [web] grooming = true sets
    login(ui)
    pages = []
    for vlan in (100, 101):
        r = ui.post("/reservations/new", data=_form(ui, src_vlan=str(vlan), dst_vlan=str(vlan)), follow_redirects=True)
        assert r.status_code == 200
        pages.append(r.get_data(as_text=True))
    assert "is HELD; it lights a new circuit" in pages[0] and "lights a new circuit A – C" in pages[0]
    assert "is HELD; it rides an existing circuit" in pages[1]
    assert "rides the circuit A – C (X:1 X:3 Z:3 Z:2, 10 Mbit/s) booked by reservation(s) 1: 7 Mbit/s were free" \
        in pages[1]


def test_a_held_groomed_reservation_is_re_routed_with_grooming(tmp_path) -> None:  # noqa: ANN001
    from tests.unit.web.conftest import Clock

    app = _app(tmp_path, Clock())
    client = app.test_client()
    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, "alice")
        s.commit()
    h = {"Authorization": f"Bearer {token}"}
    try:
        ids = [client.post("/api/v1/reservations", json=tagged(body(bandwidth=3.0), 100 + i), headers=h).json["id"]
               for i in range(2)]  # both on one circuit
        r = client.patch(f"/api/v1/reservations/{ids[1]}", json={"bandwidth": 7.0}, headers=h)  # HELD: re-routed
        assert r.status_code == 200, r.json
        (c,) = r.json["path"]["circuits"]
        assert c["use"] == "rides" and c["free"] == 7.0 and c["circuit"] == X_Z  # 10 - the other's 3
        r = client.patch(f"/api/v1/reservations/{ids[0]}", json={"bandwidth": 4.0}, headers=h)
        (c,) = r.json["path"]["circuits"]
        assert c["use"] == "lights" and c["circuit"] != X_Z  # 3 left on it: the other circuit
    finally:
        app.extensions["mlte"].db.dispose()
