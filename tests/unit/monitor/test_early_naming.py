"""Elephants named from the first fine window after a hot spot (MonitorCore.early), not a whole
interval later; the confidence rule still refuses few-sample estimates; the baseline's ``hold``."""
from __future__ import annotations

from app.config import load_config
from monitor.core import MonitorCore, WatchedLink
from monitor.counters import PortSnapshot
from monitor.events import HOT_SPOT, UNCONSTRAINED_IMBALANCE, EventClassifier
from monitor.fine import ENABLE, FineAction, FineMonitorManager
from monitor.sflow.estimator import FlowRate
from topology.flow import FiveTuple

EL = FiveTuple("10.0.0.1", "10.0.0.3", 17, 45000, 5201)
MICE = [FiveTuple("10.0.0.1", "10.0.0.3", 17, 46001 + i, 5201) for i in range(4)]


class FakeFine:
    def __init__(self) -> None:
        self.flows: list[FlowRate] = []

    def flow_rates(self, now=None, agents=None):
        return list(self.flows)


def rate(key: FiveTuple, mbps: float, samples: int) -> FlowRate:
    return FlowRate(key, mbps * 1e6 / 8, samples, (("127.0.1.1", 1),))


def feed(core: MonitorCore, t: float, tx: int, drops: int) -> None:
    for sw, port in (("A", 3), ("B", 1)):
        core.port_stats(t, sw, port, PortSnapshot(tx, 0, drops=drops if sw == "A" else 0))


def hot_core() -> tuple[MonitorCore, FakeFine]:
    """A core whose circuit A-B just became hot by drops at t = 2 (at 20% utilization)."""
    fine = FakeFine()
    core = MonitorCore(load_config()["monitor"], fine)
    core.set_circuits([WatchedLink("A-B", (("A", 3), ("B", 1)), 10.0)])
    for t, drops in ((0, 0), (1, 0), (2, 120)):
        feed(core, float(t), 250_000 * t, drops)
        res = core.tick(float(t))
    assert [e.kind for e in res.events] == [HOT_SPOT] and core.fresh == {"A-B"}
    return core, fine


def test_early_names_the_elephant_half_an_interval_after_the_hot_spot():
    core, fine = hot_core()
    fine.flows = [rate(EL, 4.0, 15)] + [rate(m, 0.2, 1) for m in MICE[:3]]
    res = core.early(2.5)
    (ev,) = res.events
    assert ev.kind == UNCONSTRAINED_IMBALANCE and ev.flows == (EL,) and ev.t == 2.5
    assert ev.detail["drops"] == 120 and ev.detail["util"] < 0.6
    assert core.fresh == set() and core.early(2.6).events == []  # once per hot spot
    feed(core, 3.0, 750_000, 240)
    assert [e.kind for e in core.tick(3.0).events] == []  # the next tick does not name it again


def test_early_refuses_an_estimate_from_too_few_samples():
    """3 samples at 4 Mbit/s: lower bound 4·(1 − 1.96/√3) < 1 Mbit/s, so no elephant yet; the next
    tick (a full window) still names it: early naming only ever comes sooner, never instead."""
    core, fine = hot_core()
    fine.flows = [rate(EL, 4.0, 3)] + [rate(m, 0.2, 1) for m in MICE[:3]]
    assert core.early(2.5).events == [] and core.fresh == {"A-B"}  # looked at again later
    fine.flows = [rate(EL, 4.0, 30)] + [rate(m, 0.2, 2) for m in MICE[:3]]
    feed(core, 3.0, 750_000, 240)
    assert [(e.kind, e.flows) for e in core.tick(3.0).events] == [(UNCONSTRAINED_IMBALANCE, (EL,))]
    assert core.fresh == set()  # the tick ends the early looks


def test_a_later_early_look_names_the_elephant_once_enough_samples_exist():
    core, fine = hot_core()
    fine.flows = [rate(EL, 4.0, 4)] + [rate(m, 0.2, 1) for m in MICE[:3]]
    assert core.early(2.5).events == []
    fine.flows = [rate(EL, 4.0, 16)] + [rate(m, 0.2, 1) for m in MICE[:3]]
    assert [e.flows for e in core.early(2.6).events] == [(EL,)] and core.fresh == set()


def test_early_needs_a_hot_spot_by_drops():
    fine = FakeFine()
    core = MonitorCore(load_config()["monitor"], fine)
    core.set_circuits([WatchedLink("A-B", (("A", 3), ("B", 1)), 10.0)])
    for t in range(6):  # 95% utilization, no drops: hot by load, not a candidate for imbalance
        feed(core, float(t), 1_187_500 * t, 0)
        core.tick(float(t))
    assert core.fresh == set()
    fine.flows = [rate(EL, 4.0, 50)] + [rate(m, 0.2, 2) for m in MICE]
    assert core.early(5.5).events == []


def test_name_elephants_does_not_touch_hot_state():
    clf = EventClassifier()
    assert clf.name_elephants("X", 0.0, 0.2, 10, 10.0, [rate(EL, 4.0, 50)]) == []  # not hot: nothing
    clf.observe("X", 0.0, 0.2, 10, 10.0)
    evs = clf.name_elephants("X", 0.5, 0.2, 10, 10.0, [rate(EL, 4.0, 50)] + [rate(m, 0.2, 2) for m in MICE])
    assert [e.kind for e in evs] == [UNCONSTRAINED_IMBALANCE] and clf.is_hot("X") and EL in clf.tracked


def test_hold_keeps_switches_on_for_a_holder():
    mgr = FineMonitorManager(lambda c: ("A", "B"))
    assert mgr.hold("everywhere", ["C", "A", "B"]) == [FineAction(ENABLE, s) for s in ("A", "B", "C")]
    assert mgr.hold("everywhere", ["A", "B", "C"]) == []
    assert mgr.enabled == {"A", "B", "C"}


def test_fine_everywhere_names_the_elephant_in_the_hot_spot_interval():
    """The per-flow polling baseline has the flows' rates before the circuit is hot."""
    fine = FakeFine()
    core = MonitorCore({**load_config()["monitor"], "fine_everywhere": True}, fine)
    core.set_circuits([WatchedLink("A-B", (("A", 3), ("B", 1)), 10.0)])
    fine.flows = [rate(EL, 4.0, 0)] + [rate(m, 0.2, 0) for m in MICE]
    kinds = []
    for t, drops in ((0, 0), (1, 0), (2, 120)):
        feed(core, float(t), 250_000 * t, drops)
        kinds += [(t, e.kind) for e in core.tick(float(t)).events]
    assert kinds == [(2, HOT_SPOT), (2, UNCONSTRAINED_IMBALANCE)]
