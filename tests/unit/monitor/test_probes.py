"""monitor.probes: probe frames, link bookkeeping, control-channel correction, path changes."""
from __future__ import annotations

import pytest

from monitor.probes import (
    PROBE_ETHERTYPE,
    ControlDelay,
    LatencyMonitor,
    ProbedLink,
    link_id,
    parse_probe,
    probe_frame,
    probed_links,
)

AB = ("A", 3, "B", 1)


def test_probe_frame_round_trip_and_rejects_other_frames():
    f = probe_frame(42, 123456789)
    assert len(f) == 60 and int.from_bytes(f[12:14], "big") == PROBE_ETHERTYPE
    assert parse_probe(f) == (42, 123456789)
    assert parse_probe(f[:20]) is None
    assert parse_probe(f[:12] + b"\x08\x00" + f[14:]) is None  # other ethertype
    assert parse_probe(f[:14] + b"XXXXXXXX" + f[22:]) is None  # other magic


def test_link_ids_match_the_graph_and_one_direction_is_probed():
    assert link_id(("B", 1), ("A", 3)) == "packet:A:3-B:1"
    assert link_id(("A", 10), ("A", 9)) == "packet:A:10-A:9"  # the graph's string order
    links = probed_links([AB, ("B", 1, "A", 3), ("B", 2, "C", 1)])
    assert links == {"packet:A:3-B:1": ProbedLink("packet:A:3-B:1", ("A", 3), ("B", 1)),
                     "packet:B:2-C:1": ProbedLink("packet:B:2-C:1", ("B", 2), ("C", 1))}


def test_control_delay_is_half_the_minimum_echo_rtt():
    cd = ControlDelay(keep=3)
    assert cd.one_way_ms("A") is None
    for rtt in (0.8, 0.4, 0.6):
        cd.add("A", rtt)
    assert cd.one_way_ms("A") == pytest.approx(0.2)
    for rtt in (1.0, 1.0, 1.0):  # the old minimum rolls out
        cd.add("A", rtt)
    assert cd.one_way_ms("A") == pytest.approx(0.5)


def monitor_ab() -> LatencyMonitor:
    lm = LatencyMonitor(tolerance_ms=0.5, timeout=1.0)
    assert lm.set_links(probed_links([AB])) == (["packet:A:3-B:1"], [])
    return lm


def test_sample_subtracts_both_control_legs():
    lm = monitor_ab()
    (link, pid), = lm.send(10.0)
    assert link.src == ("A", 3)
    res = lm.received(pid, ("B", 1), 10.002)  # 2 ms; no echo yet: no link estimate
    assert res.sample.probe_ms == pytest.approx(2.0) and res.sample.link_ms is None
    lm.control.add("A", 0.6)
    lm.control.add("B", 1.0)
    (_, pid), = lm.send(10.2)
    res = lm.received(pid, ("B", 1), 10.2025)
    assert res.link == "packet:A:3-B:1"
    assert res.sample.link_ms == pytest.approx(2.5 - 0.3 - 0.5)


def test_duplicates_misdelivery_and_losses():
    lm = monitor_ab()
    (_, p1), = lm.send(0.0)
    assert lm.received(p1, ("B", 1), 0.001) is not None
    assert lm.received(p1, ("B", 1), 0.002) is None  # duplicate
    (_, p2), = lm.send(0.2)
    assert lm.received(p2, ("C", 1), 0.201) is None and lm.misdelivered == 1  # came back elsewhere
    lm.send(0.4)  # never answered
    lm.send(2.0)  # the probe sent at 0.4 times out here
    snap = lm.snapshot()["packet:A:3-B:1"]
    assert snap["received"] == 1 and snap["lost"] == 1
    assert lm.received(999, ("B", 1), 2.1) is None  # unknown id


def test_path_change_is_detected_on_a_latency_step():
    lm = monitor_ab()
    lm.control.add("A", 0.0)
    lm.control.add("B", 0.0)
    changes = []
    t = 0.0
    for i in range(150):  # 30 s at 200 ms; latency 1 ms, then 4 ms from t = 15 s
        t = i * 0.2
        (_, pid), = lm.send(t)
        delay = (1.0 if t < 15 else 4.0) + (0.3 if i % 3 == 0 else 0.0)
        res = lm.received(pid, ("B", 1), t + delay / 1000)
        changes += res.changes
    assert len(changes) == 1
    assert changes[0].old_ms == pytest.approx(1.0, abs=0.01) and changes[0].new_ms == pytest.approx(4.0, abs=0.01)
    assert 15 < changes[0].t <= 21
    snap = lm.snapshot(samples=5)["packet:A:3-B:1"]
    assert len(snap["samples"]) == 5 and snap["changes"] and snap["base_ms"] == pytest.approx(4.0, abs=0.01)


def test_links_come_and_go_and_minima_are_taken_per_interval():
    lm = monitor_ab()
    for t, ms in ((0.0, 3.0), (0.2, 2.0)):
        (_, pid), = lm.send(t)
        lm.received(pid, ("B", 1), t + ms / 1000)
    assert lm.take_minima() == {"packet:A:3-B:1": pytest.approx(2.0)}
    assert lm.take_minima() == {}
    added, removed = lm.set_links(probed_links([("A", 3, "C", 1)]))  # re-route: bypass at Y
    assert (added, removed) == (["packet:A:3-C:1"], ["packet:A:3-B:1"])
    assert lm.retired == {"packet:A:3-B:1": 2}
    (link, pid), = lm.send(1.0)
    assert link.dst == ("C", 1)
    assert lm.received(pid, ("C", 1), 1.001).link == "packet:A:3-C:1"
    assert lm.set_links(probed_links([("A", 3, "C", 1)])) == ([], [])  # unchanged: keeps its detector


# ---- the probe budget (issue 25: germany50's backbone probed every 200 ms was 245 probes/s) -------
def test_rotate_takes_turns_and_wraps_over_a_list_that_changes():
    from monitor.probes import rotate

    items = list("abcde")
    assert rotate(items, 0, None) == (items, 0) and rotate(items, 3, 5) == (items, 0)  # all fit
    turn, nxt = rotate(items, 0, 2)
    assert (turn, nxt) == (["a", "b"], 2)
    assert rotate(items, 4, 2) == (["e", "a"], 1)  # wraps
    assert rotate(list("abc"), 4, 2) == (["b", "c"], 0)  # a shorter list: the start taken modulo its length
    with pytest.raises(ValueError):
        rotate(items, 0, 0)


def test_a_limited_send_probes_every_link_in_turn():
    lm = LatencyMonitor()
    lm.set_links(probed_links([(f"S{i}", 1, f"T{i}", 1) for i in range(5)]))
    seen: list[list[str]] = []
    for k in range(5):
        seen.append([link.id for link, _pid in lm.send(float(k), limit=2)])
    assert all(len(s) == 2 for s in seen)
    # every link within ceil(5 / 2) = 3 rounds, and equally often over 5 rounds (2 each, 10 probes)
    assert set(seen[0] + seen[1] + seen[2]) == set(lm.links)
    counts = {lid: sum(s.count(lid) for s in seen) for lid in lm.links}
    assert sorted(counts.values()) == [2, 2, 2, 2, 2]
    assert len(lm.send(5.0)) == 5  # no limit: all of them
