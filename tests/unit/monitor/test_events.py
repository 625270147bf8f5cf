"""Event classifier on synthetic series (coarse utilization/drops + fine flow rates)."""
from __future__ import annotations

from dataclasses import dataclass

from app.config import load_config
from monitor.counters import Ewma
from monitor.events import (
    BALANCED_GROWTH,
    ELEPHANT_GONE,
    HOT_SPOT,
    HOT_SPOT_CLEARED,
    UNCONSTRAINED_IMBALANCE,
    EventClassifier,
    Thresholds,
)
from topology.flow import FiveTuple

CAP = 100.0


@dataclass(frozen=True)
class F:
    key: FiveTuple
    mbps: float


def ft(i: int, sport: int = 40000) -> FiveTuple:
    return FiveTuple("10.0.0.1", f"10.0.1.{i}", 6, sport + i, 5001)


def kinds(events):
    return [e.kind for e in events]


def test_thresholds_come_from_config():
    th = Thresholds.from_config(load_config()["monitor"])
    assert th.growth_threshold == 0.70 and th.elephant_fraction == 0.10 and th.elephant_gone_intervals == 3


def test_balanced_growth_fires_above_70_percent_with_no_dominant_flow():
    clf, ewma = EventClassifier(), Ewma(0.3)
    fired = []
    for t in range(30):  # 20 similar flows, each growing 0.2 Mbit/s per second
        flows = [F(ft(i), 0.2 * t + (i % 3) * 0.05) for i in range(20)]
        util = ewma.update(sum(f.mbps for f in flows) / CAP)
        evs = clf.observe("A-C", float(t), util, drops=0, capacity_mbps=CAP,
                          flows=flows if clf.is_hot("A-C") else None)
        fired += [(t, e.kind, round(util, 3)) for e in evs]
    assert [k for _, k, _ in fired] == [HOT_SPOT, BALANCED_GROWTH]
    t_hot, _, u = fired[0]
    assert u > 0.70 and fired[1][0] == t_hot + 1  # fine data for one interval, then classified


def test_no_balanced_growth_when_one_flow_dominates():
    clf = EventClassifier()
    flows = [F(ft(0), 60.0)] + [F(ft(i), 1.0) for i in range(1, 15)]
    evs = clf.observe("A-C", 0.0, 0.8, 0, CAP)
    evs += clf.observe("A-C", 1.0, 0.8, 0, CAP, flows)
    assert kinds(evs) == [HOT_SPOT]


def test_imbalance_names_exactly_the_elephants():
    clf = EventClassifier()
    elephants = [F(ft(0, 50000), 30.0), F(ft(1, 50000), 12.0)]
    small = [F(ft(i), 0.8) for i in range(2, 30)]  # 28 mice, each below 10 Mbit/s
    assert kinds(clf.observe("A-C", 0.0, 0.45, drops=120, capacity_mbps=CAP)) == [HOT_SPOT]
    evs = clf.observe("A-C", 1.0, 0.45, drops=80, capacity_mbps=CAP, flows=elephants + small)
    assert kinds(evs) == [UNCONSTRAINED_IMBALANCE]
    assert set(evs[0].flows) == {elephants[0].key, elephants[1].key}
    assert evs[0].flows[0] == elephants[0].key  # largest first
    # same episode, same elephants: not repeated
    assert clf.observe("A-C", 2.0, 0.45, drops=50, capacity_mbps=CAP, flows=elephants + small) == []


def test_imbalance_needs_drops_low_util_and_small_flows():
    for util, drops, nsmall in ((0.45, 0, 28), (0.65, 30, 28), (0.45, 30, 1)):
        clf = EventClassifier()
        clf.observe("c", 0.0, util, drops, CAP)
        flows = [F(ft(0, 50000), 30.0)] + [F(ft(i), 0.5) for i in range(1, 1 + nsmall)]
        assert UNCONSTRAINED_IMBALANCE not in kinds(clf.observe("c", 1.0, util, drops, CAP, flows))


def test_elephant_gone_after_n_intervals_and_hot_spot_cleared():
    clf = EventClassifier(Thresholds(elephant_gone_intervals=3, clear_intervals=2))
    el = F(ft(0, 50000), 30.0)
    clf.observe("c", 0.0, 0.4, 10, CAP)
    clf.observe("c", 1.0, 0.4, 10, CAP, [el, F(ft(1), 1), F(ft(2), 1)])
    assert el.key in clf.tracked
    assert clf.observe_flows(2.0, {el.key: 25.0}) == []
    assert clf.observe_flows(3.0, {el.key: 2.0}) == []
    assert clf.observe_flows(4.0, {el.key: 25.0}) == []  # came back: counter resets
    assert clf.observe_flows(5.0, {el.key: 2.0}) == []
    assert clf.observe_flows(6.0, {}) == []
    gone = clf.observe_flows(7.0, [F(el.key, 0.5)])
    assert kinds(gone) == [ELEPHANT_GONE] and gone[0].flows == (el.key,) and gone[0].circuit == "c"
    assert el.key not in clf.tracked
    assert clf.observe("c", 8.0, 0.1, 0, CAP) == []
    assert kinds(clf.observe("c", 9.0, 0.1, 0, CAP)) == [HOT_SPOT_CLEARED] and not clf.is_hot("c")


@dataclass(frozen=True)
class S:
    key: FiveTuple
    mbps: float
    samples: int


def test_sampling_noise_is_not_an_elephant():
    """A sampled estimate of 1.47 Mbit/s from 11 samples (lower bound 0.6) is no elephant at 1.0;
    a 4 Mbit/s flow from 36 samples (lower bound 2.7) is."""
    clf = EventClassifier()
    noisy = [S(ft(i), 1.47 if i < 3 else 0.6, 11 if i < 3 else 5) for i in range(10)]
    clf.observe("c", 0.0, 0.55, 26, 10.0)
    assert clf.observe("c", 1.0, 0.55, 26, 10.0, noisy) == []
    real = S(ft(0, 50000), 4.0, 36)
    evs = clf.observe("c", 2.0, 0.3, 80, 10.0, [real] + noisy[3:])
    assert kinds(evs) == [UNCONSTRAINED_IMBALANCE] and evs[0].flows == (real.key,)
