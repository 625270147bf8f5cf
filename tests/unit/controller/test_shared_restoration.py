"""A shared circuit is one failure unit (grooming, issue 28; docs/failures.md "Shared circuits"): over the
fake Fig. 2 network, the reservations riding a circuit whose fibre is cut are restored together — one
release plan, one provision plan, the replacement circuit shared again when it has room, split when it
has not — and the controller app spawns one restoration for the unit, not one per rider."""
from __future__ import annotations

import dataclasses

import pytest

from app.controller import shared_restoration as sr
from app.controller.failures import Failures
from app.controller.network_view import NetworkView
from app.controller.plan_runner import PlanRunner
from app.controller.reservation_circuits import circuit_for
from app.controller.reservation_manager import ReservationManager
from app.update.executor import threaded
from pce.bookings import Booking
from pce.reservation import PathRequest, compute_path
from tests.lib.fake_network import FakeNetwork
from tests.unit.controller.test_groomed_reservations import CIRCUIT, groomed_orders, lit, reaches, vlan_probes
from tests.unit.controller.test_reservations import TIMING, Order, manager, net, stored_path  # noqa: F401
from tests.unit.controller.test_restoration import RestoringStore
from topology import granularity, rule_plan
from topology.spec import LinkSpec, fig2_testbed, spec_to_graph

CUT = Failures({("X", 3): "loss of light at X:3"})
AVOID = ("X:3", "Z:3")


def held_by(fabric):  # noqa: ANN001, ANN201
    """The OTS ports an applied XCON holds, as the live controller's view says (``busy_ports``)."""
    return lambda ots: {p for x in fabric.xcons(ots) for p in x.ports}


def three_riders_lit(fabric, store, **kw):  # noqa: ANN001, ANN201
    m, events = manager(fabric, store, busy_ports=held_by(fabric), **kw)
    m.probes = vlan_probes(fabric)
    orders = groomed_orders(3)
    for o in orders:
        assert m.provision(o).ok
    assert lit(fabric) == CIRCUIT
    return m, events, orders


def test_the_riders_of_a_cut_circuit_are_restored_together_on_one_new_circuit(net) -> None:  # noqa: F811
    store = RestoringStore()
    m, events, orders = three_riders_lit(net, store, meter_static=True)
    before = len(store.plans)
    net.cut_fibre(("X", 3))
    assert all(reaches(net, 100 + i) is None for i in range(3))  # all three dark
    (unit,) = sr.failure_units(m.active, CUT)
    assert unit.ids == (1, 2, 3) and unit.shared and unit.cause == "loss of light at X:3"
    outs = sr.restore_together(m, orders, unit.cause, 100.0, AVOID)
    assert [(o.reservation_id, o.state) for o in outs] == [(1, "ACTIVE"), (2, "ACTIVE"), (3, "ACTIVE")], outs
    # one release plan and one provision plan for the unit (not three of each)
    assert [p["kind"] for p in store.plans[before:]] == ["release", "provision"]
    assert store.plans[-1]["state"] == "done"
    assert any(s["kind"] == "verify" and s["ok"] for s in store.plans[-1]["steps"])
    # one new circuit, shared by all three: the same XCONs in every rider's circuit, each lit once
    new = lit(net)
    assert new and not new & CIRCUIT and not any(("X", 3) in {(o, p) for p in ps} for o, ps in new)
    assert len({frozenset((x.ots, x.ports) for x in m.active[o.id].xcons) for o in orders}) == 1
    xcon_adds = [s for s in store.plans[-1]["steps"] if s["kind"].startswith("xcon")]
    assert len(xcon_adds) == len(new)
    assert all(reaches(net, 100 + i) == "h3" for i in range(3))
    # still metered at their bandwidth, each
    assert net.meters["A"] == {rule_plan.reservation_meter(o.id): 3000.0 for o in orders}
    assert [r["outcome"] for r in store.restorations] == ["restored"] * 3
    assert all("optical:X:3-Z:3" not in r["new_path"] for r in store.restorations)
    restored = [d for k, d in events if k == "reservation_restored"]
    assert len(restored) == 3 and all(d["unit"] == [1, 2, 3] and d["circuits"] == 1 for d in restored)
    # the circuit is shared again: it goes with the last of them, as before the cut
    m.release(store.installed[1])
    m.release(store.installed[2])
    assert lit(net) == new and reaches(net, 102) == "h3"
    m.release(store.installed[3])
    assert lit(net) == set() and net.all_flows() == []


def test_one_by_one_the_same_cut_would_light_a_circuit_per_rider(net) -> None:  # noqa: F811
    """What the unit avoids: each rider restored on its own takes its rules down while the others keep the
    dark circuit's XCONs, and lights a replacement around them — two circuits, and the rider that finds
    no way left (A has two circuit ports) DEGRADED."""
    store = RestoringStore()
    m, _, orders = three_riders_lit(net, store)
    net.cut_fibre(("X", 3))
    outs = [m.restore(o, "loss of light at X:3", 100.0, avoid=AVOID) for o in orders]
    circuits = {frozenset((x.ots, x.ports) for x in m.active[o.id].xcons) for o in orders if o.id in m.active}
    assert [o.state for o in outs] == ["ACTIVE", "DEGRADED", "ACTIVE"] and len(circuits) == 2, (outs, circuits)


def _wide_fig2(third_port: bool = True):
    """Fig. 2 with the circuit A:3–X:1⇔X:3–Z:3⇔Z:2–C:1 on ODU2e ports (10.4 Mbit/s), every other circuit
    ODU2 (10), and a third circuit port at A and C (A:5–X:7, C:5–Z:7): two riders of 5.2 Mbit/s fill the
    wide circuit, no replacement holds both, and there are two ways around its fibre."""
    spec = fig2_testbed()
    wide = {"X": (1, 3), "Z": (3, 2)}
    ots = tuple(dataclasses.replace(o, ports={**{p: ("ODU2e" if p in wide.get(o.name, ()) else g)
                                                 for p, g in o.ports.items()},
                                              **({7: "ODU2"} if o.name in wide and third_port else {})})
                for o in spec.ots)
    cap, odu2 = granularity.capacity_mbps("ODU2e", 1.0), granularity.capacity_mbps("ODU2", 1.0)
    ends = {("A", 3, "X", 1), ("C", 1, "Z", 2), ("X", 3, "Z", 3)}
    links = tuple(dataclasses.replace(lk, mbps=cap) if (lk.a, lk.a_port, lk.b, lk.b_port) in ends else lk
                  for lk in spec.links)
    if third_port:
        links += (LinkSpec("A", 5, "X", 7, "adaptation", odu2), LinkSpec("C", 5, "Z", 7, "adaptation", odu2))
    return dataclasses.replace(spec, ots=ots, links=links)


def two_wide_riders(spec, fabric):  # noqa: ANN001, ANN201
    """Two 5.2 Mbit/s riders admitted with grooming on the wide circuit and lit; the manager, store, orders."""
    g = spec_to_graph(spec)
    books: list[Booking] = []
    orders = []
    for i in range(2):
        res = compute_path(g, PathRequest("A:1", "C:3", 5.2, 0, 3600, groom=True, tag=100 + i), books)
        books.append(res.booking(str(i + 1), 0, 3600, 5.2, tag=100 + i))
        orders.append(Order(i + 1, src_vlan=100 + i, dst_vlan=100 + i, bandwidth=5.2, path=res.to_dict()))
    store = RestoringStore()
    runner = PlanRunner(fabric, NetworkView(), run_parallel=threaded)
    m = ReservationManager(store, fabric, lambda: spec_to_graph(spec), runner, run_parallel=threaded,
                           probes=vlan_probes(fabric), busy_ports=held_by(fabric), **TIMING)
    for o in orders:
        assert m.provision(o).ok
    assert lit(fabric) == CIRCUIT  # both on the wide circuit
    return m, store, orders


@pytest.fixture(params=[True, False], ids=["two-ways-around", "one-way-around"])
def wide(request):
    spec = _wide_fig2(third_port=request.param)
    n = FakeNetwork.from_spec(spec, xcon_delay_s=0.02)
    yield spec, n
    n.close()


def test_riders_no_replacement_holds_are_split_by_one_plan_or_one_is_degraded_alone(wide) -> None:
    """Two ways around the cut: a circuit each, lit by one plan. One way: the first rider (the widest,
    then the lowest id) takes it, the other is DEGRADED alone (retried like any DEGRADED one)."""
    spec, fabric = wide
    m, store, orders = two_wide_riders(spec, fabric)
    fabric.cut_fibre(("X", 3))
    (unit,) = sr.failure_units(m.active, CUT)
    before = len(store.plans)
    outs = sr.restore_together(m, orders, unit.cause, 100.0, AVOID)
    assert [p["kind"] for p in store.plans[before:]] == ["release", "provision"]
    if len(spec.links) > len(fig2_testbed().links):  # A:5 and C:5: two ways around
        assert all(o.ok and o.state == "ACTIVE" for o in outs), outs
        a, b = (frozenset((x.ots, x.ports) for x in m.active[o.id].xcons) for o in orders)
        assert a and b and not a & b  # split: a circuit each, disjoint
        assert reaches(fabric, 100) == "h3" and reaches(fabric, 101) == "h3"
    else:
        assert [(o.reservation_id, o.state) for o in outs] == [(1, "ACTIVE"), (2, "DEGRADED")], outs
        assert "no path around the failure" in store.reasons[2] and 2 not in m.active
        assert reaches(fabric, 100) == "h3" and reaches(fabric, 101) is None
        assert lit(fabric) == {(x.ots, x.ports) for x in m.active[1].xcons}  # nothing of rider 2 left


def _all_degraded(fabric, store):  # noqa: ANN001, ANN202
    """Three riders of A:3–C:1 left DEGRADED by a failure with no way around (every fibre of X cut),
    then the fibres repaired."""
    m, _, orders = three_riders_lit(fabric, store)
    for p in (2, 3, 5, 6):
        fabric.cut_fibre(("X", p))
    outs = sr.restore_together(m, orders, "loss of light at X:3", 100.0,
                               ("X:2", "X:3", "X:5", "X:6", "Y:1", "Z:3", "Z:5", "Z:6"))
    assert [o.state for o in outs] == ["DEGRADED"] * 3 and not m.active and fabric.all_xcons() == set()
    assert all(store.states[o.id] == "DEGRADED" for o in orders) and fabric.all_flows() == []
    for p in (2, 3, 5, 6):
        fabric.cut_fibre(("X", p), repair=True)
    return m, orders


def test_degraded_riders_are_retried_together_and_share_one_circuit_again(net) -> None:  # noqa: F811
    store = RestoringStore()
    m, orders = _all_degraded(net, store)
    before = len(store.plans)
    outs = sr.restore_together(m, orders, "retry 2 after a failure", 100.0, (), attempt=2)
    assert [o.state for o in outs] == ["ACTIVE"] * 3, outs
    assert [p["kind"] for p in store.plans[before:]] == ["provision"]  # nothing lit to take down first
    assert len({frozenset((x.ots, x.ports) for x in m.active[o.id].xcons) for o in orders}) == 1
    assert all(reaches(net, 100 + i) == "h3" for i in range(3))


def test_degraded_riders_retried_one_by_one_would_not_all_come_back(net) -> None:  # noqa: F811
    """What the grouped retry avoids: the first lights A:3–C:1 again, the second (its ports taken) A:4–C:2,
    the third finds neither of A's circuit ports free."""
    store = RestoringStore()
    m, orders = _all_degraded(net, store)
    outs = [m.restore(o, "retry 2 after a failure", 100.0, avoid=(), attempt=2) for o in orders]
    assert [o.state for o in outs] == ["ACTIVE", "ACTIVE", "DEGRADED"], outs


def test_retry_units_group_by_the_circuits_of_the_stored_paths() -> None:
    orders = groomed_orders(3)
    other = stored_path(Order(7, src="A:2", dst="C:4"))
    assert [[o.id for o in u] for u in sr.retry_units(orders + [other])] in ([[1, 2, 3, 7]], [[1, 2, 3], [7]])
    lone = Order(8, path={"edges": [], "xcons": [["X:4", "X:5"], ["Z:5", "Z:4"]]})
    assert [[o.id for o in u] for u in sr.retry_units([orders[0], lone])] == [[1], [8]]
    assert sr.retry_units([]) == []


def test_the_app_retries_the_degraded_riders_of_a_circuit_as_one_unit(monkeypatch) -> None:
    from app.controller import reservations_app
    from app.controller.api_routes import CONTEXT as ROUTES
    from app.controller.api_routes import ApiRoutes
    from app.controller.network_view import CONTEXT as VIEW
    from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
    from app.controller.openflow_southbound import OpenFlowSouthbound

    app = reservations_app.ReservationsApp(**{VIEW: NetworkView(), SOUTHBOUND: OpenFlowSouthbound(),
                                              ROUTES: ApiRoutes()})
    orders = groomed_orders(3)
    monkeypatch.setattr(app, "_db", lambda name, *a: orders if name == "to_restore" else [])
    spawned: list = []
    monkeypatch.setattr(reservations_app.hub, "spawn", lambda fn, *a: spawned.append((fn, a)))
    app.retry = {1: (0.0, 3), 2: (0.0, 3), 3: (0.0, 3)}
    app._retry_degraded(10.0)
    assert len(spawned) == 1 and spawned[0][0] == app._restore_unit
    unit, _now, attempt = spawned[0][1]
    assert unit.ids == (1, 2, 3) and attempt == 3 and unit.cause == "retry 3 after a failure"
    assert app.busy == {1, 2, 3}


def test_failure_units_group_riders_of_a_circuit_and_leave_the_rest_alone() -> None:
    g = spec_to_graph(fig2_testbed())
    orders = groomed_orders(3)
    active = {o.id: circuit_for(g, o.id, o.src, o.dst, o.path["edges"], o.src_vlan) for o in orders}
    other = stored_path(Order(7, src="A:2", dst="C:4", path=None))
    active[7] = circuit_for(g, 7, "A:2", "C:4", other.path["edges"])
    assert [u.ids for u in sr.failure_units(active, CUT)] in ([(1, 2, 3)], [(1, 2, 3, 7)])
    assert sr.failure_units(active, Failures()) == []
    assert [u.ids for u in sr.failure_units(active, CUT, skip={2})][0][:2] == (1, 3)
    # two reservations on circuits of their own that one failure breaks: two units of one
    lone = {1: active[1], 9: dataclasses.replace(active[2], ident=9, segment_xcons=((),))}
    units = sr.failure_units(lone, CUT)
    assert [u.ids for u in units] == [(1,), (9,)] and not any(u.shared for u in units)


def test_the_units_release_plan_keeps_xcons_someone_outside_the_unit_uses() -> None:
    g = spec_to_graph(fig2_testbed())
    a, b = groomed_orders(2)
    broken = {o.id: circuit_for(g, o.id, o.src, o.dst, o.path["edges"], o.src_vlan) for o in (a, b)}
    plan = sr.release_plan(broken, [])
    xcon_steps = [s for s in plan.steps if "xcon" in type(s).__name__.lower()]
    assert len(xcon_steps) == 2  # X and Z, once: both riders' rules, the circuit taken down once
    flow_steps = [s for s in plan.steps if s not in xcon_steps]
    assert len(flow_steps) == len(broken[1].rules) + len(broken[2].rules)
    kept = sr.release_plan(broken, [], [("X", frozenset({1, 3}))])
    assert len([s for s in kept.steps if "xcon" in type(s).__name__.lower()]) == 1  # X's XCON stays (Z's goes)


def test_the_app_spawns_one_restoration_for_the_riders_of_a_shared_circuit(monkeypatch) -> None:
    from types import SimpleNamespace

    from app.controller import reservations_app
    from app.controller.api_routes import CONTEXT as ROUTES
    from app.controller.api_routes import ApiRoutes
    from app.controller.model import OTS, PortInfo, SwitchInfo
    from app.controller.network_view import CONTEXT as VIEW
    from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
    from app.controller.openflow_southbound import OpenFlowSouthbound

    def port(n: int, up: bool) -> PortInfo:
        return PortInfo(n, f"p{n}", "00:00:00:00:00:00", up)

    view = NetworkView()
    view.add_switch(SwitchInfo(0xF01, OTS, 1, "X", {1: port(1, True), 3: port(3, True)}))
    app = reservations_app.ReservationsApp(**{VIEW: view, SOUTHBOUND: OpenFlowSouthbound(), ROUTES: ApiRoutes()})
    app.writer = SimpleNamespace()
    g = spec_to_graph(fig2_testbed())
    for o in groomed_orders(3):
        app.manager.active[o.id] = circuit_for(g, o.id, o.src, o.dst, o.path["edges"], o.src_vlan)
    assert [u["reservations"] for u in app.r_reservations({}, {})["shared"]] == [[1, 2, 3]]  # the control API
    spawned: list = []
    monkeypatch.setattr(reservations_app.hub, "spawn", lambda fn, *a: spawned.append((fn, a)))
    view.set_port(0xF01, 3, port(3, False), 1.0)  # the fibre at X:3 failed
    app._network_changed(None)
    assert len(spawned) == 1 and spawned[0][0] == app._restore_unit
    assert spawned[0][1][0].ids == (1, 2, 3) and app.busy == {1, 2, 3}
    app._network_changed(None)
    assert len(spawned) == 1  # being restored already


class ElasticRestoringStore(RestoringStore):
    def set_provisioned(self, res_id, mbps, now):  # noqa: ANN001, ANN201
        self.provisioned = {**getattr(self, "provisioned", {}), res_id: mbps}
        return True


def test_an_elastic_rider_keeps_its_meter_and_state_across_the_unit_restoration(net) -> None:  # noqa: F811
    store = ElasticRestoringStore()
    m, _ = manager(net, store, busy_ports=held_by(net), meter_static=True)
    m.probes = vlan_probes(net)
    orders = groomed_orders(3)
    orders[2] = dataclasses.replace(orders[2], mode="elastic")
    for o in orders:
        assert m.provision(o).ok
    state = m.elastic[3]
    assert net.meters["A"][rule_plan.reservation_meter(3)] == 1250.0  # one unit to start with
    net.cut_fibre(("X", 3))
    outs = sr.restore_together(m, orders, "loss of light at X:3", 100.0, AVOID)
    assert all(o.state == "ACTIVE" for o in outs), outs
    assert m.elastic[3] is state and all(r.meter == rule_plan.reservation_meter(3) for r in m.active[3].ingress)
    assert net.meters["A"] == {rule_plan.reservation_meter(1): 3000.0, rule_plan.reservation_meter(2): 3000.0,
                               rule_plan.reservation_meter(3): 1250.0}
    assert all(reaches(net, 100 + i) == "h3" for i in range(3))


def test_the_units_restoration_waits_the_holdoff_and_skips_a_failure_that_cleared(monkeypatch) -> None:
    from app.controller import reservations_app
    from app.controller.api_routes import CONTEXT as ROUTES
    from app.controller.api_routes import ApiRoutes
    from app.controller.model import OTS, PortInfo, SwitchInfo
    from app.controller.network_view import CONTEXT as VIEW
    from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
    from app.controller.openflow_southbound import OpenFlowSouthbound
    from app.controller.reservation_manager import Outcome

    def port(n: int, up: bool) -> PortInfo:
        return PortInfo(n, f"p{n}", "00:00:00:00:00:00", up)

    view = NetworkView()
    view.add_switch(SwitchInfo(0xF01, OTS, 1, "X", {1: port(1, True), 3: port(3, False)}))  # X:3 failed
    app = reservations_app.ReservationsApp(**{VIEW: view, SOUTHBOUND: OpenFlowSouthbound(), ROUTES: ApiRoutes()})
    app.holdoff = 0.5
    g = spec_to_graph(fig2_testbed())
    orders = groomed_orders(2)
    for o in orders:
        app.manager.active[o.id] = circuit_for(g, o.id, o.src, o.dst, o.path["edges"], o.src_vlan)
    calls: list = []
    monkeypatch.setattr(reservations_app, "restore_together",
                        lambda m, os_, cause, det, avoid, attempt=1: calls.append([o.id for o in os_])
                        or [Outcome(o.id, "restore", False, "DEGRADED", "no path") for o in os_])
    monkeypatch.setattr(app, "_db", lambda name, ids: [o for o in orders if o.id in ids])
    (unit,) = sr.failure_units(app.manager.active, app.failures())
    # the port comes back during the hold-off: nothing is restored
    monkeypatch.setattr(reservations_app.hub, "sleep", lambda s: view.set_port(0xF01, 3, port(3, True), 2.0))
    app.busy.update(unit.ids)
    app._restore_unit(unit, 1.0)
    assert calls == [] and app.busy == set()
    # it stays down: one restoration of both; the DEGRADED ones are retried
    monkeypatch.setattr(reservations_app.hub, "sleep", lambda s: None)
    view.set_port(0xF01, 3, port(3, False), 3.0)
    app.busy.update(unit.ids)
    app._restore_unit(unit, 1.0)
    assert calls == [[1, 2]] and app.busy == set() and set(app.retry) == {1, 2}
