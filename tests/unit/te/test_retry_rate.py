"""The rate a waiting elephant is judged again at (``app.te.gain.judged_rate`` in ``TeApp._retry_waiting``).

A CI run moved a 2.2-s burst at 6 Mbit/s that the TE loop should have let finish: it was named at a
first sample's ~4 Mbit/s (a few of its 100-ms bursts), and its next count straddled its end (1.56 MB
sent, 4.08 Mbit/s over an interval it was idle for a third of). Judged at 4.08 the move "finished
1.52 s sooner"; at its average since it was counted (5.3 Mbit/s) it does not pay. A count idle for
half its interval dilutes that average too: no move is decided on a count that shows the flow slowing."""
from __future__ import annotations

import time

import pytest

from app.controller.journal import JOURNAL
from app.te.gain import judged_rate, slowing
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


def judge_again(monkeypatch, net, counted_s: float, sent: int = BURST_BYTES, mbps: float = 4.08,  # noqa: F811
                then: FlowCount | None = None) -> tuple[list[dict], object]:
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
    a.view.fine_flows[ELEPHANT] = FlowCount(sent, mbps, now + 1.0, counted_s)
    with_traffic(net, a._retry_waiting)
    if then is not None:
        a.view.fine_flows[ELEPHANT] = then
        with_traffic(net, a._retry_waiting)
    return JOURNAL.since(since, "te_decision"), a


def test_a_burst_ending_inside_a_count_is_judged_at_its_average_and_stays(monkeypatch, net):  # noqa: F811
    decisions, a = judge_again(monkeypatch, net, counted_s=2.35)
    assert ELEPHANT in a.waiting
    assert not [d for d in decisions if d["decision"] == "offload"], decisions


def test_the_same_count_without_its_span_is_the_ci_runs_move(monkeypatch, net):  # noqa: F811
    """What the loop did before: the count's 4.08 Mbit/s alone — 3.06 s where it is, 1.53 s moved."""
    decisions, _ = judge_again(monkeypatch, net, counted_s=0.0)
    (off,) = [d for d in decisions if d["decision"] == "offload"]
    g = off["gain"][str(ELEPHANT)]
    assert g["pays"] and g["stay_s"] == pytest.approx(3.064, abs=1e-2) and g["move_s"] == pytest.approx(1.535, abs=1e-2)


def test_slowing_is_a_count_well_below_the_average_since_counted() -> None:
    assert slowing(3.125, 1_718_750, 2.7)  # 2.2 s at 6.25 Mbit/s, then idle half the interval: 3.1 < 0.75 x 5.1
    assert not slowing(4.08, BURST_BYTES, 2.35)  # 0.77 of its average
    assert not slowing(6.0, 50_000_000, 66.0) and not slowing(9.0, 1_000_000, 2.0)  # steady, speeding up
    assert not slowing(0.5, 1_000_000, 0.6)  # too short a span to tell


def test_a_burst_idle_for_half_a_count_is_not_moved_on_it_and_then_ends(monkeypatch, net):  # noqa: F811
    """Judged at its average (5.1 Mbit/s) this count would pay (gain 1.04 s): it shows the flow slowing,
    so it is not judged; the next count is below the elephant rate — it ended, nothing was moved."""
    decisions, a = judge_again(monkeypatch, net, counted_s=2.7, sent=1_718_750, mbps=3.125)
    assert not [d for d in decisions if d["decision"] == "offload"] and ELEPHANT in a.waiting, decisions
    ended, a = judge_again(monkeypatch, net, counted_s=2.7, sent=1_718_750, mbps=3.125,
                           then=FlowCount(1_718_750, 0.0, time.monotonic() + 2.0, 3.7))
    assert not [d for d in ended if d["decision"] == "offload"] and ELEPHANT not in a.waiting
    assert "ended (below the elephant rate)" in ended[-1]["reason"], ended


def test_a_steady_flow_that_has_sent_enough_is_moved_on_its_next_count(monkeypatch, net):  # noqa: F811
    decisions, a = judge_again(monkeypatch, net, counted_s=66.0, sent=50_000_000, mbps=6.0)
    (off,) = [d for d in decisions if d["decision"] == "offload"]
    assert off["gain"][str(ELEPHANT)]["pays"] and ELEPHANT not in a.waiting


def test_a_count_without_news_does_not_end_the_wait(monkeypatch, net):  # noqa: F811
    """Only a newer count can tell that an elephant ended: one the loop judged already (same time) is no
    evidence, whatever rate it carries."""
    _, a = judge_again(monkeypatch, net, counted_s=2.35)
    seen = a.waiting[ELEPHANT][2]
    a.view.fine_flows[ELEPHANT] = FlowCount(BURST_BYTES, 0.0, seen, 2.35)
    with_traffic(net, a._retry_waiting)
    assert ELEPHANT in a.waiting
