"""An elephant whose hosts the controller cannot place yet is judged again, not dropped.

Found by the controller-failover lab (mininet_labs/controller_failover.py): a controller that took over
learnt the hosts behind its predecessor's forwarding rules without their IPv4 address (only ARP, which
reaches the leader alone, tells it), so the first imbalance it saw was skipped with "no learnt host has
the address 10.0.0.1" — and the monitor announces an imbalance once, so the elephant stayed on its
congested circuit for as long as it lasted. Now the skip waits like one the offload gain turned down and
is judged again on each new count, once the host has been learnt."""
from __future__ import annotations

import time

from app.controller.journal import JOURNAL
from app.controller.monitor_app import EventMonitor
from monitor.events import UNCONSTRAINED_IMBALANCE, Event
from monitor.flowstats import FlowCount
from tests.unit.te.test_placement_app import ELEPHANT, make_app, net, with_traffic  # noqa: F401 - fixture


def host_of(view, ip: str) -> str:
    return next(n for n, d in view.g.g.nodes(data=True) if d.get("kind") == "host" and d.get("ip") == ip)


def test_an_elephant_of_a_host_without_address_waits_and_moves_once_the_host_is_learnt(monkeypatch, net):  # noqa: F811
    a = make_app(monkeypatch, net, {"placement": "joint"})
    h1 = host_of(a.view, ELEPHANT.src)
    a.view.g.g.nodes[h1]["ip"] = None  # learnt from the rules a previous leader left: no address yet
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    ev = Event(10.0, "packet:A:3-B:1", UNCONSTRAINED_IMBALANCE, (ELEPHANT,),
               {"elephant_mbps": [6.0], "util": 0.5, "drops": 40, "threshold_mbps": 1.0})
    with_traffic(net, lambda: a._monitor(EventMonitor(ev)))
    (skip,) = JOURNAL.since(since, "te_decision")
    assert skip["decision"] == "skip" and "no learnt host" in skip["reason"], skip
    assert ELEPHANT in a.waiting  # judged again on its next count

    with_traffic(net, a._retry_waiting)  # no newer count yet: still waiting, nothing journalled again
    assert ELEPHANT in a.waiting and len(JOURNAL.since(since, "te_decision")) == 1

    a.view.fine_flows[ELEPHANT] = FlowCount(6_000_000, 6.0, time.monotonic() + 1.0, 8.0)
    with_traffic(net, a._retry_waiting)  # a newer count, the host still without address: quietly waits
    assert ELEPHANT in a.waiting and len(JOURNAL.since(since, "te_decision")) == 1

    a.view.g.g.nodes[h1]["ip"] = ELEPHANT.src  # it ARPed: the leader knows its address now
    a.view.fine_flows[ELEPHANT] = FlowCount(6_750_000, 6.0, time.monotonic() + 2.0, 9.0)
    with_traffic(net, a._retry_waiting)
    decisions = JOURNAL.since(since, "te_decision")
    assert [d["decision"] for d in decisions] == ["skip", "offload"], decisions
    assert ELEPHANT not in a.waiting and len(a.decider.offloads) == 1
