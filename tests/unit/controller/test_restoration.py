"""Restoration (docs/failures.md): failures read from port states, and a reservation a cut fibre broke
re-lit on a path around it by the manager, over the fake Fig. 2 network — or DEGRADED with nothing
left installed when no path is left."""
from __future__ import annotations

from dataclasses import dataclass, field

from app.controller.failures import Failures, broken_by, failures_of
from app.controller.model import OTS, PACKET, PortInfo, SwitchInfo
from app.update.model import XconSpec
from tests.unit.controller.test_reservations import FakeStore, Order, manager, net, stored_path  # noqa: F401
from topology.spec import fig2_testbed, spec_to_graph


def _port(n: int, up: bool, admin_down: bool = False) -> PortInfo:
    return PortInfo(n, f"p{n}", "00:00:00:00:00:00", up, admin_down=admin_down)


def test_a_fault_is_a_down_ots_port_that_is_not_dark_or_an_admin_down_packet_port() -> None:
    x = SwitchInfo(0xF01, OTS, 1, "X", {1: _port(1, False, admin_down=True),  # darkened by loss of light
                                       3: _port(3, False),  # link down, admin up: the fibre failed here
                                       4: _port(4, False, admin_down=True),  # unused, dark
                                       2: _port(2, True)})
    a = SwitchInfo(0xA1, PACKET, 4, "A", {3: _port(3, False),  # dark circuit behind it: not a fault
                                         4: _port(4, False, admin_down=True)})  # cable unplugged by somebody
    f = failures_of([x, a], expected_ots=["X", "Y", "Z"])
    assert set(f.ports) == {("X", 3), ("A", 4)} and f.unreachable == {"Y", "Z"}
    g = spec_to_graph(fig2_testbed())
    ex = set(f.exclude(g))
    assert {"X:3", "Z:3", "X:4"} <= ex  # the failed port, its fibre's far end, A:4's OTS port
    assert {"Y:1", "Y:4", "Z:2"} <= ex  # every port of the OTSes the controller cannot reach
    assert "X:1" not in ex and "X:2" not in ex
    assert broken_by([XconSpec("X", 1, 3)], [("A", 3), ("C", 1)], f) == "loss of light at X:3"
    assert broken_by([XconSpec("X", 1, 2)], [("A", 3), ("B", 1)], f) is None
    assert not Failures() and broken_by([XconSpec("X", 1, 3)], [], Failures()) is None


@dataclass
class RestoringStore(FakeStore):
    restorations: list[dict] = field(default_factory=list)

    def mark_restoring(self, res_id, cause, now):
        if self.states.get(res_id) not in ("ACTIVE", "DEGRADED", "RESTORING"):
            return False
        self.states[res_id], self.reasons[res_id] = "RESTORING", cause
        return True

    def mark_restored(self, res_id, circuits, rules, path, restoration, now):
        self.restorations.append({**restoration, "outcome": "restored", "finished_ts": now})
        ok = self.mark_active(res_id, circuits, rules, now)
        return ok

    def mark_degraded(self, res_id, reason, restoration, now):
        self.installed.pop(res_id, None)
        self.restorations.append({**restoration, "outcome": "degraded", "reason": reason})
        self.states[res_id], self.reasons[res_id] = "DEGRADED", reason
        return True


def test_a_cut_fibre_is_restored_on_a_path_around_it(net):  # noqa: F811
    store = RestoringStore()
    m, events = manager(net, store)
    order = stored_path(Order(7))
    assert m.provision(order).ok
    assert {x.ots for x in m.active[7].xcons} == {"X", "Z"}  # X 1<->3, Z 3<->2: over the fibre X:3-Z:3
    net.cut_fibre(("X", 3))
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) is None  # dark
    out = m.restore(order, "loss of light at X:3", 100.0, avoid=("X:3", "Z:3"))
    assert out.ok and out.state == "ACTIVE" and store.states[7] == "ACTIVE", out
    used = {(x.ots, p) for x in m.active[7].xcons for p in x.ports}
    assert not used & {("X", 3), ("Z", 3)}
    assert all(not ({("X", 3), ("Z", 3)} & {(x.ots, p) for p in x.ports}) for x in net.all_xcons())
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"
    assert net.delivered_to("h3", {"eth_dst": "00:00:00:00:00:01"}) == "h1"
    (row,) = store.restorations
    assert row["outcome"] == "restored" and row["cause"] == "loss of light at X:3"
    assert "optical:X:3-Z:3" in row["old_path"] and "optical:X:3-Z:3" not in row["new_path"]
    kinds = [k for k, _ in events]
    assert kinds.index("reservation_restoring") < kinds.index("reservation_restored")
    assert [p["kind"] for p in store.plans[-2:]] == ["release", "provision"]  # old down, new lit and verified
    assert any(s["kind"] == "verify" and s["ok"] for s in store.plans[-1]["steps"])


def test_no_path_left_degrades_with_nothing_installed(net):  # noqa: F811
    store = RestoringStore()
    m, events = manager(net, store)
    order = stored_path(Order(8))
    assert m.provision(order).ok
    every_fibre_of_x = ("X:2", "X:3", "X:5", "X:6", "Y:1", "Z:3", "Z:5", "Z:6")
    for p in (2, 3, 5, 6):
        net.cut_fibre(("X", p))
    out = m.restore(order, "loss of light at X:3", 100.0, avoid=every_fibre_of_x)
    assert not out.ok and out.state == "DEGRADED" and store.states[8] == "DEGRADED"
    assert "no path" in store.reasons[8]
    assert net.all_xcons() == set() and net.all_flows() == [] and 8 not in m.active
    assert any(k == "reservation_degraded" for k, _ in events)
    for p in (2, 3, 5, 6):  # repaired: the retry lights it again
        net.cut_fibre(("X", p), repair=True)
    out = m.restore(order, "retry 2 after a failure", 100.0, avoid=(), attempt=2)
    assert out.ok and store.states[8] == "ACTIVE"
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"


def test_a_reservation_that_is_not_lit_is_left_alone(net):  # noqa: F811
    store = RestoringStore()
    m, _ = manager(net, store)
    store.states[9] = "FINISHED"
    out = m.restore(stored_path(Order(9)), "loss of light at X:3", 100.0, avoid=())
    assert not out.ok and out.state == "NOT_LIT" and net.all_xcons() == set()


def test_the_published_topology_marks_failed_ports_and_fibres() -> None:
    from app.controller.topology_publisher import mark_failures

    g = spec_to_graph(fig2_testbed())
    data = mark_failures(g.to_dict(), Failures({("X", 3): "loss of light at X:3"}))
    nodes = {n["id"]: n for n in data["nodes"]}
    assert nodes["X:3"]["failed"] == "loss of light at X:3" and "failed" not in nodes["Z:3"]
    failed = {lk["key"] for lk in data["links"] if lk.get("failed")}
    assert failed == {"optical:X:3-Z:3"}
    assert mark_failures(g.to_dict(), Failures()) == g.to_dict()
    data = mark_failures(g.to_dict(), Failures({("A", 4): "A:4 administratively down"}))
    assert {lk["key"]: lk["failed"] for lk in data["links"] if lk.get("failed")} == {
        "adaptation:A:4-X:4": "A:4 administratively down"}


def test_a_protected_reservation_fails_over_and_is_protected_again(net):  # noqa: F811
    """1+1: the cut working path → the ingress switch already sends on the protection path (no
    controller message); restore() then takes the broken path down and lights a new protection path
    around the cut, disjoint from the survivor; a second cut fails over to it."""
    from tests.unit.controller.test_protected_circuits import protected_order

    store = RestoringStore()
    m, events = manager(net, store)
    order = protected_order(21)
    assert m.provision(order).ok and store.states[21] == "ACTIVE"
    working = [e for e in order.path["edges"] if e.startswith("optical:")]
    a, b = working[0][len("optical:"):].split("-")
    net.cut_fibre((a.split(":")[0], int(a.split(":")[1])))
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"  # the group switched by itself
    out = m.restore(order, f"loss of light at {a}", 100.0, avoid=(a, b))
    assert out.ok and store.states[21] == "ACTIVE", out
    (row,) = store.restorations
    assert f"optical:{a}-{b}" not in row["new_path"]
    assert any(k == "reservation_restored" and d.get("reprotected") for k, d in events)
    lit = {(x.ots, p) for x in m.active[21].xcons for p in x.ports}
    assert not lit & {(a.split(":")[0], int(a.split(":")[1])), (b.split(":")[0], int(b.split(":")[1]))}
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"
    # the survivor is now the working path; cut it: the new protection path takes over by itself
    prot = [e for e in order.path["protection"]["edges"] if e.startswith("optical:")][0][len("optical:"):]
    p1 = prot.split("-")[0]
    net.cut_fibre((p1.split(":")[0], int(p1.split(":")[1])))
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"


def test_a_protected_reservation_with_no_new_protection_runs_unprotected(net):  # noqa: F811
    from tests.unit.controller.test_protected_circuits import protected_order

    store = RestoringStore()
    m, events = manager(net, store)
    order = protected_order(22)
    assert m.provision(order).ok
    working = [e for e in order.path["edges"] if e.startswith("optical:")][0][len("optical:"):]
    a, b = working.split("-")
    net.cut_fibre((a.split(":")[0], int(a.split(":")[1])))
    every_other = ("X:2", "Y:1", "Y:4", "Z:1")  # no third way left beside the survivor
    out = m.restore(order, f"loss of light at {a}", 100.0, avoid=(a, b, *every_other))
    assert not out.ok and out.state == "ACTIVE" and "unprotected" in out.reason, out
    assert store.states[22] == "ACTIVE" and 22 in m.unprotected
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"  # on the survivor
    assert any(k == "reservation_unprotected" for k, _ in events)


def test_a_reservation_lit_on_another_path_than_the_stored_one_records_it(net):  # noqa: F811
    """The stored path's X 1<->3 is held by another circuit: the manager lights a new path and the store
    is told that path (a restoration later starts from what is lit, not from a stale record)."""
    store = RestoringStore()
    m, _ = manager(net, store, busy_ports=lambda ots: {1, 3} if ots == "X" else set())
    order = stored_path(Order(31))
    assert m.provision(order).ok
    assert "optical:X:3-Z:3" in order.path["edges"] and "optical:X:3-Z:3" not in store.paths[31]["edges"]


def test_reprotection_reuses_the_failed_paths_ports_while_the_live_graph_still_shows_it_lit() -> None:
    """At the moment of the cut the live graph still has the failed path's XCONs active and LLDP's packet
    link over it; the new protection path may reuse its end ports (it is taken down first)."""
    from types import SimpleNamespace

    from app.controller import protected_circuits as pcs
    from pce.protection import protected_paths
    from pce.reservation import PathRequest

    g = spec_to_graph(fig2_testbed())
    path = protected_paths(g, PathRequest("A:1", "C:3", 2.0, 0, 3600)).to_dict()
    lit = pcs.protected_circuit(g, 2, "A:1", "C:3", path["edges"], path["protection"]["edges"]).circuit
    for x in lit.xcons:
        g.set_xcon_active(f"{x.ots}:{x.in_port}", f"{x.ots}:{x.out_port}", True)
    for (a, pa), (b, pb) in lit.segments:
        g.add_packet_link(a, pa, b, pb, 10.0, source="lldp")
    order = SimpleNamespace(id=2, src="A:1", dst="C:3", bandwidth=2.0, start=0, end=3600, path=path, src_vlan=None,
                            protection="1+1")
    busy = {x.ots: set() for x in lit.xcons}
    for x in lit.xcons:
        busy[x.ots] |= set(x.ports)
    cut = [e for e in path["edges"] if e.startswith("optical:")][0][len("optical:"):].split("-")
    r = pcs.reprotection(g, order, lit, cut, lambda o: busy.get(o, set()))
    new = r.path["protection"]["edges"]
    assert f"optical:{cut[0]}-{cut[1]}" not in new and any(e.startswith("adaptation:A:3") for e in new)


def test_the_app_restores_what_a_fault_broke_in_the_same_event_unless_frozen(monkeypatch) -> None:
    """reservations_app: a port change that is a fault under a lit reservation spawns its restoration at
    once (the event itself); an operator freeze (POST /restoration) holds it, a thaw catches up."""
    from types import SimpleNamespace

    from app.controller import reservations_app
    from app.controller.api_routes import CONTEXT as ROUTES
    from app.controller.api_routes import ApiRoutes
    from app.controller.control_api import ApiError
    from app.controller.network_view import CONTEXT as VIEW
    from app.controller.network_view import NetworkView
    from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
    from app.controller.openflow_southbound import OpenFlowSouthbound
    from app.controller.reservation_circuits import circuit_for

    view = NetworkView()
    view.add_switch(SwitchInfo(0xF01, OTS, 1, "X", {1: _port(1, True), 3: _port(3, True)}))
    app = reservations_app.ReservationsApp(**{VIEW: view, SOUTHBOUND: OpenFlowSouthbound(), ROUTES: ApiRoutes()})
    app.writer = SimpleNamespace()  # a database is configured (nothing is written in this test)
    g = spec_to_graph(fig2_testbed())
    app.manager.active[5] = circuit_for(g, 5, "A:1", "C:3", stored_path(Order(5)).path["edges"], None)
    spawned: list = []
    monkeypatch.setattr(reservations_app.hub, "spawn", lambda fn, *a: spawned.append((fn, a)))
    app._network_changed(None)
    assert spawned == []  # nothing failed
    view.set_port(0xF01, 3, _port(3, False), 1.0)  # X:3 link down, admin up: the fibre failed here
    assert app.r_restoration({}, {"frozen": True, "reason": "maintenance"}) == {"frozen": True, "reason": "maintenance"}
    app._network_changed(None)
    assert spawned == [] and app.r_reservations({}, {})["restoration"]["frozen"] is True
    assert app.r_reservations({}, {})["failures"] == {"X:3": "loss of light at X:3"}
    app.r_restoration({}, {"frozen": False})  # thawed: what broke meanwhile is restored now
    assert len(spawned) == 1 and spawned[0][1][0] == 5 and 5 in app.busy
    app._network_changed(None)
    assert len(spawned) == 1  # already being restored
    for bad in ({}, {"frozen": "yes"}, {"frozen": True, "reason": ""}):
        try:
            app.r_restoration({}, bad)
        except ApiError as exc:
            assert exc.status == 400
        else:
            raise AssertionError(f"accepted {bad}")


def test_reprotection_pins_the_groups_to_the_survivor_before_anything_else() -> None:
    """The new protection path's end port comes up again when its XCON is lit, before its rules are in:
    the groups must not fail back onto it meanwhile, so the first steps set them to the survivor alone."""
    from app.controller import protected_circuits as pcs
    from app.update.plan import GroupStep
    from pce.protection import protected_paths, reprotect
    from pce.reservation import PathRequest

    g = spec_to_graph(fig2_testbed())
    pair = protected_paths(g, PathRequest("A:1", "C:3", 2.0, 0, 3600))
    old = pcs.protected_circuit(g, 4, "A:1", "C:3", pair.working.edges, pair.protection.edges)
    cut = [e for e in pair.working.edges if e.startswith("optical:")][0][len("optical:"):].split("-")
    new_prot = reprotect(g, PathRequest("A:1", "C:3", 2.0, 0, 3600), pair.protection.edges, failed=cut)
    new = pcs.protected_circuit(g, 4, "A:1", "C:3", pair.protection.edges, new_prot.edges)
    down, up = pcs.reprotect_plans(old.circuit, new)
    pins = [s for s in down.steps if isinstance(s, GroupStep)]
    assert {(p.group.switch, p.group.ports) for p in pins} == {("A", (4,)), ("C", (2,))}
    assert all(not p.deps for p in pins)
    pin_ids = {p.id for p in pins}
    assert all(s.deps for s in down.steps if s not in pins)  # everything else after the pins
    assert all(not s.deps or s.deps & pin_ids or s.deps - pin_ids for s in down.steps)
    final = [s for s in up.steps if isinstance(s, GroupStep)]
    assert {(s.group.switch, s.group.ports) for s in final} == {("A", (4, 3)), ("C", (2, 1))}
