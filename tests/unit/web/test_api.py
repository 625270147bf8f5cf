"""REST API: every endpoint and the whole life cycle (hold → commit → active → finished, cancel, fail,
expired hold, modify) against the Fig. 2 testbed through the real PCE."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from app.db.engine import Database
from app.db.feed import Feed
from app.db.lifecycle import START_REACHED
from app.db.models import AuditEntry
from monitor.events import UNCONSTRAINED_IMBALANCE
from monitor.events import Event as MonEvent
from monitor.store import MonitorStore
from tests.lib.provisioning import light
from tests.unit.web.conftest import T0, body, counts, iso

API = "/api/v1"


def create(client, users, who="alice", **over):  # noqa: ANN001, ANN003, ANN201
    r = client.post(f"{API}/reservations", json=body(**over), headers=users.h(who))
    return r


def test_create_hold_commit_cancel(client, users, app) -> None:  # noqa: ANN001
    r = create(client, users)
    assert r.status_code == 201, r.get_json()
    res = r.get_json()
    assert res["state"] == "HELD" and res["owner"] == "alice"
    assert r.headers["Location"] == f"{API}/reservations/{res['id']}"
    assert res["path"]["nodes"][0] == "A" and res["path"]["nodes"][-1] == "C"
    assert res["hold_expires"] == iso(T0 + 300)
    rid = res["id"]

    r = client.post(f"{API}/reservations/{rid}/commit", headers=users.h("alice"))
    assert r.status_code == 200 and r.get_json()["state"] == "RESERVED"
    assert r.get_json()["hold_expires"] is None
    r = client.post(f"{API}/reservations/{rid}/commit", headers=users.h("alice"))
    assert r.status_code == 409
    assert r.get_json()["error"]["field"] == "state" and "RESERVED" in r.get_json()["error"]["message"]

    r = client.post(f"{API}/reservations/{rid}/cancel", headers=users.h("alice"))
    assert r.status_code == 200 and r.get_json()["state"] == "CANCELLED"
    r = client.post(f"{API}/reservations/{rid}/cancel", headers=users.h("alice"))
    assert r.status_code == 409

    hist = client.get(f"{API}/reservations/{rid}/history", headers=users.h("alice")).get_json()["items"]
    assert [h["action"] for h in hist] == ["create", "transition", "transition"]
    assert [h["detail"].get("to") for h in hist[1:]] == ["RESERVED", "CANCELLED"]
    events = client.get(f"{API}/events", headers=users.h("alice")).get_json()["items"]
    assert {e["kind"] for e in events} == {"reservation.reserved", "reservation.cancelled"}


def test_provisioning_activation_and_finish(client, users, clock, app) -> None:  # noqa: ANN001
    """The start time moves it to PROVISIONING (not ACTIVE); the controller lights it (ACTIVE, with its
    circuit and rules in the answer); the end time finishes it and the installation is to be released."""
    rid = create(client, users).get_json()["id"]
    client.post(f"{API}/reservations/{rid}/commit", headers=users.h("alice"))
    clock.t = T0 + 601
    r = client.get(f"{API}/reservations/{rid}", headers=users.h("alice")).get_json()
    assert r["state"] == "PROVISIONING" and r["state_reason"] == START_REACHED
    assert r["circuits"] == [] and r["rules"] == []
    assert light(app.config["DATABASE"], rid, clock.t) is True
    r = client.get(f"{API}/reservations/{rid}", headers=users.h("alice")).get_json()
    assert r["state"] == "ACTIVE" and r["state_reason"] == "lit by the controller"
    (circuit,) = r["circuits"]
    assert (circuit["a_end"], circuit["z_end"], circuit["state"], circuit["reservation_id"]) == ("A:3", "C:1", "ACTIVE", rid)
    assert [(x["ots"], x["in_port"], x["out_port"], x["active"]) for x in circuit["xcons"]] == [
        ("X", 1, 3, True), ("Z", 3, 2, True)]
    assert [(x["switch"], x["cookie"], x["installed"]) for x in r["rules"]] == [
        ("A", "0x4d4c544500000100", True), ("C", "0x4d4c544500000101", True)]
    assert r["rules"][0]["match"] == {"eth_type": 2048, "vlan_vid": 100} and r["rules"][0]["actions"] == [{"output": 3}]
    assert r["rules"][0]["installed_at"] == iso(T0 + 601) and r["rules"][0]["removed_at"] is None
    listed = client.get(f"{API}/reservations", headers=users.h("alice")).get_json()["items"][0]
    assert "circuits" not in listed  # the list stays light; the detail has them
    clock.t = T0 + 4200
    r = client.get(f"{API}/reservations/{rid}", headers=users.h("alice")).get_json()
    assert r["state"] == "FINISHED" and r["state_reason"] == "end time reached"
    r = client.post(f"{API}/reservations/{rid}/cancel", headers=users.h("alice"))
    assert r.status_code == 409 and "final state" in r.get_json()["error"]["message"]
    hist = client.get(f"{API}/reservations/{rid}/history", headers=users.h("alice")).get_json()["items"]
    assert [h["detail"].get("to") for h in hist[1:]] == ["RESERVED", "PROVISIONING", "ACTIVE", "FINISHED"]
    assert hist[3]["detail"]["by"] == "controller" and hist[3]["user_id"] is None


@pytest.mark.parametrize("lit", [False, True])
def test_cancel_provisioning_or_active(client, users, clock, app, lit: bool) -> None:  # noqa: ANN001
    rid = create(client, users).get_json()["id"]
    client.post(f"{API}/reservations/{rid}/commit", headers=users.h("alice"))
    clock.t = T0 + 700
    if lit:
        light(app.config["DATABASE"], rid, clock.t)
    r = client.post(f"{API}/reservations/{rid}/cancel", headers=users.h("alice"))
    assert r.status_code == 200 and r.get_json()["state"] == "CANCELLED"


def test_expired_hold_cannot_be_committed_and_frees_capacity(client, users, clock, app) -> None:  # noqa: ANN001
    # two A:1→C:3 reservations fill both optical routes out of A (oports are taken whole)
    ids = [create(client, users, name=f"r{i}").get_json()["id"] for i in range(2)]
    assert create(client, users, name="third").status_code == 409
    clock.t = T0 + 301
    before = counts(app)
    r = client.post(f"{API}/reservations/{ids[0]}/commit", headers=users.h("alice"))
    assert r.status_code == 409
    assert r.get_json()["error"]["state"] == "EXPIRED" and "expired" in r.get_json()["error"]["message"]
    assert counts(app) == before  # the rejected request wrote nothing (not even the expiry)
    got = client.get(f"{API}/reservations/{ids[0]}", headers=users.h("alice")).get_json()
    assert got["state"] == "CANCELLED" and got["state_reason"] == "hold expired"
    assert create(client, users, name="after-expiry").status_code == 201


def test_fail_is_admin_only(client, users) -> None:  # noqa: ANN001
    rid = create(client, users).get_json()["id"]
    client.post(f"{API}/reservations/{rid}/commit", headers=users.h("alice"))
    r = client.post(f"{API}/reservations/{rid}/fail", json={"reason": "fibre cut"}, headers=users.h("alice"))
    assert r.status_code == 403 and r.get_json()["error"]["field"] == "Authorization"
    r = client.post(f"{API}/reservations/{rid}/fail", json={"reason": "fibre cut"}, headers=users.h("root"))
    assert r.status_code == 200 and r.get_json()["state"] == "FAILED"
    assert r.get_json()["state_reason"] == "fibre cut"
    r = client.post(f"{API}/reservations/{rid}/fail", json={"reason": "again"}, headers=users.h("root"))
    assert r.status_code == 409


def test_modify_is_rechecked(client, users, app) -> None:  # noqa: ANN001
    rid = create(client, users, bandwidth=2).get_json()["id"]
    r = client.patch(f"{API}/reservations/{rid}", json={"bandwidth": 8}, headers=users.h("alice"))
    assert r.status_code == 200 and r.get_json()["bandwidth"] == 8
    before = counts(app)
    r = client.patch(f"{API}/reservations/{rid}", json={"bandwidth": 50}, headers=users.h("alice"))
    err = r.get_json()["error"]
    assert r.status_code == 409 and err["field"] == "bandwidth" and err["bottleneck"]
    assert counts(app) == before
    assert client.get(f"{API}/reservations/{rid}", headers=users.h("alice")).get_json()["bandwidth"] == 8
    r = client.patch(f"{API}/reservations/{rid}", json={"end": iso(T0 + 7200)}, headers=users.h("alice"))
    assert r.status_code == 200 and r.get_json()["end"] == iso(T0 + 7200)
    r = client.patch(f"{API}/reservations/{rid}", json={"end": iso(T0 + 100)}, headers=users.h("alice"))
    assert r.status_code == 400 and r.get_json()["error"]["field"] == "end"
    r = client.patch(f"{API}/reservations/{rid}", json={"name": "x"}, headers=users.h("alice"))
    assert r.status_code == 400 and r.get_json()["error"]["field"] == "name"
    actions = [a.action for a in app.extensions["mlte"].db.session().execute(select(AuditEntry)).scalars()]
    assert actions == ["create", "modify", "modify"]


def test_modify_extension_collides_with_later_booking(client, users) -> None:  # noqa: ANN001
    first = create(client, users, name="early", end=iso(T0 + 4200)).get_json()["id"]
    # fill both optical routes right after `first` ends
    for i in range(2):
        assert create(client, users, name=f"late{i}", start=iso(T0 + 4200), end=iso(T0 + 8000)).status_code == 201
    r = client.patch(f"{API}/reservations/{first}", json={"end": iso(T0 + 5000)}, headers=users.h("alice"))
    assert r.status_code == 409 and r.get_json()["error"]["bottleneck"]


def test_owner_checks(client, users) -> None:  # noqa: ANN001
    rid = create(client, users).get_json()["id"]
    for method, path in (("get", ""), ("post", "/commit"), ("post", "/cancel"), ("get", "/history")):
        r = getattr(client, method)(f"{API}/reservations/{rid}{path}", headers=users.h("bob"))
        assert r.status_code == 403 and r.get_json()["error"]["field"] == "id", path
    r = client.patch(f"{API}/reservations/{rid}", json={"bandwidth": 1}, headers=users.h("bob"))
    assert r.status_code == 403
    assert client.get(f"{API}/reservations/{rid}", headers=users.h("root")).status_code == 200
    assert client.post(f"{API}/reservations/{rid}/cancel", headers=users.h("root")).status_code == 200
    assert client.get(f"{API}/reservations/999", headers=users.h("alice")).status_code == 404
    assert client.get(f"{API}/reservations/99999999999999999999", headers=users.h("alice")).status_code == 404


def test_list_filters_and_pagination(client, users, clock) -> None:  # noqa: ANN001
    made = []
    for i, (bw, start) in enumerate([(1, 600), (2, 10_000), (3, 20_000), (4, 30_000)]):
        r = create(client, users, name=f"r{i}", bandwidth=bw, start=iso(T0 + start), end=iso(T0 + start + 3000))
        assert r.status_code == 201
        made.append(r.get_json()["id"])
    create(client, users, who="bob", name="bobs", src="A:2", dst="C:4", bandwidth=1)
    client.post(f"{API}/reservations/{made[1]}/commit", headers=users.h("alice"))

    def ids(query: str, who: str = "alice") -> list[int]:
        r = client.get(f"{API}/reservations{query}", headers=users.h(who))
        assert r.status_code == 200, r.get_json()
        return [x["id"] for x in r.get_json()["items"]]

    assert ids("") == made[::-1]
    assert len(ids("", "root")) == 5
    assert ids("?state=RESERVED") == [made[1]]
    assert ids("?state=HELD,RESERVED") == made[::-1]
    assert ids("?min_bandwidth=2&max_bandwidth=3") == [made[2], made[1]]
    assert ids(f"?from={iso(T0 + 12_000)}&to={iso(T0 + 25_000)}") == [made[2], made[1]]
    assert ids("?endpoint=C:4", "root") == [made[-1] + 1]
    assert ids("?endpoint=A") == made[::-1]
    page = client.get(f"{API}/reservations?limit=2&offset=2", headers=users.h("alice")).get_json()
    assert page["total"] == 4 and [x["id"] for x in page["items"]] == made[1::-1]


def test_what_if(client, users) -> None:  # noqa: ANN001
    q = f"{API}/available?src=A:1&dst=C:3&start={iso(T0 + 600)}&end={iso(T0 + 4200)}"
    before = client.get(q, headers=users.h("alice")).get_json()
    assert before["available"] > 0 and before["path"]["nodes"][0] == "A"
    for i in range(2):
        assert create(client, users, name=f"r{i}").status_code == 201
    after = client.get(q, headers=users.h("alice")).get_json()
    assert after["available"] < before["available"]
    r = client.get(f"{API}/available?src=A:1&dst=Q:3&end={iso(T0 + 4200)}", headers=users.h("alice"))
    assert r.status_code == 400 and r.get_json()["error"]["field"] == "dst"


def test_topology_circuits_utilization_events(client, users, app, clock) -> None:  # noqa: ANN001
    topo = client.get(f"{API}/topology", headers=users.h("alice")).get_json()
    assert {"A", "B", "C"} <= set(topo["layers"]["packet"]["nodes"])
    assert {"X", "Y", "Z", "X:1"} <= set(topo["layers"]["optical"]["nodes"])
    assert "adaptation:A:3-X:1" in topo["layers"]["adaptation"]["links"]
    feed = Feed(Database(app.config["DATABASE"]))
    try:
        cid = feed.circuit("A-C", "A:3", "C:1", 10.0, [("X", 1, 3), ("Z", 3, 2)])
        feed.event("link.down", "A:3 down", severity="warning", port="A:3")
    finally:
        feed.db.dispose()
    # utilization comes from the monitor's own store (mon_samples), as the controller's monitor app writes it
    store = MonitorStore(app.extensions["mlte"].db.engine)
    store.add_samples((clock.t - 10 + i, "packet:A:3-B:1", m, v) for i in range(5)
                      for m, v in (("mbps", 1.0 + i), ("util", 0.1 * (1 + i)), ("drops", 0.0)))
    store.add_samples([(clock.t - 1000, "packet:A:3-B:1", "mbps", 9.0), (clock.t - 1000, "packet:A:3-B:1", "util", 0.9)])
    store.add_event(MonEvent(clock.t - 5, "packet:A:3-B:1", UNCONSTRAINED_IMBALANCE, detail={"drops": 3}))
    circ = client.get(f"{API}/circuits", headers=users.h("alice")).get_json()["items"]
    assert circ[0]["id"] == cid and [x["ots"] for x in circ[0]["xcons"]] == ["X", "Z"]
    util = client.get(f"{API}/utilization?link=packet:A:3-B:1", headers=users.h("alice")).get_json()
    series = util["series"]["packet:A:3-B:1"]
    assert [p["mbps"] for p in series] == [1.0, 2.0, 3.0, 4.0, 5.0]  # the old sample is outside 5 min
    assert [p["utilization"] for p in series] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    util = client.get(f"{API}/utilization?limit=2", headers=users.h("alice")).get_json()
    assert [p["mbps"] for p in util["series"]["packet:A:3-B:1"]] == [4.0, 5.0]  # the newest points
    ev = client.get(f"{API}/events?kind=link.down", headers=users.h("alice")).get_json()["items"]
    assert ev[0]["severity"] == "warning" and ev[0]["detail"] == {"port": "A:3"}
    ev = client.get(f"{API}/events", headers=users.h("alice")).get_json()["items"]
    mon = [e for e in ev if e["kind"].startswith("monitor.")]
    assert [e["kind"] for e in mon] == ["monitor.unconstrained_imbalance"]
    assert mon[0]["detail"] == {"circuit": "packet:A:3-B:1", "flows": [], "drops": 3}
    ev = client.get(f"{API}/events?kind=monitor.unconstrained_imbalance", headers=users.h("alice")).get_json()
    assert [e["kind"] for e in ev["items"]] == ["monitor.unconstrained_imbalance"]
    assert client.get(f"{API}/me", headers=users.h("root")).get_json() == {"id": 3, "name": "root", "admin": True}


def test_unknown_api_route_is_json(client, users) -> None:  # noqa: ANN001
    r = client.get(f"{API}/nope", headers=users.h("alice"))
    assert r.status_code == 404 and r.get_json()["error"]["status"] == 404
    r = client.delete(f"{API}/reservations", headers=users.h("alice"))
    assert r.status_code == 405 and "GET" in r.headers["Allow"]


def test_remaining_transitions(client, users, clock) -> None:  # noqa: ANN001
    """HELD → FAILED, PROVISIONING → FAILED, and RESERVED → FINISHED when nobody looked during the window."""
    held = create(client, users, name="held").get_json()["id"]
    r = client.post(f"{API}/reservations/{held}/fail", json={"reason": "optical scan lost X"}, headers=users.h("root"))
    assert r.get_json()["state"] == "FAILED"

    started = create(client, users, name="started").get_json()["id"]
    client.post(f"{API}/reservations/{started}/commit", headers=users.h("alice"))
    clock.t = T0 + 700
    assert client.get(f"{API}/reservations/{started}", headers=users.h("alice")).get_json()["state"] == "PROVISIONING"
    r = client.post(f"{API}/reservations/{started}/fail", json={}, headers=users.h("root"))
    assert r.get_json()["state"] == "FAILED" and r.get_json()["state_reason"] == "network failure"

    late = create(client, users, name="late", start=iso(T0 + 10_000), end=iso(T0 + 11_000)).get_json()["id"]
    client.post(f"{API}/reservations/{late}/commit", headers=users.h("alice"))
    clock.t = T0 + 20_000  # start and end both passed before the next request
    got = client.get(f"{API}/reservations/{late}", headers=users.h("alice")).get_json()
    assert got["state"] == "FINISHED"
    hist = client.get(f"{API}/reservations/{late}/history", headers=users.h("alice")).get_json()["items"]
    assert [(h["detail"].get("from"), h["detail"].get("to")) for h in hist[1:]] == [
        ("HELD", "RESERVED"), ("RESERVED", "FINISHED")]


def test_rejection_names_the_paths_real_maximum_not_the_access_links(client, users) -> None:  # noqa: ANN001
    """Issue 14 item 6: after a 6 Mbit/s booking the access link A:1 has 14 left but every path
    through the optical layer carries at most 10; the 409 says 10 (what the what-if says), and
    asking exactly that is admitted."""
    assert create(client, users, name="a", bandwidth=6.0).status_code == 201
    q = f"{API}/available?src=A:1&dst=C:3&start={iso(T0 + 600)}&end={iso(T0 + 4200)}"
    what_if = client.get(q, headers=users.h("alice")).get_json()
    r = create(client, users, name="huge", bandwidth=1e6)
    err = r.get_json()["error"]
    assert r.status_code == 409
    assert err["available"] == what_if["available"] == 10
    assert err["bottleneck"] == what_if["path"]["bottleneck"] and not err["bottleneck"].startswith("access:")
    assert "with 10 Mbit/s available" in err["message"] and "14" not in err["message"]
    assert create(client, users, name="fits", bandwidth=err["available"]).status_code == 201


def test_utilization_of_an_unknown_link_is_a_400(client, users) -> None:  # noqa: ANN001
    """Issue 14 item 8: ``link=nonsense`` answered 200 with an empty series."""
    r = client.get(f"{API}/utilization?link=nonsense", headers=users.h("alice"))
    err = r.get_json()["error"]
    assert r.status_code == 400 and err["field"] == "link" and "unknown link 'nonsense'" in err["message"]
    r = client.get(f"{API}/utilization?link=access:A:1-h1", headers=users.h("alice"))  # in the topology, no samples yet
    assert r.status_code == 200 and r.get_json()["series"] == {"access:A:1-h1": []}
    for link in ("packet:A:3-B:1", "packet:A:3-Q:1"):  # a circuit not lit yet: known; to no switch: unknown
        r = client.get(f"{API}/utilization?link={link}", headers=users.h("alice"))
        assert r.status_code == (200 if "B" in link else 400)


def test_an_optical_endpoint_reads_an_optical_node(client, users) -> None:  # noqa: ANN001
    r = create(client, users, src="X:1")
    assert r.status_code == 400 and "'X' is an optical node, not a packet switch" in r.get_json()["error"]["message"]
