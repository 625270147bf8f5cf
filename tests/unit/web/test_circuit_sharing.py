"""Who rides each lit circuit (grooming, issue 28): three reservations admitted with grooming and lit
on one circuit by what the controller records, a fourth (untagged) on a circuit of its own, and a
circuit the TE loop lit — ``GET /api/v1/circuits/sharing`` and the topology page's "Who rides each
circuit" table show one entry per circuit, its riders and what is free on it."""
from __future__ import annotations

from app.db.engine import Database
from app.db.feed import CircuitRecord, Feed
from tests.lib.provisioning import light
from tests.unit.web.conftest import T0, body, login, new_user

API = "/api/v1"


def _riders(app, client, clock) -> tuple[dict, list[int]]:  # noqa: ANN001
    """dora's three 3 Mbit/s VLAN reservations on one circuit and an untagged 2 Mbit/s one, all lit."""
    app.extensions["mlte"].grooming = True  # what [web] grooming = true sets
    from app.web.auth import create_user

    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, "dora", password="dora-pw")
        s.commit()
    h = {"Authorization": f"Bearer {token}"}
    ids = []
    for i, over in enumerate([{"src_vlan": 100 + i, "dst_vlan": 100 + i, "bandwidth": 3.0} for i in range(3)]
                             + [{"bandwidth": 2.0}]):
        r = client.post(f"{API}/reservations", json=body(name=f"g{i}", **over), headers=h)
        assert r.status_code == 201, r.get_json()
        ids.append(r.get_json()["id"])
        assert client.post(f"{API}/reservations/{ids[-1]}/commit", headers=h).status_code == 200
    clock.t = T0 + 601
    for rid in ids:
        assert light(app.config["DATABASE"], rid, clock.t)
    return h, ids


def test_the_sharing_json_has_one_entry_per_circuit_with_its_riders_and_free_capacity(app, client, clock) -> None:  # noqa: ANN001
    h, ids = _riders(app, client, clock)
    feed = Feed(Database(app.config["DATABASE"]))  # and a circuit the TE loop lit (no reservation)
    try:
        feed.sync_circuits([CircuitRecord("A:3", "B:1", 10.0, (("X", 1, 2), ("Y", 1, 2)))], ts=clock.t)
    finally:
        feed.db.dispose()
    r = client.get(f"{API}/circuits/sharing", headers=h)
    assert r.status_code == 200, r.get_json()
    items = {i["circuit"]: i for i in r.get_json()["items"]}
    assert len(client.get(f"{API}/circuits", headers=h).get_json()["items"]) == 5  # a row per rider, and the TE's
    shared = items["A:3–C:1"]
    assert [x["id"] for x in shared["riders"]] == ids[:3] and shared["shared"]
    assert [(x["bandwidth"], x["vlan"], x["name"]) for x in shared["riders"]] == [(3.0, 100, "g0"), (3.0, 101, "g1"),
                                                                                  (3.0, 102, "g2")]
    assert shared["booked"] == 9.0 and shared["free"] == 1.0 and shared["capacity"] == 10.0
    assert shared["link"] == "packet:A:3-C:1" and len(shared["rows"]) == 3
    alone = items["A:4–C:2"]  # the untagged one cannot share: a circuit of its own
    assert [x["id"] for x in alone["riders"]] == [ids[3]] and not alone["shared"] and alone["free"] == 8.0
    te = items["A:3–B:1"]
    assert te["riders"] == [] and te["free"] is None and te["booked"] == 0
    # somebody else sees the riders and the numbers, not the names
    other = client.get(f"{API}/circuits/sharing", headers=new_user(app, "eve")).get_json()["items"]
    assert all("name" not in x for i in other for x in i["riders"])
    assert client.get(f"{API}/circuits/sharing?x=1", headers=h).status_code == 400
    assert client.get(f"{API}/circuits/sharing").status_code == 401


def test_the_topology_page_shows_who_rides_each_circuit(app, client, clock) -> None:  # noqa: ANN001
    _h, ids = _riders(app, client, clock)
    ui = app.test_client()
    login(ui)
    page = ui.get("/topology/live").get_data(as_text=True)
    assert 'id="sharing-list"' in page
    row = page[page.index('data-link="packet:A:3-C:1"'):]
    row = row[:row.index("</tr>")]
    assert f'data-riders="{ids[0]},{ids[1]},{ids[2]}"' in row and "shared by 3" in row
    assert "VLAN 101" in row and '<td class="num free">1</td>' in row
    other = page[page.index('data-link="packet:A:4-C:2"'):]
    assert f'data-riders="{ids[3]}"' in other and "shared by" not in other[:other.index("</tr>")]
