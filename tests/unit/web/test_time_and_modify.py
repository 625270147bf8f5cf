"""Edge cases of admission around time and modify: UTC offsets vs naive times, far-future windows,
back-to-back windows, and a modify that is re-checked without counting the reservation itself."""
from __future__ import annotations

from tests.unit.web.conftest import T0, body, iso

API = "/api/v1/reservations"


def _create(client, users, **over):  # noqa: ANN001, ANN003, ANN201
    return client.post(API, json=body(**over), headers=users.h("alice"))


def test_offsets_and_naive_times_mean_the_same_instant(client, users) -> None:  # noqa: ANN001
    """A naive time is UTC; ``+02:00`` is two hours ahead of UTC. All three spell the same window."""
    spellings = [("2030-03-17T18:00:00Z", "2030-03-17T19:00:00Z"),
                 ("2030-03-17T18:00:00", "2030-03-17T19:00:00"),
                 ("2030-03-17T20:00:00+02:00", "2030-03-17T14:00:00-05:00")]
    ids = []
    for start, end in spellings:
        r = _create(client, users, start=start, end=end)
        assert r.status_code in (201, 409), r.get_json()
        if r.status_code == 201:
            assert (r.get_json()["start"], r.get_json()["end"]) == ("2030-03-17T18:00:00Z", "2030-03-17T19:00:00Z")
            ids.append(r.get_json()["id"])
    # Fig. 2 has two optical routes from A to C and an optical port serves one reservation at a time:
    # the same window three times fits twice; a third request proves the windows really overlap
    assert len(ids) == 2


def test_back_to_back_windows_do_not_overlap(client, users) -> None:  # noqa: ANN001
    """``[start, end)``: a window starting exactly when another ends shares no instant with it."""
    for i in range(2):
        assert _create(client, users, start=iso(T0 + 600), end=iso(T0 + 1200), name=f"a{i}").status_code == 201
    assert _create(client, users, start=iso(T0 + 1199), end=iso(T0 + 1800)).status_code == 409
    for i in range(2):
        assert _create(client, users, start=iso(T0 + 1200), end=iso(T0 + 1800), name=f"b{i}").status_code == 201


def test_far_future_window_round_trips(client, users) -> None:  # noqa: ANN001
    r = _create(client, users, start="9998-12-31T22:00:00Z", end="9998-12-31T23:59:00Z")
    assert r.status_code == 201 and r.get_json()["end"] == "9998-12-31T23:59:00Z"
    assert client.get(API, headers=users.h("alice")).status_code == 200


def test_modify_excludes_the_reservation_itself(client, users) -> None:  # noqa: ANN001
    """With both optical routes taken for the window, growing one reservation must still fit on its
    own resources: admission compares it with everybody else's bookings, not with itself."""
    first = _create(client, users, name="first", bandwidth=2).get_json()
    second = _create(client, users, name="second", bandwidth=2).get_json()
    assert _create(client, users, name="third").status_code == 409  # the window is full
    for res in (first, second):
        r = client.patch(f"{API}/{res['id']}", json={"bandwidth": 9, "end": iso(T0 + 4800)},
                         headers=users.h("alice"))
        assert r.status_code == 200, r.get_json()
        assert r.get_json()["path"]["oports"] == res["path"]["oports"]


def test_cancelled_and_failed_release_capacity(client, users) -> None:  # noqa: ANN001
    a = _create(client, users, name="a").get_json()["id"]
    b = _create(client, users, name="b").get_json()["id"]
    assert _create(client, users, name="c").status_code == 409
    assert client.post(f"{API}/{a}/cancel", headers=users.h("alice")).status_code == 200
    assert _create(client, users, name="c").status_code == 201
    assert client.post(f"{API}/{b}/fail", json={"reason": "fibre cut"}, headers=users.h("root")).status_code == 200
    assert _create(client, users, name="d").status_code == 201
