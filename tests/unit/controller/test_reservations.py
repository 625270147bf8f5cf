"""Reservations become network state: the manager over a fake Fig. 2 network and a fake store."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.controller import reservation_manager as rv
from app.controller.network_view import NetworkView
from app.controller.plan_runner import PlanRunner
from app.controller.reservation_circuits import ReservationPathError, circuit_for, xcon_id
from app.controller.view_changes import ReservedPortsChanged
from app.update.executor import threaded
from app.update.model import XconSpec
from pce.reservation import PathRequest, compute_path
from tests.lib.fake_network import FakeNetwork
from topology.spec import fig2_testbed, spec_to_graph

TIMING = {"stable_ms": 10, "circuit_timeout_s": 1.0, "verify_timeout_s": 1.0}


@dataclass
class Order:
    id: int
    src: str = "A:1"
    dst: str = "C:3"
    src_vlan: int | None = None
    dst_vlan: int | None = None
    bandwidth: float = 5.0
    mode: str = "static"
    start: float = 0.0
    end: float = 3600.0
    path: dict[str, Any] | None = None
    ero: list[str] | None = None
    name: str = "r"


@dataclass
class Circ:
    a_end: str
    z_end: str
    capacity: float
    xcons: tuple


@dataclass
class Rule:
    switch: str
    table: int
    priority: int
    cookie: int
    match: dict
    actions: list


@dataclass
class Inst:
    reservation_id: int
    state: str
    circuits: tuple
    rules: tuple


@dataclass
class FakeStore:
    """The provisioning store's contract, in memory."""

    states: dict[int, str] = field(default_factory=dict)
    reasons: dict[int, str] = field(default_factory=dict)
    installed: dict[int, Inst] = field(default_factory=dict)
    plans: list[dict] = field(default_factory=list)
    cancel_on_activate: bool = False
    paths: dict[int, dict] = field(default_factory=dict)  # a path lit that was not the stored one

    def mark_active(self, res_id, circuits, rules, now, path=None):
        if path is not None:
            self.paths[res_id] = path
        self.installed[res_id] = Inst(res_id, "ACTIVE", tuple(Circ(**c) for c in circuits),
                                      tuple(Rule(**r) for r in rules))
        if self.cancel_on_activate:
            self.states[res_id] = "CANCELLED"
            return False
        self.states[res_id] = "ACTIVE"
        return True

    def mark_failed(self, res_id, reason, now):
        self.states[res_id], self.reasons[res_id] = "FAILED", reason
        return True

    def mark_released(self, res_id, now):
        self.installed.pop(res_id, None)
        return True

    def record_plan(self, record):
        self.plans.append(record)
        return len(self.plans)

    def xcons_in_use(self, asked, res_id, *also):
        ids = {xcon_id(x) for x in asked}
        return [x for k, inst in self.installed.items() if k not in (res_id, *also) for c in inst.circuits
                for x in c.xcons if xcon_id(x) in ids]


@pytest.fixture
def net():
    n = FakeNetwork.from_spec(fig2_testbed(), xcon_delay_s=0.02)
    yield n
    n.close()


def stored_path(order: Order) -> Order:
    g = spec_to_graph(fig2_testbed())
    order.path = compute_path(g, PathRequest(order.src, order.dst, order.bandwidth, 0, 3600)).to_dict()
    return order


def probes(net: FakeNetwork):
    """Probe frames sent in at both endpoints every 5 ms while a plan runs (the data-plane check)."""

    def start(c):
        stop = threading.Event()

        def loop():
            while not stop.wait(0.005):
                for r in c.ingress:
                    net.send((r.switch, r.match_dict()["in_port"]), {"eth_type": 0x88B6})

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        return lambda: (stop.set(), t.join())

    return start


def manager(net, store, **kw):
    """The manager over the fake network, its plans through a runner; ``events``: the manager's and the
    runner's news (``plan``) and the view's reserved-port announcements (``reserved_ports``), in order."""
    events: list[tuple[str, dict]] = []
    view = NetworkView()
    view.subscribe(lambda c: events.append(("reserved_ports", {})) if isinstance(c, ReservedPortsChanged) else None)
    runner = PlanRunner(net, view, notify=lambda k, d: events.append((k, d)), run_parallel=threaded)
    m = rv.ReservationManager(store, net, lambda: spec_to_graph(fig2_testbed()), runner, run_parallel=threaded,
                              on_event=lambda k, d: events.append((k, d)), probes=probes(net), **TIMING, **kw)
    return m, events


def test_provision_lights_the_circuit_installs_rules_and_release_removes_everything(net):
    store = FakeStore()
    m, events = manager(net, store)
    out = m.provision(stored_path(Order(7)))
    assert out.ok and store.states[7] == "ACTIVE", out
    assert net.all_xcons() == {XconSpec("X", 1, 3), XconSpec("Z", 3, 2)} or {
        (x.ots, x.ports) for x in net.all_xcons()} == {("X", frozenset({1, 3})), ("Z", frozenset({2, 3}))}
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"
    assert net.delivered_to("h3", {"eth_dst": "00:00:00:00:00:01"}) == "h1"
    assert store.plans[-1]["state"] == "done" and store.plans[-1]["kind"] == "provision"
    kinds = [s["kind"] for s in store.plans[-1]["steps"]]
    assert kinds.index("verify") > max(i for i, k in enumerate(kinds) if k.startswith("flow"))
    assert any(k == "reservation_active" for k, _ in events)
    inst = store.installed[7]
    assert [(c.a_end, c.z_end) for c in inst.circuits] == [("A:3", "C:1")] and len(inst.rules) == 4
    out = m.release(inst)
    assert out.ok and 7 not in store.installed
    assert net.all_xcons() == set() and net.all_flows() == []


def test_a_refused_xcon_fails_the_reservation_and_leaves_nothing(net):
    store = FakeStore()
    net.refuse_xcon("Z")
    m, events = manager(net, store)
    out = m.provision(stored_path(Order(8)))
    assert not out.ok and store.states[8] == "FAILED"
    assert "Z" in store.reasons[8] and "rolled back" in store.reasons[8]
    assert net.all_xcons() == set() and net.all_flows() == []
    assert store.plans[-1]["state"] in ("rolled_back", "failed")
    assert any(k == "reservation_failed" for k, _ in events)


def test_a_lighting_that_rolled_back_is_tried_again_after_a_back_off_then_fails(net):
    """A failed try that rolled back leaves the reservation PROVISIONING for ``provision_retries`` more
    tries, ``provision_retry_s`` apart and doubling; the last one fails it, saying how often it tried."""
    store, clock = FakeStore(), [100.0]
    net.refuse_xcon("Z")
    m, events = manager(net, store, provision_retries=2, provision_retry_s=1.0, clock=lambda: clock[0])
    out = m.provision(stored_path(Order(8)))
    assert (out.ok, out.state) == (False, "PROVISIONING") and "retry 1 of 2 in 1 s" in out.reason
    assert 8 not in store.states and net.all_xcons() == set() and net.all_flows() == []  # nothing left, not FAILED
    assert not m.may_try(8, 100.5) and m.may_try(8, 101.0)
    clock[0] = 101.0
    assert "retry 2 of 2 in 2 s" in m.provision(stored_path(Order(8))).reason and not m.may_try(8, 102.9)
    clock[0] = 103.0
    out = m.provision(stored_path(Order(8)))
    assert out.state == "FAILED" and store.states[8] == "FAILED" and "(after 2 retries)" in store.reasons[8]
    assert [k for k, _ in events if k.startswith("reservation_")] == ["reservation_retry"] * 2 + ["reservation_failed"]
    assert m.tries == {} and m.may_try(8, 0.0)


def test_a_retry_that_lights_it_clears_its_back_off_and_ended_ones_are_forgotten(net):
    store = FakeStore()
    net.refuse_xcon("Z")
    m, _ = manager(net, store, provision_retries=1)
    assert m.provision(stored_path(Order(8))).state == "PROVISIONING" and 8 in m.tries
    net._refuse_xcon.clear()  # the switch answers again
    m.tries[8] = (0.0, 1)  # the back-off is over
    assert m.provision(stored_path(Order(8))).ok and store.states[8] == "ACTIVE" and m.tries == {}
    m.tries[9] = (1e12, 1)  # backing off when its window ended: no longer due
    m.forget_tries([8])
    assert m.tries == {}


def test_no_traffic_through_the_rules_fails_verification_and_rolls_back(net):
    store = FakeStore()
    m, _ = manager(net, store)
    m.probes = None  # nothing crosses the path: the counters never rise
    out = m.provision(stored_path(Order(9)))
    assert not out.ok and "verify" in store.reasons[9]
    assert net.all_xcons() == set() and net.all_flows() == []


def test_cancelled_while_lighting_is_taken_down_again(net):
    store = FakeStore(cancel_on_activate=True)
    m, _ = manager(net, store)
    out = m.provision(stored_path(Order(10)))
    assert not out.ok and out.state == "RELEASED"
    assert net.all_xcons() == set() and net.all_flows() == []


def test_a_taken_stored_path_is_recomputed_on_the_live_graph(net):
    store = FakeStore()
    order = stored_path(Order(11))
    busy = {"X": {1, 3}}  # say the stored X 1<->3 is lit for someone else now
    g = spec_to_graph(fig2_testbed())
    g.set_xcon_active("X:1", "X:3", True)
    m, _ = manager(net, store, busy_ports=lambda ots: busy.get(ots, set()))
    m.graph = lambda: g
    c = m.circuit(order)  # around X:1/X:3: A:4 - X 4<->5 - Z 5<->2 - C:1
    assert all(not ({x.in_port, x.out_port} & busy.get(x.ots, set())) for x in c.xcons)
    assert c.segments == ((("A", 4), ("C", 1)),)
    busy["X"] |= {4, 5}
    g.set_xcon_active("X:4", "X:5", True)
    with pytest.raises(ReservationPathError, match="no other is free"):
        m.circuit(order)
    out = m.provision(order)  # fails cleanly: FAILED with the reason, nothing installed
    assert not out.ok and "no other is free" in store.reasons[11] and net.all_flows() == []


def test_the_circuit_walk_of_a_path_with_a_vlan():
    g = spec_to_graph(fig2_testbed())
    path = compute_path(g, PathRequest("A:1", "C:3", 5, 0, 3600))
    c = circuit_for(g, 3, "A:1", "C:3", path.edges, vlan=100)
    assert all(r.match_dict()["vlan_vid"] == 0x1000 | 100 for r in c.rules)
    assert c.segments == (((("A", 3)), ("C", 1)),) and c.capacity == 10.0
    with pytest.raises(ReservationPathError, match="VLAN"):
        circuit_for(g, 3, "A:1", "C:3", path.edges, vlan=5000)
    with pytest.raises(ReservationPathError, match="does not continue"):
        circuit_for(g, 3, "B:2", "C:3", path.edges)


def test_stored_installation_round_trip():
    g = spec_to_graph(fig2_testbed())
    c = circuit_for(g, 5, "A:1", "C:3", compute_path(g, PathRequest("A:1", "C:3", 5, 0, 3600)).edges)
    inst = Inst(5, "ACTIVE", tuple(Circ(**d) for d in rv.circuit_records(c)),
                tuple(Rule(**rv.rule_record(r)) for r in c.rules))
    back = rv.installed_circuit(inst)
    assert set(back.ingress) == set(c.ingress) and set(back.transit) == set(c.transit)
    assert back.xcons == c.xcons and back.segments == c.segments


def test_the_circuit_ports_are_reserved_before_the_plan_and_given_back_after(net):
    store = FakeStore()
    m, events = manager(net, store)
    m.provision(stored_path(Order(12)))
    kinds = [k for k, _ in events]
    assert kinds.index("reserved_ports") < kinds.index("plan")  # before any step ran
    assert m.runner.ports.reservations_of("") == {"reservation:12": frozenset({("A", 3), ("C", 1)})}
    assert all(d["reservation_id"] == 12 for k, d in events if k == "plan")
    n = len(events)
    m.release(store.installed[12])
    after = [k for k, _ in events[n:]]
    assert after.index("reserved_ports") < after.index("reservation_released")
    assert m.runner.ports.reserved_ports == set()
    net.refuse_xcon("Z")
    events.clear()
    m.provision(stored_path(Order(13)))
    assert [k for k, _ in events].count("reserved_ports") == 2 and m.runner.ports.reserved_ports == set()


def test_a_stored_path_that_no_longer_walks_is_recomputed(net):
    store = FakeStore()
    order = stored_path(Order(14))
    order.path["edges"] = ["access:A:1-h1", "packet:A:3-C:1", "access:C:3-h3"]  # a circuit's link, gone now
    m, _ = manager(net, store)
    c = m.circuit(order)
    assert c.xcons and c.segments == ((("A", 3), ("C", 1)),)
    assert m.provision(order).ok
