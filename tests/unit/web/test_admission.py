"""Admission control: random overlapping requests never overbook any edge or optical port at any instant."""
from __future__ import annotations

import random

from app.db.feed import Feed  # noqa: F401  (import check: the feed module loads without Flask context)
from tests.unit.web.conftest import T0, body, iso


def _peak(intervals: list[tuple[float, float, float]]) -> float:
    events = sorted([(s, 1, bw) for s, e, bw in intervals] + [(e, 0, -bw) for s, e, bw in intervals])
    level = peak = 0.0
    for _, _, d in events:
        level += d
        peak = max(peak, level)
    return peak


def test_random_requests_never_overbook(client, users, app) -> None:  # noqa: ANN001
    rng = random.Random(5)
    pairs = [("A:1", "C:3"), ("A:2", "C:4"), ("C:3", "A:2"), ("C:4", "A:1")]
    accepted = rejected = 0
    for i in range(40):
        src, dst = rng.choice(pairs)
        start = T0 + rng.randrange(0, 20) * 600
        r = client.post("/api/v1/reservations", headers=users.h("alice"), json=body(
            name=f"r{i}", src=src, dst=dst, bandwidth=rng.choice([1, 2.5, 4, 7, 9.5, 15]),
            start=iso(start), end=iso(start + rng.randrange(1, 8) * 600)))
        assert r.status_code in (201, 409), r.get_json()
        if r.status_code == 201:
            accepted += 1
            if rng.random() < 0.5:
                assert client.post(f"/api/v1/reservations/{r.get_json()['id']}/commit",
                                   headers=users.h("alice")).status_code == 200
        else:
            rejected += 1
            assert r.get_json()["error"]["bottleneck"] or r.get_json()["error"]["available"] == 0
    assert accepted >= 5 and rejected >= 5  # the test exercised both outcomes

    from topology.graph import MultiLayerGraph  # noqa: F401

    st = app.extensions["mlte"]
    with app.app_context():
        g = st.topology.graph(st.db.session())
    items = client.get("/api/v1/reservations?limit=500", headers=users.h("root")).get_json()["items"]
    from app.web.timeutil import parse_iso

    per_edge: dict[str, list[tuple[float, float, float]]] = {}
    per_oport: dict[str, list[tuple[float, float, float]]] = {}
    for it in items:
        s, e = parse_iso(it["start"]), parse_iso(it["end"])
        for key in it["path"]["edges"]:
            per_edge.setdefault(key, []).append((s, e, it["bandwidth"]))
        for op in it["path"]["oports"]:
            per_oport.setdefault(op, []).append((s, e, 1.0))
    for key, iv in per_edge.items():
        cap = g.edge(key)["capacity"]
        assert _peak(iv) <= cap + 1e-9, f"{key} overbooked: {_peak(iv)} > {cap}"
    for op, iv in per_oport.items():
        assert _peak(iv) <= 1.0, f"optical port {op} used by two reservations at once"
