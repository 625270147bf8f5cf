"""Two real ``mlte web`` processes on one database (PostgreSQL, and one SQLite file) stay correct under
concurrency (issue 24 item 3): admission never overbooks a link in any instant, and racing state
changes of one reservation through both instances are serialised by the database's write lock
(PostgreSQL: ``SELECT … FOR UPDATE`` on ``admission_lock``; SQLite: ``BEGIN IMMEDIATE``), so exactly
one of two conflicting changes wins and the history records every change once.

The earlier race (``tests/lib/webrace.py``) runs one in-process server and only creates; here both
processes start together on an empty database, create, modify, commit, cancel and fail, and the
database is read afterwards (not through the API) and checked against the capacities. The figures
(requests, accepted / refused, seconds) are printed and written to
``test-artifacts/web/two_web_instances_<backend>.json``; nothing is timed.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.lib.webrace import T_START, iso
from tests.lib.webserver import ROOT, create_user_cli, free_port, wait_http

CAPACITY = 100.0
WINDOW = 3600.0
N_CREATE = 120
ARTIFACTS = ROOT / "test-artifacts" / "web"
PAIRS = (("S1:1", "S2:1"), ("S2:1", "S3:1"), ("S1:1", "S3:1"))


def chain_topology(path: Path) -> Path:
    """S1 — S2 — S3, two 100 Mbit/s links, a host on each switch: every request between hosts crosses
    one or both links, so requests of three kinds compete for them (one path each: no re-routing)."""
    from topology.graph import MultiLayerGraph

    g = MultiLayerGraph()
    for i, sw in enumerate(("S1", "S2", "S3"), start=1):
        g.add_packet_switch(sw, i)
        g.add_host(f"h{i}")
        g.add_access(f"h{i}", sw, 1, capacity=10_000.0)
    g.add_packet_link("S1", 2, "S2", 2, capacity=CAPACITY, source="static")
    g.add_packet_link("S2", 3, "S3", 2, capacity=CAPACITY, source="static")
    path.write_text(g.to_json())
    return path


@contextlib.contextmanager
def web_instances(db: str, topology: Path, logs: Path, extras: list[list[str]] | None = None) -> Iterator[list[str]]:
    """Start one ``mlte web`` process per item of ``extras`` (its extra options; default two plain
    ones) at once on the same database, each on its own port, and wait for all of them; terminate
    each by its PID at the end, killing those that do not stop in 15 s."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    try:
        for i, extra in enumerate(extras or [[], []]):
            port = free_port()
            cmd = [sys.executable, "-m", "app.cli.main", "web", "--db", db, "--host", "127.0.0.1", "--port",
                   str(port), "--topology", str(topology), "--threads", "16", *extra]
            with open(logs / f"web{i}.log", "wb") as log:
                procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                              env={**os.environ, "PYTHONUNBUFFERED": "1"}))
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, procs, strict=True):
            wait_http(url + "/api/v1/openapi.json", timeout=60, proc=proc)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@dataclass
class Call:
    """One HTTP request of a burst and what it got."""

    method: str
    path: str
    token: str
    body: dict[str, Any] | None = None
    instance: int = 0
    tag: Any = None
    status: int = 0
    seconds: float = 0.0
    answer: dict[str, Any] = field(default_factory=dict)


def burst(urls: list[str], calls: list[Call], workers: int = 48) -> float:
    """Send every call at once from ``workers`` threads (released together by a barrier), each to its
    ``instance``; fill in the answers and return the seconds the burst took."""
    first = min(workers, len(calls))
    barrier = threading.Barrier(first)  # the first ``first`` calls start together, the rest follow

    def one(i: int, c: Call) -> None:
        with requests.Session() as s:
            if i < first:
                barrier.wait(timeout=60)
            t0 = time.monotonic()
            r = s.request(c.method, urls[c.instance] + c.path, json=c.body, timeout=120,
                          headers={"Authorization": f"Bearer {c.token}"})
            c.seconds = time.monotonic() - t0
            c.status = r.status_code
            c.answer = r.json()

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(len(calls)), calls))
    return time.monotonic() - t0


def slowest(calls: list[Call], instances: int) -> list[float]:
    """The longest answer time of each instance in a burst (a figure, never asserted)."""
    return [round(max((c.seconds for c in calls if c.instance == i), default=0.0), 3) for i in range(instances)]


# ---- reading the database directly -----------------------------------------------------------------------

@dataclass
class Snapshot:
    reservations: dict[int, Any]
    audit: dict[int | None, list[Any]]
    events: dict[int, list[str]]


def read_db(url: str) -> Snapshot:
    """Every reservation, its audit entries (oldest first) and its events' kinds, straight from the database."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from app.db.engine import make_engine
    from app.db.models import AuditEntry, Event, Reservation

    engine = make_engine(url)
    try:
        with Session(engine) as s:
            res = {r.id: r for r in s.execute(select(Reservation)).scalars()}
            audit: dict[int | None, list[Any]] = defaultdict(list)
            for a in s.execute(select(AuditEntry).where(AuditEntry.entity == "reservation")
                               .order_by(AuditEntry.id)).scalars():
                audit[a.entity_id].append(a)
            events: dict[int, list[str]] = defaultdict(list)
            for e in s.execute(select(Event).order_by(Event.id)).scalars():
                if isinstance(e.detail, dict) and "reservation" in e.detail:
                    events[e.detail["reservation"]].append(e.kind)
            s.expunge_all()
    finally:
        engine.dispose()
    return Snapshot(res, audit, events)


def link_peaks(snap: Snapshot, now: float) -> dict[str, float]:
    """The highest total bandwidth booked on each link in any instant, from the stored reservations
    that hold capacity (computed here by a sweep over the window ends, not by the PCE)."""
    from app.db.states import BOOKING_STATES, HELD
    from app.web.admission import path_elements

    spans: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for r in snap.reservations.values():
        if r.state not in BOOKING_STATES or (r.state == HELD and (r.hold_expires_ts or 0) <= now):
            continue
        for edge in dict.fromkeys(path_elements(r.path or {}, "edges")):
            spans[edge].append((r.start_ts, r.end_ts, r.bandwidth))
    peaks = {}
    for edge, items in spans.items():
        # ends sort before starts at the same instant: a window is [start, end)
        points = sorted([(s, 1, bw) for s, _, bw in items] + [(e, 0, -bw) for _, e, bw in items])
        level = peak = 0.0
        for _t, _kind, delta in points:
            level += delta
            peak = max(peak, level)
        peaks[edge] = peak
    return peaks


# ---- the test --------------------------------------------------------------------------------------------

@pytest.fixture(params=[pytest.param("postgresql", marks=pytest.mark.postgres), "sqlite"])
def database(request, tmp_path) -> str:  # noqa: ANN001
    """A fresh, empty database of each kind (the two servers migrate it together)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return request.getfixturevalue("pg").create_database("two_web")


def test_two_web_instances_on_one_database(database: str, tmp_path: Path) -> None:
    from topology.graph import MultiLayerGraph

    backend = "sqlite" if database.startswith("sqlite") else "postgresql"
    topo = chain_topology(tmp_path / "chain.json")
    graph = MultiLayerGraph.from_json(topo.read_text())
    figures: dict[str, Any] = {"backend": backend, "instances": 2}
    with web_instances(database, topo, tmp_path) as urls:
        alice = create_user_cli(database, "alice")
        ops = create_user_cli(database, "ops", admin=True)
        try:
            figures["admission"] = admission_race(urls, database, graph, alice)
            figures["modify"] = modify_race(urls, database, graph, alice)
            figures["transitions"] = transition_race(urls, database, alice, ops)
            figures["controller"] = controller_race(urls, database, alice)
        except BaseException:
            for log in sorted(tmp_path.glob("web*.log")):
                print(f"---- {log.name}\n{log.read_text()[-4000:]}")
            raise
    for log in sorted(tmp_path.glob("web*.log")):  # no traceback in either server under contention
        assert "Traceback" not in log.read_text(), log.read_text()[-4000:]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"two_web_instances_{backend}.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures))


def admission_race(urls: list[str], db: str, graph: Any, token: str) -> dict[str, Any]:
    """(a) ``N_CREATE`` creates for overlapping windows, half through each instance, together far more
    than the links carry: nothing overbooked in any instant, every refusal a 409 naming the link, and
    every refused request also refused against the final bookings (it was not refused by mistake)."""
    from app.web.admission import to_booking
    from pce.errors import NoPathError
    from pce.reservation import PathRequest, compute_path

    rnd = random.Random(24)
    calls = []
    for i in range(N_CREATE):
        src, dst = PAIRS[i % len(PAIRS)]
        start = T_START + rnd.choice((0.0, 900.0, 1800.0, 2700.0))
        body = {"name": f"race{i}", "src": src, "dst": dst, "bandwidth": float(rnd.choice((4, 8, 12, 16, 20))),
                "start": iso(start), "end": iso(start + WINDOW)}
        calls.append(Call("POST", "/api/v1/reservations", token, body, instance=i % 2, tag=(start, start + WINDOW)))
    demand = sum(c.body["bandwidth"] for c in calls if c.body)
    seconds = burst(urls, calls)
    codes = Counter(c.status for c in calls)
    assert set(codes) <= {201, 409}, [(c.status, c.answer) for c in calls if c.status not in (201, 409)]
    for c in calls:
        if c.status == 409:
            err = c.answer["error"]
            assert err["message"].startswith("not admitted") and err["field"] == "bandwidth", err
            assert err["bottleneck"] in ("packet:S1:2-S2:2", "packet:S2:3-S3:2"), err
    snap = read_db(db)
    accepted = {c.answer["id"] for c in calls if c.status == 201}
    assert set(snap.reservations) == accepted  # a refusal wrote nothing, every acceptance a row
    assert codes[201] >= 2 and codes[409] >= 1, codes  # the demand exceeds the capacity by far
    peaks = link_peaks(snap, time.time())
    for edge, peak in peaks.items():
        assert peak <= graph.edge(edge)["capacity"] + 1e-9, (edge, peak)
    bookings = [to_booking(r) for r in snap.reservations.values()]
    for c in calls:
        if c.status == 409 and c.body:
            start, end = c.tag
            with pytest.raises(NoPathError):
                compute_path(graph, PathRequest(c.body["src"], c.body["dst"], c.body["bandwidth"], start, end),
                             bookings)
    for rid in accepted:
        assert [a.action for a in snap.audit[rid]] == ["create"]
    return {"requests": len(calls), "demand_mbps": demand, "accepted": codes[201], "refused": codes[409],
            "accepted_per_instance": [sum(1 for c in calls if c.status == 201 and c.instance == i)
                                      for i in range(len(urls))],
            "link_peak_mbps": peaks, "capacity_mbps": CAPACITY, "seconds": round(seconds, 2),
            "slowest_answer_s_per_instance": slowest(calls, len(urls))}


def modify_race(urls: list[str], db: str, graph: Any, token: str) -> dict[str, Any]:
    """(a) continued, with modifies: every accepted reservation halves its bandwidth (all fit), then
    all at once ask for their first bandwidth + 4 Mbit/s through both instances, together more than
    the links carry (a modify's admission leaves out the reservation's own booking: two racing
    modifies must still see each other). Nothing overbooked afterwards, every 200 exactly one
    ``modify`` audit entry starting from the value the previous one left, every refusal a 409 that
    changed nothing."""
    first = read_db(db)
    halve = [Call("PATCH", f"/api/v1/reservations/{rid}", token, {"bandwidth": r.bandwidth / 2},
                  instance=rid % 2, tag=rid) for rid, r in first.reservations.items()]
    seconds = burst(urls, halve)
    assert [c.status for c in halve] == [200] * len(halve), [c.answer for c in halve if c.status != 200]
    before = read_db(db)
    grow = [Call("PATCH", f"/api/v1/reservations/{rid}", token, {"bandwidth": r.bandwidth + 4.0},
                 instance=(rid + 1) % 2, tag=rid) for rid, r in first.reservations.items()]
    seconds += burst(urls, grow)
    codes = Counter(c.status for c in grow)
    assert set(codes) <= {200, 409}, [(c.status, c.answer) for c in grow if c.status not in (200, 409)]
    after = read_db(db)
    for c in grow:
        rid = c.tag
        modifies = [a.detail for a in after.audit[rid] if a.action == "modify"]
        bw0, bw1 = first.reservations[rid].bandwidth, before.reservations[rid].bandwidth
        assert modifies[0]["old"]["bandwidth"] == bw0 and modifies[0]["new"]["bandwidth"] == bw1 == bw0 / 2
        if c.status == 200:
            assert after.reservations[rid].bandwidth == bw0 + 4.0
            assert len(modifies) == 2 and modifies[1]["old"]["bandwidth"] == bw1, modifies
        else:
            err = c.answer["error"]
            assert err["message"].startswith("not admitted") and err["bottleneck"], err
            assert after.reservations[rid].bandwidth == bw1 and len(modifies) == 1, modifies
    peaks = link_peaks(after, time.time())
    for edge, peak in peaks.items():
        assert peak <= graph.edge(edge)["capacity"] + 1e-9, (edge, peak)
    return {"requests": len(halve) + len(grow), "grow_accepted": codes[200], "grow_refused": codes[409],
            "link_peak_mbps": peaks, "seconds": round(seconds, 2),
            "slowest_answer_s_per_instance": slowest(grow, len(urls))}


#: scenario -> (state it starts in, the racing calls: (action, who))
SCENARIOS: dict[str, tuple[str, list[str]]] = {
    "cancel-cancel": ("HELD", ["cancel"] * 4),
    "commit-commit": ("HELD", ["commit"] * 4),
    "commit-cancel": ("HELD", ["commit", "commit", "cancel", "cancel"]),
    "cancel-modify": ("RESERVED", ["cancel", "cancel", "modify", "modify"]),
    "cancel-fail": ("RESERVED", ["cancel", "cancel", "fail", "fail"]),
    "modify-modify": ("RESERVED", ["modify"] * 4),
}
TARGET = {"commit": "RESERVED", "cancel": "CANCELLED", "fail": "FAILED"}
ROUNDS = 3


def transition_race(urls: list[str], db: str, alice: str, ops: str) -> dict[str, Any]:
    """(b) conflicting state changes of one reservation through both instances at once, for every
    scenario, ``ROUNDS`` reservations each, all in one burst."""
    base = T_START + 30 * 86400  # a window of its own: capacity is not what these race for
    calls: list[Call] = []
    n = 0
    for scenario, (initial, actions) in SCENARIOS.items():
        for _ in range(ROUNDS):
            start = base + n * WINDOW
            body: dict[str, Any] = {"name": f"{scenario}-{n}", "src": "S1:1", "dst": "S3:1", "bandwidth": 10.0,
                    "start": iso(start), "end": iso(start + WINDOW)}
            r = requests.post(f"{urls[n % 2]}/api/v1/reservations", json=body, timeout=30,
                              headers={"Authorization": f"Bearer {alice}"})
            assert r.status_code == 201, r.text
            rid = r.json()["id"]
            if initial == "RESERVED":
                r = requests.post(f"{urls[1 - n % 2]}/api/v1/reservations/{rid}/commit", timeout=30,
                                  headers={"Authorization": f"Bearer {alice}"})
                assert r.status_code == 200, r.text
            for k, action in enumerate(actions):
                path = f"/api/v1/reservations/{rid}" + ("" if action == "modify" else f"/{action}")
                body_ = {"bandwidth": 11.0 + k} if action == "modify" else {"reason": "racing"} if action == "fail" else None
                calls.append(Call("PATCH" if action == "modify" else "POST", path, ops if action == "fail" else alice,
                                  body_, instance=k % 2, tag=(scenario, rid, action, initial)))
            n += 1
    random.Random(3).shuffle(calls)
    seconds = burst(urls, calls)
    snap = read_db(db)
    by_res: dict[int, list[Call]] = defaultdict(list)
    for c in calls:
        by_res[c.tag[1]].append(c)
    outcome: Counter[str] = Counter()
    for rid, mine in by_res.items():
        scenario, _, _, initial = mine[0].tag
        check_one(snap, rid, initial, mine)
        won = ",".join(sorted(c.tag[2] for c in mine if c.status == 200))
        outcome[f"{scenario}: {won} -> {snap.reservations[rid].state}"] += 1
    codes = Counter(c.status for c in calls)
    return {"requests": len(calls), "reservations": len(by_res), "ok": codes[200], "conflict": codes[409],
            "final_states": dict(sorted(outcome.items())), "seconds": round(seconds, 2),
            "slowest_answer_s_per_instance": slowest(calls, len(urls))}


def check_one(snap: Snapshot, rid: int, initial: str, calls: list[Call]) -> None:
    """The racing calls on one reservation were applied one at a time: each answer is a 200 or a 409
    naming the state, the transitions in its history form one chain from ``initial`` with no change
    recorded twice, one transition (and one event) per successful call, and the modifies form a
    chain of old → new values (no lost update)."""
    scenario = calls[0].tag[0]
    for c in calls:
        assert c.status in (200, 409), (scenario, c.status, c.answer)
        if c.status == 409:
            err = c.answer["error"]
            assert err["field"] == "state" and err["state"] and err["message"], (scenario, err)
    entries = [a for a in snap.audit[rid] if a.action in ("transition", "modify")]
    # drop what happened before the burst: the commit that made a RESERVED one
    transitions = [(a.detail["from"], a.detail["to"]) for a in entries if a.action == "transition"]
    if initial == "RESERVED":
        assert transitions[0] == ("HELD", "RESERVED")
        transitions = transitions[1:]
    assert len(set(transitions)) == len(transitions), (scenario, transitions)
    state = initial
    for old, new in transitions:
        assert old == state, (scenario, transitions)
        state = new
    assert snap.reservations[rid].state == state
    ok = Counter(c.tag[2] for c in calls if c.status == 200)
    for action, target in TARGET.items():
        assert ok[action] == sum(1 for _, new in transitions if new == target), (scenario, action, ok, transitions)
    finals = ok["cancel"] + ok["fail"]
    assert finals <= 1 and ok["commit"] <= 1, (scenario, ok)
    events = [k for k in snap.events[rid] if k in ("reservation.cancelled", "reservation.failed")]
    assert len(events) == finals, (scenario, snap.events[rid])
    if scenario in ("cancel-cancel", "commit-commit", "cancel-fail", "cancel-modify", "commit-cancel"):
        wanted = "commit" if scenario == "commit-commit" else None
        assert (ok[wanted] == 1) if wanted else (finals == 1), (scenario, ok)
    # modifies: one audit entry per 200, each starting from the value the previous one left
    modifies = [a for a in entries if a.action == "modify"]
    assert len(modifies) == ok["modify"], (scenario, ok, len(modifies))
    bandwidth = 10.0
    for a in modifies:
        assert a.detail["old"]["bandwidth"] == bandwidth, (scenario, [m.detail for m in modifies])
        bandwidth = a.detail["new"]["bandwidth"]
    assert snap.reservations[rid].bandwidth == bandwidth
    # a modify that lost to the cancel saw the CANCELLED state; one that won came before the cancel
    order = [a.action if a.action == "modify" else a.detail["to"] for a in entries]
    if "CANCELLED" in order:
        assert "modify" not in order[order.index("CANCELLED"):], (scenario, order)
    for c in calls:
        if c.tag[2] == "modify" and c.status == 409:
            assert c.answer["error"]["state"] in ("CANCELLED", "FAILED"), c.answer


def controller_race(urls: list[str], db: str, token: str, n: int = 6) -> dict[str, Any]:
    """(b) with the controller: reservations whose window has just started (PROVISIONING) are cancelled
    through both instances while a :class:`ProvisioningStore` (the controller's writer) lights them.
    Per reservation one cancel wins; either it was lit first (PROVISIONING → ACTIVE → CANCELLED) or the
    store was told it came late (PROVISIONING → CANCELLED, ``mark_active`` False); each is listed once
    for release either way."""
    from app.db.migrate import open_migrated
    from app.db.provisioning import ProvisioningStore
    from tests.lib.provisioning import installation

    h = {"Authorization": f"Bearer {token}"}
    start = time.time() + 4.0
    rids = []
    for i in range(n):
        body: dict[str, Any] = {"name": f"lit-{i}", "src": "S1:1", "dst": "S3:1", "bandwidth": 1.0, "start": iso(start),
                "end": iso(start + WINDOW)}
        r = requests.post(f"{urls[i % 2]}/api/v1/reservations", json=body, headers=h, timeout=30)
        assert r.status_code == 201, r.text
        rids.append(r.json()["id"])
        assert requests.post(f"{urls[1 - i % 2]}/api/v1/reservations/{rids[-1]}/commit", headers=h,
                             timeout=30).status_code == 200
    time.sleep(max(0.0, start + 0.5 - time.time()))
    store = ProvisioningStore(open_migrated(db))
    try:
        orders = {o.id: o for o in store.due(time.time())}  # the start moves them to PROVISIONING
        assert set(rids) <= set(orders), (rids, sorted(orders))
        calls = [Call("POST", f"/api/v1/reservations/{rid}/cancel", token, None, instance=k, tag=rid)
                 for rid in rids for k in (0, 1)]
        lit: dict[int, bool] = {}
        go = threading.Barrier(2)

        def light_all() -> None:
            go.wait(timeout=60)
            for rid in rids:
                circuit, rules = installation(orders[rid].path or {})
                lit[rid] = store.mark_active(rid, circuit, rules, time.time())

        lighter = threading.Thread(target=light_all, name="controller-writer")
        lighter.start()
        go.wait(timeout=60)
        seconds = burst(urls, calls)
        lighter.join(timeout=120)
        assert not lighter.is_alive() and set(lit) == set(rids)
        snap = read_db(db)
        for rid in rids:
            mine = [c for c in calls if c.tag == rid]
            assert sorted(c.status for c in mine) == [200, 409], [c.answer for c in mine]
            loser = next(c for c in mine if c.status == 409)
            assert loser.answer["error"]["state"] == "CANCELLED", loser.answer
            transitions = [(a.detail["from"], a.detail["to"]) for a in snap.audit[rid] if a.action == "transition"]
            tail = [("PROVISIONING", "ACTIVE"), ("ACTIVE", "CANCELLED")] if lit[rid] else \
                [("PROVISIONING", "CANCELLED")]
            assert transitions == [("HELD", "RESERVED"), ("RESERVED", "PROVISIONING"), *tail], (lit[rid], transitions)
        released = [i.reservation_id for i in store.to_release()]
        assert sorted(released) == sorted(rids)  # each once, lit first or late
        for rid in rids:
            assert store.mark_released(rid, time.time()) is True
        assert [i.reservation_id for i in store.installed() if i.reservation_id in rids] == []
    finally:
        store.db.dispose()
    return {"reservations": n, "cancels": len(calls), "lit_before_cancel": sum(lit.values()),
            "cancelled_before_lit": n - sum(lit.values()), "seconds": round(seconds, 2)}


def test_a_login_holds_on_every_instance_with_the_same_secret_key(tmp_path: Path) -> None:
    """Behind a proxy that spreads requests, a UI login and its CSRF token must be good on every
    instance: they are signed with ``--secret-key``, so the instances need the same one (without it
    each start picks a random key and the other instance answers 401)."""
    import re

    db = f"sqlite:///{tmp_path / 'shared.db'}"
    topo = chain_topology(tmp_path / "chain.json")
    key = ["--secret-key", "the same on every instance"]
    with web_instances(db, topo, tmp_path, [key, key, []]) as (one, other, own_key):
        create_user_cli(db, "carol", password="pw-carol-1")
        with requests.Session() as browser:
            page = browser.get(f"{one}/login", timeout=30).text
            csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page)
            assert csrf, page
            r = browser.post(f"{other}/login", data={"csrf_token": csrf.group(1), "username": "carol",
                                                     "password": "pw-carol-1"}, timeout=30, allow_redirects=False)
            assert r.status_code == 302 and r.headers["Location"].endswith("/reservations"), r.text
            assert browser.get(f"{one}/api/v1/reservations", timeout=30).status_code == 200
            assert browser.get(f"{other}/api/v1/reservations", timeout=30).status_code == 200
            r = browser.get(f"{own_key}/api/v1/reservations", timeout=30)
            assert r.status_code == 401, r.text
