"""The rate a waiting elephant is judged again at (``app.te.gain.judged_rate`` in ``TeApp._retry_waiting``).

A CI run moved a 2.2-s burst at 6 Mbit/s that the TE loop should have let finish: it was named at a
first sample's ~4 Mbit/s (a few of its 100-ms bursts), and its next count straddled its end (1.56 MB
sent, 4.08 Mbit/s over an interval it was idle for a third of). Judged at 4.08 the move "finished
1.52 s sooner"; at its average since it was counted (5.3 Mbit/s) it does not pay."""
from __future__ import annotations

import time

import pytest

from app.controller.journal import JOURNAL
from app.te.gain import judged_rate
from monitor.events import UNCONSTRAINED_IMBALANCE, Event
from monitor.flowstats import FlowCount
from tests.unit.te.test_placement_app import ELEPHANT, make_app, net, with_traffic  # noqa: F401 - fixture

BURST_BYTES = 1_562_524  # what the CI run's count had seen of the burst


def test_the_highest_of_named_latest_and_average_rate() -> None:
    assert judged_rate(4.0, 4.08, BURST_BYTES, 2.35) == pytest.approx(BURST_BYTES * 8 / 1e6 / 2.35)
    assert judged_rate(6.0, 4.08, BURST_BYTES, 2.35) == 6.0  # named higher: kept
    assert judged_rate(4.0, 7.0, BURST_BYTES, 2.35) == 7.0  # speeding up: the latest count
    assert judged_rate(4.0, 4.08, BURST_BYTES, 0.5) == 4.08  # too short a span for an average
    assert judged_rate(4.0, 4.08, 0, 3.0) == 4.08


def judge_again(monkeypatch, net, counted_s: float) -> list[dict]:  # noqa: F811
    a = make_app(monkeypatch, net, {"placement": "joint"})
    now = time.monotonic()
    a.view.fine_flows[ELEPHANT] = FlowCount(800_000, 4.0, now, 1.2)
    ev = Event(10.0, "packet:A:3-B:1", UNCONSTRAINED_IMBALANCE, (ELEPHANT,),
               {"elephant_mbps": [4.0], "util": 0.5, "drops": 40, "threshold_mbps": 3.0})
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    from app.controller.monitor_app import EventMonitor

    with_traffic(net, lambda: a._monitor(EventMonitor(ev)))
    (skip,) = [d for d in JOURNAL.since(since, "te_decision") if d.get("gain")]
    assert skip["decision"] == "skip" and ELEPHANT in a.waiting, skip  # 0.8 MB: a gain of 0.68 s < 1 s
    a.view.fine_flows[ELEPHANT] = FlowCount(BURST_BYTES, 4.08, now + 1.0, counted_s)
    with_traffic(net, a._retry_waiting)
    return JOURNAL.since(since, "te_decision")


def test_a_burst_ending_inside_a_count_is_judged_at_its_average_and_stays(monkeypatch, net):  # noqa: F811
    decisions = judge_again(monkeypatch, net, counted_s=2.35)
    assert not [d for d in decisions if d["decision"] == "offload"], decisions


def test_the_same_count_without_its_span_is_the_ci_runs_move(monkeypatch, net):  # noqa: F811
    """What the loop did before: the count's 4.08 Mbit/s alone — 3.06 s where it is, 1.53 s moved."""
    decisions = judge_again(monkeypatch, net, counted_s=0.0)
    (off,) = [d for d in decisions if d["decision"] == "offload"]
    g = off["gain"][str(ELEPHANT)]
    assert g["pays"] and g["stay_s"] == pytest.approx(3.064, abs=1e-2) and g["move_s"] == pytest.approx(1.535, abs=1e-2)
