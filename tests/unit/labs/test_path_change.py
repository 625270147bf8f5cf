"""path-change lab without Mininet: schedule, probe parsing, matching, detector vs baseline on
synthetic series, the move plans and the plot (the Mininet run: tests/integration/test_labs_overlay_pathchange.py)."""
from __future__ import annotations

import inspect
import json
import random
from pathlib import Path

import pytest

from mininet_labs import path_change as pc
from mininet_labs.registry import LABS


def test_schedule_is_seeded_alternates_paths_and_keeps_inside_the_run() -> None:
    a, b, c = pc.schedule(3, 200.0), pc.schedule(3, 200.0), pc.schedule(4, 200.0)
    assert a == b and a != c
    cur = a["start_path"]
    times = [m["t"] for m in a["moves"]]
    assert times == sorted(times) and len(times) >= 5
    assert times[0] >= 8.0 and times[-1] < 200.0 - pc.TOLERANCE_S
    assert all(8.0 <= t2 - t1 <= 30.0 for t1, t2 in zip(times, times[1:], strict=False))
    for m in a["moves"]:
        assert m["path"] != cur  # every move changes the path
        cur = m["path"]
    eps = a["congestion"]
    assert eps and all(e["start"] < e["end"] <= 200.0 for e in eps)
    assert all(e1["end"] < e2["start"] for e1, e2 in zip(eps, eps[1:], strict=False))
    with pytest.raises(ValueError, match="seconds > warmup"):
        pc.schedule(0, 5.0)


def test_ping_lines_give_send_times_and_rtts() -> None:
    text = ("PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n"
            "[1700000000.500000] 64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=4.20 ms\n"
            "[1700000000.912000] 64 bytes from 10.0.0.2: icmp_seq=3 ttl=64 time=12.0 ms\n"
            "--- 10.0.0.2 ping statistics ---\n3 packets transmitted, 2 received, 33% packet loss\n")
    (t1, r1), (t2, r2) = pc.parse_ping(text)
    assert r1 == 4.2 and t1 == pytest.approx(1700000000.4958)
    assert r2 == 12.0 and t2 == pytest.approx(1700000000.900)


def test_a_detection_matches_a_move_only_within_the_tolerance_after_it() -> None:
    got = pc.score([10.5, 30.0, 47.0], [10.0, 40.0], tolerance_s=6.0)
    assert got["precision"] == pytest.approx(1 / 3, abs=1e-4) and got["recall"] == 0.5  # 47 is 7 s late
    assert pc.score([9.9], [10.0])["recall"] == 0.0  # before the move: no match
    assert pc.score([], [])["precision"] == 1.0


def _synthetic(sch: dict, congestion_ms: tuple[float, float] = (5.0, 60.0), seed: int = 0) -> list[tuple[float, float]]:
    """Probe RTTs every 200 ms: 4.5 ms on path 0, 12.5 ms on path 1, plus queueing in congestion."""
    rng = random.Random(seed)
    out, t = [], 0.0
    while t < sch["seconds"]:
        cur = sch["start_path"]
        for m in sch["moves"]:
            if m["t"] <= t:
                cur = m["path"]
        rtt = (4.5, 12.5)[cur] + abs(rng.gauss(0, 0.05))
        if any(c["start"] <= t < c["end"] for c in sch["congestion"]):
            rtt += rng.uniform(*congestion_ms)
        out.append((t, rtt))
        t += 0.2
    return out


def test_without_congestion_both_find_every_move() -> None:
    sch = {**pc.schedule(2, 150.0), "congestion": []}
    truth = [m["t"] for m in sch["moves"]]
    got = pc.analyse(_synthetic(sch), truth)
    assert got["detector"]["precision"] == 1.0 and got["detector"]["recall"] == 1.0
    assert got["baseline"]["precision"] == 1.0 and got["baseline"]["recall"] == 1.0
    # the monitor's default baseline (20 one-second minima) sees a rise only 20 s later: late or missed
    assert got["baseline_1s_minima"]["recall"] < 1.0


def test_congestion_fools_the_rolling_minimum_not_the_detector() -> None:
    sch = pc.schedule(5, 300.0)
    truth = [m["t"] for m in sch["moves"]]
    got = pc.analyse(_synthetic(sch, seed=5), truth)
    det, base = got["detector"], got["baseline"]
    assert base["n_detections"] > len(truth)  # each episode moves the 4-s minimum: false changes
    assert det["precision"] > base["precision"]
    assert det["recall"] >= 0.5


def test_path_rtts_take_the_median_per_path_after_each_move() -> None:
    series = [(t / 5, 4.0 if t / 5 < 10 else 12.0) for t in range(100)]
    assert pc.path_rtts(series, [{"t": 10.0, "path": 1}], start_path=0) == [4.0, 12.0]


def test_a_move_overwrites_both_ingress_rules_and_verifies_them() -> None:
    first = pc.move_plan(None, 2, verify=False).to_json()
    assert [s["step"] for s in first["steps"]] == ["flow", "flow"]
    plan = pc.move_plan(2, 3)
    js = plan.to_json()
    flows = [s for s in js["steps"] if s["step"] == "flow"]
    assert {(f["rule"]["switch"], f["rule"]["out_port"]) for f in flows} == {("A", 3), ("Z", 3)}
    assert {f["restore"]["out_port"] for f in flows} == {2}  # a roll-back puts the old path back
    verify = next(s for s in js["steps"] if s["step"] == "verify")
    assert set(verify["deps"]) == {f["id"] for f in flows}
    a, z = pc.steer_rules(3)
    assert dict(a.match)["ipv4_dst"] == pc.H2 and dict(z.match)["ipv4_dst"] == pc.H1
    rec = {"steps": [{"kind": "flow_add", "finished_at": 5.0}, {"kind": "flow_add", "finished_at": 5.2},
                     {"kind": "verify", "finished_at": 9.0}]}
    assert pc.swap_time(rec, 1.0) == 5.2 and pc.swap_time({}, 1.0) == 1.0


def test_plot_from_synthetic_data(tmp_path: Path) -> None:
    sch = pc.schedule(1, 60.0)
    series = _synthetic(sch)
    res = {"seed": 1, "moves": sch["moves"], "congestion": sch["congestion"], "tolerance_s": 6.0,
           **pc.analyse(series, [m["t"] for m in sch["moves"]])}
    png = pc.plot(res, series, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    json.dumps(res)  # what results.json holds serialises


def test_topology_registry_and_mn_topo() -> None:
    spec = pc.path_change_spec()
    assert [s.name for s in spec.switches] == ["A", "Z"]
    assert {(h.name, h.switch, h.port) for h in spec.hosts} == {("h1", "A", 1), ("h2", "Z", 1), ("h3", "A", 4)}
    assert pc.wire_links() == {("A", 2, "Z", 2), ("Z", 2, "A", 2), ("A", 3, "Z", 3), ("Z", 3, "A", 3)}
    lab = LABS["path-change"]
    assert lab.runner() is pc.run and "seed" in inspect.signature(pc.run).parameters
    with pytest.raises(ValueError, match="seconds > warmup"):
        pc.run("/nonexistent", seconds=3.0)  # refused before any network is built
    pytest.importorskip("mininet")
    topo = pc.topos["path-change"]()  # node and link lists only: no OVS is touched
    assert sorted(topo.switches()) == ["A", "Z"]
    assert sorted(topo.hosts()) == ["h1", "h2", "h3", "w1", "w2"]
    wires = {(a, b) for a, b in topo.links() if "w" in (a[0], b[0])}
    assert wires == {("w1", "A"), ("w1", "Z"), ("w2", "A"), ("w2", "Z")}


def test_cli_seed_is_a_non_negative_integer() -> None:
    import argparse

    from app.cli.lab import non_negative_int

    assert non_negative_int("0") == 0 and non_negative_int("7") == 7
    for bad in ("-1", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            non_negative_int(bad)
