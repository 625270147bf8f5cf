"""Grooming under concurrency (issue 28): two ``mlte web --grooming`` processes on one database
(PostgreSQL, and one SQLite file), 40 concurrent 3 Mbit/s requests A:1 → C:3 on Fig. 2 for the same
hour (each with a VLAN of its own, which sharing needs), half through each: exactly 6 admitted (the two 10 Mbit/s circuits from A carry three each), 34
refused with a 409 naming a full circuit, and no circuit over-booked in any instant (read from the
database, not the API). The figures go to ``test-artifacts/web/grooming_two_instances_<backend>.json``."""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from pce.bookings import peak_load
from pce.grooming import segments
from tests.lib.webrace import T_START, iso
from tests.lib.webserver import create_user_cli
from tests.web.test_two_web_instances import (
    ARTIFACTS,
    Call,
    burst,
    database,  # noqa: F401 - the fixture: PostgreSQL and SQLite
    read_db,
    web_instances,
)


def test_forty_groomed_requests_through_two_instances_admit_six(database: str, tmp_path: Path) -> None:  # noqa: F811
    from topology.graph import MultiLayerGraph
    from topology.spec import fig2_testbed, spec_to_graph

    backend = "sqlite" if database.startswith("sqlite") else "postgresql"
    topo = tmp_path / "fig2.json"
    graph = spec_to_graph(fig2_testbed())
    topo.write_text(graph.to_json())
    graph = MultiLayerGraph.from_json(topo.read_text())
    with web_instances(database, topo, tmp_path, extras=[["--grooming"], ["--grooming"]]) as urls:
        token = create_user_cli(database, "alice")
        calls = [Call("POST", "/api/v1/reservations", token,
                      {"name": f"g{i}", "src": "A:1", "dst": "C:3", "bandwidth": 3.0, "start": iso(T_START),
                       "end": iso(T_START + 3600), "src_vlan": 100 + i, "dst_vlan": 100 + i},
                      instance=i % 2) for i in range(40)]
        seconds = burst(urls, calls, workers=40)
    for log in sorted(tmp_path.glob("web*.log")):
        assert "Traceback" not in log.read_text(), log.read_text()[-4000:]
    codes = Counter(c.status for c in calls)
    assert codes == {201: 6, 409: 34}, [(c.status, c.answer) for c in calls if c.status not in (201, 409)] or codes
    for c in calls:
        if c.status == 409:
            err = c.answer["error"]
            assert err["message"].startswith("not admitted") and err["bottleneck"].startswith("circuit:"), err
    snap = read_db(database)
    assert set(snap.reservations) == {c.answer["id"] for c in calls if c.status == 201}
    on: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for r in snap.reservations.values():
        for seg in segments(graph, r.path["edges"]):
            on[seg.key].append((r.start_ts, r.end_ts, r.bandwidth))
    peaks = {k: peak_load(v, 0.0, 1e12) for k, v in on.items()}
    assert len(peaks) == 2 and all(p <= 10.0 + 1e-9 for p in peaks.values()), peaks
    figures = {"backend": backend, "instances": 2, "requests": len(calls), "accepted": codes[201],
               "refused": codes[409], "circuit_peak_mbps": peaks, "seconds": round(seconds, 2)}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"grooming_two_instances_{backend}.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures))
