"""The TE app over the fake Fig. 2 network with two host pairs of elephants, h1 → h3 and h2 → h4 (both
A → C): the one that pays is offloaded onto A:4-C:2 and really moved; the one the gain turns down in the
same group waits for its next count (before, it was dropped with the group's offload); judged again in
an event of its own, it never gets a second offload onto the circuit the first holds — the network view
here never shows that circuit's XCONs, as a view that lags the plan would not."""
from __future__ import annotations

import time

from app.controller.journal import JOURNAL
from app.controller.monitor_app import EventMonitor
from monitor.events import UNCONSTRAINED_IMBALANCE, Event
from monitor.flowstats import FlowCount
from tests.unit.te.test_placement_app import ELEPHANT, make_app, net, pkt, switches, with_traffic  # noqa: F401
from topology.flow import FiveTuple

H2_H4 = FiveTuple("10.0.0.2", "10.0.0.4", 17, 45100, 5201)


def test_the_second_host_pair_waits_and_never_takes_the_first_ones_circuit(monkeypatch, net):  # noqa: F811
    a = make_app(monkeypatch, net, {"placement": "joint"})
    now = time.monotonic()
    a.view.fine_flows[H2_H4] = FlowCount(100_000, 3.0, now, 0.3)  # 100 kB so far: a move does not pay yet
    ev = Event(10.0, "packet:A:3-B:1", UNCONSTRAINED_IMBALANCE, (ELEPHANT, H2_H4),
               {"elephant_mbps": [4.0, 3.0], "util": 0.5, "drops": 40, "threshold_mbps": 1.0})
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    with_traffic(net, lambda: a._monitor(EventMonitor(ev)))
    decisions = JOURNAL.since(since, "te_decision")
    (off,) = [d for d in decisions if d["decision"] == "offload"]
    assert off["flows"] == [str(ELEPHANT)] and off["circuit"] == "c0:A:4-C:2"
    assert "B" not in switches(net, "h1", pkt(ELEPHANT)) and len(a.decider.offloads) == 1
    (skip,) = [d for d in decisions if d["decision"] == "skip"]
    assert skip["flows"] == [str(H2_H4)] and skip["gain"][str(H2_H4)]["pays"] is False
    assert H2_H4 in a.waiting  # judged again on its next count
    # its next count pays on its bytes; the view's graph still shows A:4 and C:2 free
    a.view.fine_flows[H2_H4] = FlowCount(1_500_000, 3.0, time.monotonic() + 1.0, 4.0)
    since = JOURNAL.since()[-1]["seq"]
    with_traffic(net, a._retry_waiting)
    (again,) = JOURNAL.since(since, "te_decision")
    assert again["decision"] == "skip", again  # before: a second offload onto c0:A:4-C:2, its plan failing
    assert again["reason"].startswith("no free XCON chain between A and C") and "offload 1" in again["reason"]
    assert len(a.decider.offloads) == 1 and not a.decider.unlit
    assert not [d for d in JOURNAL.since(since, "te_done") if not d["ok"]]
