"""The admission race used by the concurrency tests (SQLite and PostgreSQL): N parallel creates at the
last capacity, with the expected number of winners computed independently by replaying the same
requests one after another through the PCE."""
from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

T_START = 4_000_000_000.0  # 2096: far enough ahead that every window is in the future
WINDOW = 3600.0


def iso(ts: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc).isoformat().replace("+00:00", "Z")


def line_topology(path: Path, capacity: float = 100.0) -> Path:
    """Two packet switches joined by one ``capacity`` Mbit/s link, a fast host on each: every request
    between the hosts shares that one link, so admission must add bandwidths correctly."""
    from topology.graph import MultiLayerGraph

    g = MultiLayerGraph()
    g.add_packet_switch("S1", 1)
    g.add_packet_switch("S2", 2)
    g.add_packet_link("S1", 2, "S2", 2, capacity=capacity, source="static")
    for h, sw in (("h1", "S1"), ("h2", "S2")):
        g.add_host(h)
        g.add_access(h, sw, 1, capacity=10_000.0)
    path.write_text(g.to_json())
    return path


def expected_winners(graph, requests_: list[dict], prebooked: list[dict]) -> int:  # noqa: ANN001
    """Replay the requests sequentially through pce.reservation with growing bookings."""
    from pce.errors import NoPathError
    from pce.reservation import Booking, PathRequest, compute_path

    bookings: list[Booking] = []
    for i, r in enumerate([*prebooked, *requests_]):
        try:
            res = compute_path(graph, PathRequest(r["src"], r["dst"], r["bandwidth"], r["_start"], r["_end"]),
                               bookings)
        except NoPathError:
            if i < len(prebooked):
                raise
            continue
        bookings.append(Booking(str(i), r["_start"], r["_end"], r["bandwidth"], tuple(res.edges),
                                tuple(res.oports)))
    return len(bookings) - len(prebooked)


def request(name: str, src: str, dst: str, bandwidth: float, offset: float = 0.0) -> dict:
    start = T_START + offset
    return {"name": name, "src": src, "dst": dst, "bandwidth": bandwidth, "start": iso(start),
            "end": iso(start + WINDOW), "_start": start, "_end": start + WINDOW}


def post_all(url: str, token: str, bodies: list[dict], workers: int = 50) -> list[int]:
    """POST every body at once (threads released together by a barrier); return the status codes."""
    barrier = threading.Barrier(min(workers, len(bodies)))
    headers = {"Authorization": f"Bearer {token}"}

    def one(b: dict) -> int:
        payload = {k: v for k, v in b.items() if not k.startswith("_")}
        with requests.Session() as s:
            barrier.wait(timeout=60)
            r = s.post(f"{url}/api/v1/reservations", data=json.dumps(payload),
                       headers={**headers, "Content-Type": "application/json"}, timeout=120)
            return r.status_code

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, bodies))


def committed_peak(url: str, token: str, link: str) -> float:
    """Peak total bandwidth booked on ``link`` over all live reservations (all in one window here)."""
    items = requests.get(f"{url}/api/v1/reservations?limit=500&state=HELD,RESERVED,ACTIVE",
                         headers={"Authorization": f"Bearer {token}"}, timeout=30).json()["items"]
    return sum(i["bandwidth"] for i in items if link in i["path"]["edges"])


def run_race(url: str, token: str, graph, scenario: str) -> tuple[int, int, list[int]]:  # noqa: ANN001
    """Run one scenario; return (winners, expected winners, status codes)."""
    if scenario == "packet-line":
        pre = [request("pre", "S1:1", "S2:1", 80.0)]
        racers = [request(f"race{i}", "S1:1", "S2:1", 3.0) for i in range(50)]
    else:  # fig2: optical ports are taken whole, so only as many reservations as disjoint optical routes
        pre = []
        racers = [request(f"race{i}", "A:1", "C:3", 2.0) for i in range(50)]
    headers = {"Authorization": f"Bearer {token}"}
    for b in pre:
        r = requests.post(f"{url}/api/v1/reservations", json={k: v for k, v in b.items() if not k.startswith("_")},
                          headers=headers, timeout=30)
        assert r.status_code == 201, r.text
    codes = post_all(url, token, racers)
    return codes.count(201), expected_winners(graph, racers, pre), codes


def scenario_topology(tmp_path: Path, scenario: str) -> str:
    """The ``TOPOLOGY`` setting of a race scenario: the Fig. 2 testbed or a one-link packet line."""
    return "fig2" if scenario == "fig2" else str(line_topology(tmp_path / "line.json"))


def check_race(app, token: str, scenario: str, after=None) -> None:  # noqa: ANN001
    """Serve ``app``, run the race, and check exactly the feasible number won and nothing overbooked;
    ``after(url, winners)`` may check more while the server still runs. Disposes the app's engine."""
    from tests.lib.webserver import serve_app

    st = app.extensions["mlte"]
    try:
        with st.db.session() as s:
            graph = st.topology.graph(s)
        with serve_app(app, threads=16) as url:
            winners, expected, codes = run_race(url, token, graph, scenario)
            assert set(codes) <= {201, 409}, codes
            assert expected >= 2 and winners == expected, (winners, expected)
            if scenario == "packet-line":
                assert committed_peak(url, token, "packet:S1:2-S2:2") <= 100.0
            if after is not None:
                after(url, winners)
    finally:
        st.db.dispose()
