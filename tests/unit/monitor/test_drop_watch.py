"""The drop watch (``[monitor] drop_watch_interval``): queue drops read between ticks make a circuit hot
at once, with fine monitoring on and its early windows due, instead of one Ts later at the next tick;
it never raises a hot spot the tick would not (no drops, a circuit's first interval) and never
counts as a calm interval. Time is passed in (no clock)."""
from __future__ import annotations

from app.config import load_config
from monitor.core import MonitorCore, WatchedLink
from monitor.counters import PortSnapshot
from monitor.events import HOT_SPOT, HOT_SPOT_CLEARED, UNCONSTRAINED_IMBALANCE
from monitor.fine import ENABLE
from tests.unit.monitor.test_early_naming import EL, MICE, FakeFine, rate

AB = WatchedLink("A-B", (("A", 3), ("B", 1)), 10.0)


def calm_core() -> tuple[MonitorCore, FakeFine]:
    """A-B settled and calm at 20 % after the ticks at t = 0, 1."""
    fine = FakeFine()
    core = MonitorCore(load_config()["monitor"], fine)
    core.set_circuits([AB])
    for t in (0, 1):
        for sw, port in AB.ends:
            core.port_stats(float(t), sw, port, PortSnapshot(250_000 * t, 0, drops=0))
        assert core.tick(float(t)).events == []
    return core, fine


def test_queue_drops_between_ticks_make_the_circuit_hot_at_once():
    core, fine = calm_core()
    assert core.watched_points() == [("A", 3), ("B", 1)]
    assert core.watch_drops(1.25, {("A", 3): 0, ("B", 1): 0}).events == []  # the first reading: a base
    res = core.watch_drops(1.5, {("A", 3): 40, ("B", 1): 0})
    (ev,) = res.events
    assert (ev.kind, ev.t, ev.detail["drops"], ev.detail["by"]) == (HOT_SPOT, 1.5, 40, "drop watch")
    assert ev.detail["util"] < 0.6  # the last tick's smoothed utilization
    assert {(a.op, a.switch) for a in res.actions} == {(ENABLE, "A"), (ENABLE, "B")}
    assert core.fresh == {"A-B"} and core.fresh_switches() == ["A", "B"]
    # its early window names the elephant from the first fine data, before the next tick (t = 2)
    fine.flows = [rate(EL, 4.0, 0)] + [rate(m, 0.2, 0) for m in MICE[:3]]
    (named,) = core.early(1.8).events
    assert (named.kind, named.flows, named.t) == (UNCONSTRAINED_IMBALANCE, (EL,), 1.8)
    assert core.watch_drops(1.75, {("A", 3): 90}).events == []  # hot already: one hot spot per episode


def test_no_rise_no_hot_spot_and_readings_never_count_as_calm():
    core, _fine = calm_core()
    for t in (1.25, 1.5, 1.75):
        assert core.watch_drops(t, {("A", 3): 7, ("B", 1): 0}).events == []  # steady counters: no drops
    core.watch_drops(1.8, {("A", 3): 9})
    assert core.classifier.is_hot("A-B")
    for t in (1.85, 1.9, 1.95, 1.97):  # many calm readings: the hot spot stays until calm ticks clear it
        core.watch_drops(t, {("A", 3): 9})
    assert core.classifier.is_hot("A-B")
    kinds = []
    for t in (2, 3, 4):
        for sw, port in AB.ends:
            core.port_stats(float(t), sw, port, PortSnapshot(250_000 * t, 0, drops=0))
        kinds += [e.kind for e in core.tick(float(t)).events]
    assert kinds == [HOT_SPOT_CLEARED]  # after clear_intervals (3) calm ticks, as without the watch


def test_a_circuit_in_its_first_interval_is_not_judged():
    """Its ports were dark for part of the interval: the switch counted drops there (core module doc)."""
    fine = FakeFine()
    core = MonitorCore(load_config()["monitor"], fine)
    core.set_circuits([AB])
    assert core.watched_points() == []  # not settled: not read
    core.watch_drops(0.25, {("A", 3): 0})
    assert core.watch_drops(0.5, {("A", 3): 3}).events == []


def test_a_hot_spot_late_in_an_interval_keeps_its_early_windows_after_the_next_tick():
    """Hot at 1.8 by the watch, its count rules too young for a rate before the tick at 2 (which saw no
    drops of its own): the early windows go on after it — the elephant is named at 2.3 from the hot
    spot's drops — and stop 1.5 intervals (fine_early_span 0: 1.5 Ts) after the hot spot if nothing is named."""
    core, fine = calm_core()
    core.watch_drops(1.75, {("A", 3): 0, ("B", 1): 0})
    assert core.watch_drops(1.8, {("A", 3): 40}).events[0].kind == HOT_SPOT
    assert core.early(1.9).events == []  # no fine data yet
    for sw, port in AB.ends:
        core.port_stats(2.0, sw, port, PortSnapshot(500_000, 0, drops=0))
    assert [e.kind for e in core.tick(2.0).events] == []
    assert core.fresh == {"A-B"} and core.fresh_since() == 1.8
    fine.flows = [rate(EL, 4.0, 0)] + [rate(m, 0.2, 0) for m in MICE[:3]]
    (named,) = core.early(2.3).events
    assert (named.kind, named.flows, named.detail["drops"]) == (UNCONSTRAINED_IMBALANCE, (EL,), 40)
    assert core.fresh == set()
    # another circuit episode: nothing named within the span, then the tick lets it go
    late, _ = calm_core()
    late.watch_drops(1.75, {("A", 3): 0})
    late.watch_drops(1.8, {("A", 3): 40})
    for t in (2.0, 3.0, 3.5):
        for sw, port in AB.ends:
            late.port_stats(t, sw, port, PortSnapshot(int(250_000 * t), 0, drops=int(10 * t)))  # hot still
        late.tick(t)
        assert late.fresh == ({"A-B"} if t < 3.3 else set()) and late.classifier.is_hot("A-B")
