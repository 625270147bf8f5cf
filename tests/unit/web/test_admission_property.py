"""Property: any sequence of create / commit / cancel / modify / clock ticks / the controller lighting a
due reservation leaves no instant at which
the reservations that hold capacity (read straight from the database rows) book more than an edge's
capacity, or put two reservations on one optical port. The check is a sweep over the rows' windows
against the graph's capacities; it does not ask the PCE."""
from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.db.migrate import open_migrated
from app.db.models import Reservation
from app.db.provisioning import ProvisioningStore
from app.db.states import BOOKING_STATES, HELD, RESERVED
from app.web import create_app
from app.web.timeutil import parse_iso
from tests.lib.provisioning import installation
from tests.unit.web.conftest import T0, Clock, iso, new_user

PAIRS = [("A:1", "C:3"), ("A:2", "C:4"), ("C:3", "A:2"), ("B:1", "C:4"), ("A:1", "B:2")]
BANDWIDTHS = [1, 2.5, 4, 6, 9.5, 12, 40, 90]
SLOT = 600.0

create = st.tuples(st.just("create"), st.sampled_from(PAIRS), st.integers(0, 3), st.integers(1, 4),
                   st.sampled_from(BANDWIDTHS), st.booleans())
pick = st.integers(0, 30)
commit = st.tuples(st.just("commit"), pick)
cancel = st.tuples(st.just("cancel"), pick)
modify = st.tuples(st.just("modify"), pick, st.one_of(st.none(), st.sampled_from(BANDWIDTHS)),
                   st.one_of(st.none(), st.integers(1, 8)))
tick = st.tuples(st.just("tick"), st.sampled_from([60.0, 250.0, 400.0, 900.0]))
light = st.tuples(st.just("light"))
operations = st.lists(st.one_of(create, create, commit, cancel, modify, modify, tick, light), min_size=3,
                      max_size=18)


def _peak(intervals: list[tuple[float, float, float]]) -> float:
    """Highest total of ``[start, end)`` intervals at any instant (ends sort before starts at a tie)."""
    level = peak = 0.0
    for _, _, delta in sorted([(s, 1, bw) for s, _, bw in intervals] + [(e, 0, -bw) for _, e, bw in intervals]):
        level += delta
        peak = max(peak, level)
    return peak


def _check_rows(app, graph, now: float) -> None:  # noqa: ANN001
    """The invariant, from the rows alone: capacity-holding reservations fit at every instant."""
    with app.extensions["mlte"].db.session() as s:
        rows = s.execute(select(Reservation).where(Reservation.state.in_(BOOKING_STATES))).scalars()
        live = [r for r in rows if r.state != HELD or (r.hold_expires_ts or 0) > now]
    per_edge: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    per_oport: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for r in live:
        assert r.path and r.start_ts < r.end_ts and r.bandwidth > 0
        for key in r.path["edges"]:
            per_edge[key].append((r.start_ts, r.end_ts, r.bandwidth))
        for op in r.path["oports"]:
            per_oport[op].append((r.start_ts, r.end_ts, 1.0))
    for key, iv in per_edge.items():
        cap = graph.edge(key)["capacity"]
        assert _peak(iv) <= cap + 1e-9, f"{key} overbooked: {_peak(iv)} > {cap} Mbit/s"
    for op, iv in per_oport.items():
        assert _peak(iv) <= 1.0, f"optical port {op} booked by two reservations at once"


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_no_sequence_overbooks(ops: list[tuple]) -> None:
    clock = Clock(T0)
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app({"DATABASE": str(Path(tmp) / "p.db"), "TOPOLOGY": "fig2", "TESTING": True, "CLOCK": clock,
                          "HOLD_SECONDS": 300, "SECRET_KEY": "p"})
        st_ = app.extensions["mlte"]
        try:
            h = new_user(app, "prop")
            with st_.db.session() as s:
                graph = st_.topology.graph(s)
            c = app.test_client()
            ids: list[int] = []
            for op in ops:
                if op[0] == "create":
                    _, (src, dst), start_slot, length, bw, with_start = op
                    start = clock.t + start_slot * SLOT
                    body = {"name": "p", "src": src, "dst": dst, "bandwidth": bw, "end": iso(start + length * SLOT)}
                    if with_start or start_slot:
                        body["start"] = iso(start)
                    r = c.post("/api/v1/reservations", headers=h, json=body)
                    assert r.status_code in (201, 409), r.get_json()
                    if r.status_code == 201:
                        ids.append(r.get_json()["id"])
                elif op[0] == "tick":
                    clock.t += op[1]
                elif op[0] == "light":  # the controller's poll: light every due reservation
                    store = ProvisioningStore(open_migrated(app.config["DATABASE"]))
                    try:
                        for order in store.due(clock.t):
                            circuit, rules = installation(order.path or {})
                            assert store.mark_active(order.id, circuit, rules, clock.t) is True
                    finally:
                        store.db.dispose()
                elif ids:
                    res_id = ids[op[1] % len(ids)]
                    if op[0] == "modify":
                        change = {}
                        if op[2] is not None:
                            change["bandwidth"] = op[2]
                        if op[3] is not None:
                            cur = c.get(f"/api/v1/reservations/{res_id}", headers=h).get_json()
                            started = cur["state"] not in (HELD, RESERVED)
                            change["end"] = iso(st_.clock() + op[3] * SLOT if started
                                                else parse_iso(cur["start"]) + op[3] * SLOT)
                        r = c.patch(f"/api/v1/reservations/{res_id}", headers=h, json=change or {"bandwidth": 1})
                    else:
                        r = c.post(f"/api/v1/reservations/{res_id}/{op[0]}", headers=h)
                    assert r.status_code in (200, 400, 409), r.get_json()
                _check_rows(app, graph, clock.t)
        finally:
            st_.db.dispose()
